-- quota schema, migration 0010: the plain flag. A limit that uses none of the policies is
-- marked, so that its consume can run a statement that pays for none of them.
--
--   ALTER TABLE    quota_limits ADD COLUMN plain;
--   CREATE VIEW    quota_limits_plain(name, plain);
--   CREATE TRIGGER quota_limits_plain_added, quota_limits_plain_changed;
--   CREATE TRIGGER quota_overrides_plain_added, _removed, _changed;
--
-- quota_limits.plain: 1 while the limit is plain, else 0. A limit is plain when it is not in
--   shadow mode, has no block_ms and no calendar, and no override names it or '*' (an
--   override of '*' for any owner makes every limit not plain, whatever its owner). The
--   triggers below keep it true after every change, by the library, quotactl or any SQL
--   client: an insert or update of a limit, and an insert, delete or update of an override.
--   Nothing else should write it; a value written by hand is corrected by the limit's next
--   change only.
--   The engine's plain statements (src/statements.cpp, docs/sql.md "A plain limit's consume
--   and record") read it inside the statement as their guard: a limit that stopped being
--   plain finds no decision there, the statement changes nothing, and the engine runs the
--   general statement (the one `quotactl sql` prints, right for every configuration).
--   Example:
--     INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('*', 'k', 'exempt');
--     SELECT name, plain FROM quota_limits;   -- every limit: plain 0
--     DELETE FROM quota_overrides WHERE limit_name = '*' AND owner = 'k';
--     SELECT name, plain FROM quota_limits;   -- plain 1 again where nothing else is set
--
-- The triggers on quota_limits watch the columns plain depends on and write only plain, which
-- they do not watch, so they never fire themselves (SQLite's recursive triggers may be on).
-- Existing limits get their flag here.

ALTER TABLE quota_limits ADD COLUMN
  plain INTEGER NOT NULL DEFAULT 0 CHECK (plain IN (0, 1));

-- quota_limits_plain: what each limit's flag should be, the rule written once; the triggers
-- copy it into quota_limits.plain.
CREATE VIEW quota_limits_plain AS
SELECT l.name,
       CASE WHEN NOT l.shadow AND l.block_ms IS NULL AND l.calendar IS NULL
                 AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                                 WHERE o.limit_name IN (l.name, '*'))
            THEN 1 ELSE 0 END AS plain
FROM quota_limits AS l;

CREATE TRIGGER quota_limits_plain_added AFTER INSERT ON quota_limits BEGIN
  UPDATE quota_limits
  SET plain = (SELECT p.plain FROM quota_limits_plain AS p WHERE p.name = quota_limits.name)
  WHERE name = NEW.name;
END;

CREATE TRIGGER quota_limits_plain_changed
AFTER UPDATE OF name, shadow, block_ms, calendar ON quota_limits BEGIN
  UPDATE quota_limits
  SET plain = (SELECT p.plain FROM quota_limits_plain AS p WHERE p.name = quota_limits.name)
  WHERE name = NEW.name;
END;

CREATE TRIGGER quota_overrides_plain_added AFTER INSERT ON quota_overrides BEGIN
  UPDATE quota_limits SET plain = 0
  WHERE plain = 1 AND (name = NEW.limit_name OR NEW.limit_name = '*');
END;

CREATE TRIGGER quota_overrides_plain_removed AFTER DELETE ON quota_overrides BEGIN
  UPDATE quota_limits
  SET plain = (SELECT p.plain FROM quota_limits_plain AS p WHERE p.name = quota_limits.name)
  WHERE name = OLD.limit_name OR OLD.limit_name = '*';
END;

CREATE TRIGGER quota_overrides_plain_changed AFTER UPDATE OF limit_name ON quota_overrides
BEGIN
  UPDATE quota_limits
  SET plain = (SELECT p.plain FROM quota_limits_plain AS p WHERE p.name = quota_limits.name)
  WHERE name IN (OLD.limit_name, NEW.limit_name)
     OR '*' IN (OLD.limit_name, NEW.limit_name);
END;

UPDATE quota_limits
SET plain = (SELECT p.plain FROM quota_limits_plain AS p WHERE p.name = quota_limits.name);
