-- quota schema, migration 0004: the per-owner state is found by owner first.
--
--   quota_windows, quota_log_owners, quota_buckets: ordinary (rowid) tables with
--                                   UNIQUE (owner, limit_name), were WITHOUT ROWID with
--                                   PRIMARY KEY (limit_name, owner)
--   quota_log:                      PRIMARY KEY (owner, limit_name, at_ms), was
--                                   (limit_name, owner, at_ms)
-- The columns, their checks and every trigger on these tables are unchanged.
--
-- Why (README "Performance", callgrind instructions per operation, 1,000 owners in memory):
-- a consume rewrites its owner's row. In a WITHOUT ROWID table that rewrite searches the
-- table's b-tree again by the whole key, comparing the limit's name (the same in every row of
-- a limit) before the owner; in a rowid table the unique index finds the row once and the row
-- is overwritten by its rowid. Keys that start with the owner differ in their first bytes.
-- Consume, fixed_window 72.5k -> 65.4k, sliding_log 103.8k -> 97.1k; check 23.1k -> 23.6k.
-- A statement names the conflict target as (limit_name, owner), which is this index: the
-- order of the columns in ON CONFLICT does not matter.
--
-- What scans by limit now reads the whole table (removing a limit or changing its
-- algorithm, `quotactl usage LIMIT`): those are rare administrative operations, and the
-- requests are what runs all the time.
--
-- Each table is rebuilt by copy: renaming the new table into place would make SQLite check
-- (and rewrite) every view and trigger that names the old one. Dropping a table drops the
-- triggers on it, so those are created again here, word for word as before.

CREATE TABLE quota_windows_0003 AS SELECT * FROM quota_windows;
DROP TABLE quota_windows;
CREATE TABLE quota_windows (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  window_key          INTEGER,
  used                INTEGER CHECK (used >= 0),
  previous_used       INTEGER CHECK (previous_used >= 0),
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  UNIQUE (owner, limit_name)
) STRICT;
INSERT INTO quota_windows SELECT * FROM quota_windows_0003;
DROP TABLE quota_windows_0003;

CREATE TABLE quota_log_owners_0003 AS SELECT * FROM quota_log_owners;
DROP TABLE quota_log_owners;
CREATE TABLE quota_log_owners (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  total               INTEGER CHECK (total >= 0),
  newest_at_ms        INTEGER,
  recorded            INTEGER CHECK (recorded >= 0),
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  refunded            INTEGER CHECK (refunded >= 0),
  UNIQUE (owner, limit_name)
) STRICT;
INSERT INTO quota_log_owners SELECT * FROM quota_log_owners_0003;
DROP TABLE quota_log_owners_0003;

CREATE TABLE quota_log_0003 AS SELECT * FROM quota_log;
DROP TABLE quota_log;
CREATE TABLE quota_log (
  limit_name TEXT    NOT NULL,
  owner      TEXT    NOT NULL,
  at_ms      INTEGER NOT NULL,
  cost       INTEGER NOT NULL CHECK (cost >= 1),
  total      INTEGER NOT NULL CHECK (total >= cost),
  PRIMARY KEY (owner, limit_name, at_ms)
) STRICT, WITHOUT ROWID;
INSERT INTO quota_log SELECT * FROM quota_log_0003;
DROP TABLE quota_log_0003;

CREATE TABLE quota_buckets_0003 AS SELECT * FROM quota_buckets;
DROP TABLE quota_buckets;
CREATE TABLE quota_buckets (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  burst               INTEGER CHECK (burst >= 1),
  level               INTEGER CHECK (level >= -4611686018427387904),
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  UNIQUE (owner, limit_name)
) STRICT;
INSERT INTO quota_buckets SELECT * FROM quota_buckets_0003;
DROP TABLE quota_buckets_0003;

-- The triggers on the rebuilt tables, as migrations 0001-0003 created them.

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

-- The log of a sliding_log owner: what the latest request recorded becomes a row at
-- newest_at_ms (merged into the row of the same millisecond), and rows that expired by then
-- are deleted, so a request costs the same whether the limit is 10 or 100,000.
-- Example: period 1000, rows at 100, 900, 1500; recording at 2050 deletes 100 and 900
-- (<= 1050) and keeps 1500 and 2050.
CREATE TRIGGER quota_log_owners_record AFTER UPDATE ON quota_log_owners
WHEN NEW.recorded > 0 BEGIN
  INSERT INTO quota_log (limit_name, owner, at_ms, cost, total)
  VALUES (NEW.limit_name, NEW.owner, NEW.newest_at_ms, NEW.recorded, NEW.total)
  ON CONFLICT (limit_name, owner, at_ms) DO UPDATE SET
    cost = cost + excluded.cost, total = excluded.total;
  DELETE FROM quota_log
  WHERE limit_name = NEW.limit_name AND owner = NEW.owner
    AND at_ms <= NEW.newest_at_ms - NEW.period_ms;
END;

-- A refund of a sliding_log owner: the owner's new running total is NEW.total, lower by
-- NEW.refunded; the events recorded after it are given back, newest first. Events wholly
-- above the new total go; the one it falls inside keeps what is below it. Only the refund
-- statement sets refunded, so no other statement runs this trigger.
-- Example: events (at 100, cost 2, total 2), (at 200, cost 3, total 5); a refund of 4 sets
-- total 1: the event at 200 goes, the event at 100 becomes cost 1, total 1.
CREATE TRIGGER quota_log_owners_refund AFTER UPDATE OF refunded ON quota_log_owners
WHEN NEW.refunded > 0 BEGIN
  DELETE FROM quota_log
  WHERE limit_name = NEW.limit_name AND owner = NEW.owner AND total - cost >= NEW.total;
  UPDATE quota_log SET cost = cost - (total - NEW.total), total = NEW.total
  WHERE limit_name = NEW.limit_name AND owner = NEW.owner AND total > NEW.total;
END;
