-- quota schema, migration 0014: lockouts on concurrency limits.
--
--   quota_limits: rebuilt with the same columns; a concurrency limit may have a block_ms
--   ALTER TABLE quota_lease_owners ADD COLUMN blocked_until_ms;
--
-- A concurrency limit with block_ms blocks an owner whose acquire it denies as rate_limited
-- (every unit of its capacity held) until t + block_ms, as migration 0007 blocks the owners of
-- the other algorithms: while t is before that end, every acquire and check answers allowed 0,
-- reason 'blocked', remaining 0 and retry_after_ms = the end - t (or the wait for the leases,
-- if longer); a blocked acquire takes no lease, counts in denied and leaves the end where it
-- is; record still takes its lease and answers 'blocked'; release and renew are not refused.
-- Shadow mode ignores the stored ends, an exempt owner is never blocked, and reset (which
-- deletes the owner's row) lifts the block.
--   Example (maximum 1, TTL 60 s, block_ms 3600000; owner u):
--     acquire :now=0     -> allowed 1, lease L1 (until 60000)
--     acquire :now=10    -> allowed 0, rate_limited, retry 3600000  (blocked until 3600010)
--     release L1 :now=20; acquire :now=30 -> allowed 0, blocked, retry 3599980
--
-- quota_lease_owners.blocked_until_ms: the end of the owner's latest block (Unix ms), NULL
--   when none; an end that has passed is cleared by the owner's next write
--   (src/sql/lease_statements.cpp reads and writes it in the acquire's upsert).
--
-- quota_limits is rebuilt by copy, as 0012 rebuilt it, to drop "block_ms IS NULL" from the
-- concurrency CHECK (SQLite cannot change a CHECK in place): dropping it drops its triggers,
-- which are created again here exactly as 0012 created them. Dropping a table fires no
-- trigger, so no state is lost. Adding the column keeps every row: an existing owner reads as
-- not blocked.

CREATE TABLE quota_limits_0013 AS SELECT * FROM quota_limits;
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
  CHECK (algorithm <> 'concurrency' OR period_ms BETWEEN 1000 AND 86400000)
) STRICT, WITHOUT ROWID;
INSERT INTO quota_limits SELECT * FROM quota_limits_0013;
DROP TABLE quota_limits_0013;

ALTER TABLE quota_lease_owners ADD COLUMN blocked_until_ms INTEGER;

-- The triggers on quota_limits, as 0012 created them.
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

CREATE TRIGGER quota_limits_removed_keys AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_idempotency WHERE limit_name = OLD.name;
END;
