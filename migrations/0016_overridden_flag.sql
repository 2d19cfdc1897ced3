-- quota schema, migration 0016: the overridden flag. A limit that no override concerns runs,
-- with shadow mode or a block, a statement that reads no override (docs/sql.md, "A limit's
-- own policies: the flat statements").
--
--   ALTER TABLE    quota_limits ADD COLUMN overridden;
--   CREATE VIEW    quota_limits_overridden(name, overridden);
--   CREATE TRIGGER quota_limits_overridden_added, quota_limits_overridden_renamed;
--   CREATE TRIGGER quota_overrides_overridden_added, _removed, _changed;
--
-- quota_limits.overridden: 1 while an override names the limit or '*' (an override of '*'
--   for any owner concerns every limit), else 0. The triggers below keep it true after every
--   change, by the library, quotactl or any SQL client: an insert or rename of a limit, and
--   an insert, delete or update of an override. Nothing else should write it.
--   The engine's flat statements (src/statements.cpp, "A limit's own policies") read it inside
--   the statement as their guard: a limit that an override concerns finds no decision there,
--   the statement changes nothing, and the engine runs the general statement (the one
--   `quotactl sql` prints, right for every configuration).
--   Example:
--     INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('*', 'k', 'exempt');
--     SELECT name, overridden FROM quota_limits;   -- every limit: overridden 1
--     DELETE FROM quota_overrides WHERE limit_name = '*' AND owner = 'k';
--     SELECT name, overridden FROM quota_limits;   -- 0 again where no override names it
--
-- The triggers on quota_limits watch only name and write only overridden, so they never fire
-- themselves (SQLite's recursive triggers may be on). Existing limits get their flag here.

ALTER TABLE quota_limits ADD COLUMN
  overridden INTEGER NOT NULL DEFAULT 0 CHECK (overridden IN (0, 1));

-- quota_limits_overridden: what each limit's flag should be, the rule written once; the
-- triggers copy it into quota_limits.overridden.
CREATE VIEW quota_limits_overridden AS
SELECT l.name,
       CASE WHEN EXISTS (SELECT 1 FROM quota_overrides AS o WHERE o.limit_name = l.name)
                 OR EXISTS (SELECT 1 FROM quota_overrides AS o WHERE o.limit_name = '*')
            THEN 1 ELSE 0 END AS overridden
FROM quota_limits AS l;

CREATE TRIGGER quota_limits_overridden_added AFTER INSERT ON quota_limits BEGIN
  UPDATE quota_limits
  SET overridden = (SELECT v.overridden FROM quota_limits_overridden AS v
                    WHERE v.name = quota_limits.name)
  WHERE name = NEW.name;
END;

CREATE TRIGGER quota_limits_overridden_renamed AFTER UPDATE OF name ON quota_limits BEGIN
  UPDATE quota_limits
  SET overridden = (SELECT v.overridden FROM quota_limits_overridden AS v
                    WHERE v.name = quota_limits.name)
  WHERE name = NEW.name;
END;

CREATE TRIGGER quota_overrides_overridden_added AFTER INSERT ON quota_overrides BEGIN
  UPDATE quota_limits SET overridden = 1
  WHERE overridden = 0 AND (name = NEW.limit_name OR NEW.limit_name = '*');
END;

CREATE TRIGGER quota_overrides_overridden_removed AFTER DELETE ON quota_overrides BEGIN
  UPDATE quota_limits
  SET overridden = (SELECT v.overridden FROM quota_limits_overridden AS v
                    WHERE v.name = quota_limits.name)
  WHERE name = OLD.limit_name OR OLD.limit_name = '*';
END;

CREATE TRIGGER quota_overrides_overridden_changed AFTER UPDATE OF limit_name ON quota_overrides
BEGIN
  UPDATE quota_limits
  SET overridden = (SELECT v.overridden FROM quota_limits_overridden AS v
                    WHERE v.name = quota_limits.name)
  WHERE name IN (OLD.limit_name, NEW.limit_name)
     OR '*' IN (OLD.limit_name, NEW.limit_name);
END;

UPDATE quota_limits
SET overridden = (SELECT v.overridden FROM quota_limits_overridden AS v
                  WHERE v.name = quota_limits.name);
