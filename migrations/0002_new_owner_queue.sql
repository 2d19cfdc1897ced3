-- quota schema, migration 0002: new owners are created through a request queue.
--
-- A state table's BEFORE INSERT trigger runs for every consume and record, and SQLite
-- prepares the memory of its whole body each time, even when its WHEN clause is false. The
-- body that created a new owner's row (the "unknown limit" check and an INSERT ... SELECT of
-- every state column) made that cost about 12,000 instructions per request, a third of a
-- bare upsert. Now the trigger only queues (state table, limit, owner) in quota_new_owners,
-- and that table's own triggers do the work, for new owners only: about 5,000 instructions
-- fewer per request (README "Performance").
--
-- quota_new_owners: a request queue, like quota_resets. Inserting (state_table, limit_name,
--   owner) creates the owner's empty row in state_table, or raises "unknown limit" when no
--   limit of that name and table exists, and then deletes the request row itself. It is
--   always empty between statements.

CREATE TABLE quota_new_owners (
  state_table TEXT NOT NULL
    CHECK (state_table IN ('quota_windows', 'quota_log_owners', 'quota_buckets')),
  limit_name  TEXT NOT NULL,
  owner       TEXT NOT NULL
) STRICT;

DROP TRIGGER quota_windows_new_owner;
DROP TRIGGER quota_log_owners_new_owner;
DROP TRIGGER quota_buckets_new_owner;

-- A new owner: queue the creation of its empty row, so that the request's upsert finds it and
-- decides in DO UPDATE. Only the request's own row (cost set) does this; the empty row (cost
-- NULL) does not fire it again.
CREATE TRIGGER quota_windows_new_owner BEFORE INSERT ON quota_windows
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_windows
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_new_owners VALUES ('quota_windows', NEW.limit_name, NEW.owner);
END;

CREATE TRIGGER quota_log_owners_new_owner BEFORE INSERT ON quota_log_owners
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_log_owners
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_new_owners VALUES ('quota_log_owners', NEW.limit_name, NEW.owner);
END;

CREATE TRIGGER quota_buckets_new_owner BEFORE INSERT ON quota_buckets
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_buckets
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_new_owners VALUES ('quota_buckets', NEW.limit_name, NEW.owner);
END;

-- The queued creation: the empty row, or "unknown limit" for a limit that does not exist or
-- is of an algorithm stored in another table.
CREATE TRIGGER quota_new_owners_windows AFTER INSERT ON quota_new_owners
WHEN NEW.state_table = 'quota_windows' BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm IN ('fixed_window', 'sliding_window'));
  INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, used, previous_used, denied)
  SELECT name, NEW.owner, maximum, period_ms, 0, 0, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_new_owners WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER quota_new_owners_log_owners AFTER INSERT ON quota_new_owners
WHEN NEW.state_table = 'quota_log_owners' BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm = 'sliding_log');
  INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, recorded, denied)
  SELECT name, NEW.owner, maximum, period_ms, 0, 0, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_new_owners WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER quota_new_owners_buckets AFTER INSERT ON quota_new_owners
WHEN NEW.state_table = 'quota_buckets' BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm = 'token_bucket');
  INSERT INTO quota_buckets (limit_name, owner, maximum, period_ms, burst, level, denied)
  SELECT name, NEW.owner, maximum, period_ms, burst, burst * period_ms, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_new_owners WHERE rowid = NEW.rowid;
END;
