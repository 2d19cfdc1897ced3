-- quota schema, migration 0012: concurrency leases, limits on what is in flight at once.
--
--   quota_limits: rebuilt with the same columns, its algorithm also 'concurrency'
--   CREATE TABLE quota_lease_owners(limit_name, owner, maximum, period_ms, cost, seen_ms,
--                                   denied, shadow_denied, last_*);
--   CREATE TABLE quota_leases(id, limit_name, owner, cost, expires_at_ms, acquired_at_ms);
--
-- A concurrency limit (algorithm 'concurrency') bounds the units held at once by an owner's
-- unexpired leases: maximum is the capacity, period_ms the leases' time to live (TTL, 1 s to
-- 1 day); burst stays NULL and calendar and block_ms are refused by the library.
--
-- quota_leases: one row per lease. id is an opaque text unique in the database (32 hex
--   digits that the acquire statement draws at random); a lease holds `cost` units of its
--   owner's capacity while expires_at_ms > t, and is freed at expires_at_ms exactly, so that a
--   holder that died holds nothing after its TTL. release deletes the row; renew moves
--   expires_at_ms; gc deletes expired rows.
-- quota_lease_owners: one row per limit and owner that acquired: the owner's remembered time
--   (seen_ms), its denied and shadow_denied counters, and the last answer, which the acquire
--   statement's RETURNING reads. An update (or insert) whose last_lease is not NULL took a
--   lease: the trigger below inserts it into quota_leases in the same statement.
--   maximum NULL (the limit was not found) is refused by the check named "unknown limit".
--
-- quota_limits is rebuilt by copy, as 0006 rebuilt it (SQLite cannot change a CHECK in place):
-- dropping it drops its triggers, which are created again here as 0006, 0008, 0010 (the plain
-- flag) and 0011 (idempotency keys) created them. Dropping a table fires no trigger, so no
-- state is lost.

CREATE TABLE quota_limits_0011 AS SELECT * FROM quota_limits;
DROP TABLE quota_limits;
CREATE TABLE quota_limits (
  name      TEXT    NOT NULL PRIMARY KEY
            CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
  algorithm TEXT    NOT NULL
            CHECK (algorithm IN ('sliding_log', 'fixed_window', 'sliding_window', 'token_bucket',
                                 'concurrency')),
  maximum   INTEGER NOT NULL CHECK (maximum BETWEEN 1 AND 1000000000000),
  period_ms INTEGER NOT NULL CHECK (period_ms BETWEEN 1 AND 31622400000),
  burst     INTEGER CHECK (CASE algorithm WHEN 'token_bucket'
                           THEN burst BETWEEN 1 AND 1000000000000 ELSE burst IS NULL END),
  shadow    INTEGER NOT NULL DEFAULT 0 CHECK (shadow IN (0, 1)),
  block_ms  INTEGER CHECK (block_ms BETWEEN 1 AND 31622400000),
  calendar  TEXT CHECK (calendar IS NULL
                        OR (algorithm = 'fixed_window'
                            AND period_ms = CASE calendar WHEN 'day' THEN 86400000
                                                          WHEN 'week' THEN 604800000
                                                          WHEN 'month' THEN 2678400000
                                                          WHEN 'year' THEN 31622400000 END)),
  utc_offset_ms INTEGER NOT NULL DEFAULT 0
  CHECK (utc_offset_ms BETWEEN -50400000 AND 50400000 AND utc_offset_ms % 60000 = 0
         AND (calendar IS NOT NULL OR utc_offset_ms = 0)),
  anchor_ms INTEGER CHECK (anchor_ms IS NULL
                           OR (calendar IS NOT NULL AND anchor_ms BETWEEN 0 AND 253402300800000)),
  plain     INTEGER NOT NULL DEFAULT 0 CHECK (plain IN (0, 1)),
  CHECK (algorithm <> 'sliding_window' OR maximum <= 4611686018427387904 / period_ms),
  CHECK (algorithm <> 'token_bucket'
         OR (maximum <= 4611686018427387904 / period_ms
             AND burst <= 2305843009213693952 / period_ms)),
  CHECK (algorithm <> 'concurrency' OR (period_ms BETWEEN 1000 AND 86400000 AND block_ms IS NULL))
) STRICT, WITHOUT ROWID;
INSERT INTO quota_limits SELECT * FROM quota_limits_0011;
DROP TABLE quota_limits_0011;

CREATE TABLE quota_lease_owners (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  cost                INTEGER,
  seen_ms             INTEGER,
  denied              INTEGER CHECK (denied >= 0),
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  last_shadow_denied  INTEGER,
  last_lease          TEXT,
  last_expires_at_ms  INTEGER,
  UNIQUE (owner, limit_name)
) STRICT;

CREATE TABLE quota_leases (
  id             TEXT    NOT NULL PRIMARY KEY,
  limit_name     TEXT    NOT NULL,
  owner          TEXT    NOT NULL,
  cost           INTEGER NOT NULL CHECK (cost BETWEEN 1 AND 1000000000000),
  expires_at_ms  INTEGER NOT NULL,
  acquired_at_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The statements sum an owner's unexpired leases and find the next to expire by this index.
CREATE INDEX quota_leases_by_owner ON quota_leases (owner, limit_name, expires_at_ms);

-- A write of the owner's row that took a lease (last_lease set) inserts it.
CREATE TRIGGER quota_lease_owners_taken AFTER UPDATE ON quota_lease_owners
WHEN NEW.last_lease IS NOT NULL BEGIN
  INSERT INTO quota_leases (id, limit_name, owner, cost, expires_at_ms, acquired_at_ms)
  VALUES (NEW.last_lease, NEW.limit_name, NEW.owner, NEW.cost, NEW.last_expires_at_ms,
          NEW.seen_ms);
END;

CREATE TRIGGER quota_lease_owners_first AFTER INSERT ON quota_lease_owners
WHEN NEW.last_lease IS NOT NULL BEGIN
  INSERT INTO quota_leases (id, limit_name, owner, cost, expires_at_ms, acquired_at_ms)
  VALUES (NEW.last_lease, NEW.limit_name, NEW.owner, NEW.cost, NEW.last_expires_at_ms,
          NEW.seen_ms);
END;

-- reset releases every lease of the owner and forgets its row.
CREATE TRIGGER quota_resets_leases AFTER INSERT ON quota_resets BEGIN
  DELETE FROM quota_lease_owners WHERE limit_name = NEW.limit_name AND owner = NEW.owner;
  DELETE FROM quota_leases WHERE limit_name = NEW.limit_name AND owner = NEW.owner;
END;

-- The triggers on quota_limits, as 0006 and 0008 created them, and the leases' own: changing a
-- limit's algorithm or removing it discards its state, its leases too.
CREATE TRIGGER quota_limits_algorithm_changed AFTER UPDATE OF algorithm ON quota_limits
WHEN OLD.algorithm IS NOT NEW.algorithm BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
  DELETE FROM quota_lease_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_leases WHERE limit_name = OLD.name;
END;

CREATE TRIGGER quota_limits_removed AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
  DELETE FROM quota_lease_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_leases WHERE limit_name = OLD.name;
END;

CREATE TRIGGER quota_limits_removed_overrides AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_overrides WHERE limit_name = OLD.name;
END;

CREATE TRIGGER quota_limits_removed_anchors AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_anchors WHERE limit_name = OLD.name;
END;

-- As 0010 created them: the plain flag follows the columns it depends on.
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

-- As 0011 created it: removing a limit removes its idempotency keys.
CREATE TRIGGER quota_limits_removed_keys AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_idempotency WHERE limit_name = OLD.name;
END;
