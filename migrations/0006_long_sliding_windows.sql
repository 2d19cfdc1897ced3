-- quota schema, migration 0006: sliding_window limits of any period, 1 ms to 366 days.
--
--   quota_limits: rebuilt with the same columns, without the 30-day bound of a sliding_window
--                 (its maximum x period_ms must still be at most 2^62)
--   CREATE VIEW quota_usage;  -- as in 0003, its sliding_window `used` exact for every period
--
-- A sliding_window's period was limited to 30 days because the usage it shows,
-- cur + ceil(prev * rest / P), was computed with the product (prev % P) * rest, which is
-- below P^2 and so beyond 64 bits for periods above 35 days. The product is now split
-- (rest = a * 2^18 + b, with x = (prev % P) * a):
--   ceil((prev % P) * rest / P) = (x / P) * 2^18 + ceil(((x % P) * 2^18 + (prev % P) * b) / P)
-- whose every term stays below 2^54 for periods up to 2^35 ms (366 days is below 2^35). The
-- decisions (src/statements.cpp) compute the same. Every other product of a sliding_window is
-- a count below its maximum times P, which the check on maximum x period_ms keeps within 2^62.
-- Example: maximum 10 per 90 days; 9 units recorded in one window weigh 9 x (P - e) / P in the
-- next one, rounded up: 5 when e is half a period, 1 in its last millisecond.
--
-- quota_limits is rebuilt by copy, as 0004 rebuilt the state tables (SQLite cannot change a
-- CHECK in place): dropping it drops its triggers, which are created again here word for word
-- as 0001 and 0003 created them. Dropping a table fires no trigger, so no state is lost.

CREATE TABLE quota_limits_0005 AS SELECT * FROM quota_limits;
DROP TABLE quota_limits;
CREATE TABLE quota_limits (
  name      TEXT    NOT NULL PRIMARY KEY
            CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
  algorithm TEXT    NOT NULL
            CHECK (algorithm IN ('sliding_log', 'fixed_window', 'sliding_window', 'token_bucket')),
  maximum   INTEGER NOT NULL CHECK (maximum BETWEEN 1 AND 1000000000000),
  period_ms INTEGER NOT NULL CHECK (period_ms BETWEEN 1 AND 31622400000),
  burst     INTEGER CHECK (CASE algorithm WHEN 'token_bucket'
                           THEN burst BETWEEN 1 AND 1000000000000 ELSE burst IS NULL END),
  shadow    INTEGER NOT NULL DEFAULT 0 CHECK (shadow IN (0, 1)),
  CHECK (algorithm <> 'sliding_window' OR maximum <= 4611686018427387904 / period_ms),
  CHECK (algorithm <> 'token_bucket'
         OR (maximum <= 4611686018427387904 / period_ms
             AND burst <= 2305843009213693952 / period_ms))
) STRICT, WITHOUT ROWID;
INSERT INTO quota_limits SELECT * FROM quota_limits_0005;
DROP TABLE quota_limits_0005;

-- The triggers on quota_limits, as migrations 0001 and 0003 created them.

-- Changing a limit's algorithm discards its state (the numbers would mean something else);
-- changing only its numbers keeps it. Removing a limit removes its state.
CREATE TRIGGER quota_limits_algorithm_changed AFTER UPDATE OF algorithm ON quota_limits
WHEN OLD.algorithm IS NOT NEW.algorithm BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
END;

CREATE TRIGGER quota_limits_removed AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
END;

CREATE TRIGGER quota_limits_removed_overrides AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_overrides WHERE limit_name = OLD.name;
END;

-- quota_usage, as in 0003, with the sliding_window `used` computed without the product of two
-- numbers below the period.
DROP VIEW quota_usage;
CREATE VIEW quota_usage AS
SELECT limit_name, owner, used,
       CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0
            ELSE max(capacity - used, 0) END AS remaining,
       denied, reset_at_ms,
       strftime('%Y-%m-%dT%H:%M:%fZ', reset_at_ms / 1000.0, 'unixepoch') AS reset_at,
       shadow_denied
FROM (
  -- sliding_log: the running total minus the total before the first row that still counts.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied, used,
         CASE WHEN used > 0 THEN newest_at_ms + period_ms ELSE t END AS reset_at_ms
  FROM (
    SELECT o.limit_name, o.owner, l.policy, l.maximum AS capacity, l.period_ms, o.denied,
           o.shadow_denied, o.newest_at_ms, o.t,
           coalesce(o.total - (SELECT e.total - e.cost FROM quota_log AS e
                               WHERE e.limit_name = o.limit_name AND e.owner = o.owner
                                 AND e.at_ms > o.t - l.period_ms
                               ORDER BY e.at_ms LIMIT 1), 0) AS used
    FROM (SELECT *, max(seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                      AS INTEGER)) AS t
          FROM quota_log_owners) AS o
    JOIN quota_owner_limits AS l ON l.name = o.limit_name AND l.owner = o.owner
     AND l.algorithm = 'sliding_log'
  )
  UNION ALL
  -- fixed_window: the current window's count. sliding_window: that plus the previous
  -- window's count weighted by the part of it still inside the sliding period, rounded up.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied,
         CASE algorithm WHEN 'fixed_window' THEN cur
              ELSE cur + (prev / period_ms) * rest
                   + ((prev % period_ms) * (rest / 262144) / period_ms) * 262144
                   + (((prev % period_ms) * (rest / 262144)) % period_ms * 262144
                      + (prev % period_ms) * (rest % 262144) + period_ms - 1) / period_ms
              END AS used,
         CASE WHEN cur > 0 THEN (window_key + 1 + (algorithm = 'sliding_window')) * period_ms
              WHEN prev > 0 AND algorithm = 'sliding_window' THEN (window_key + 1) * period_ms
              ELSE t END AS reset_at_ms
  FROM (
    SELECT *, CASE WHEN row_key = window_key THEN row_used ELSE 0 END AS cur,
           CASE row_key WHEN window_key THEN row_previous WHEN window_key - 1 THEN row_used
                ELSE 0 END AS prev,
           (window_key + 1) * period_ms - t AS rest
    FROM (
      SELECT *, t / period_ms AS window_key
      FROM (
        SELECT w.limit_name, w.owner, l.policy, l.algorithm, l.maximum AS capacity, l.period_ms,
               w.denied, w.shadow_denied, w.used AS row_used, w.previous_used AS row_previous,
               max(w.seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                   AS INTEGER)) AS t,
               CASE WHEN w.period_ms = l.period_ms THEN w.window_key
                    ELSE w.seen_ms / l.period_ms END AS row_key
        FROM quota_windows AS w
        JOIN quota_owner_limits AS l ON l.name = w.limit_name AND l.owner = w.owner
         AND l.algorithm IN ('fixed_window', 'sliding_window')
      )
    )
  )
  UNION ALL
  -- token_bucket: capacity minus the tokens (rounded down) after refilling up to now.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied,
         capacity - CASE WHEN level >= 0 THEN level / period_ms
                         ELSE -((period_ms - 1 - level) / period_ms) END AS used,
         CASE WHEN level >= capacity * period_ms THEN t
              ELSE t + (capacity * period_ms - level - 1) / maximum + 1 END AS reset_at_ms
  FROM (
    SELECT *, CASE WHEN start >= capacity * period_ms THEN capacity * period_ms
                   WHEN t - seen_ms >= (capacity * period_ms - start - 1) / maximum + 1
                   THEN capacity * period_ms
                   ELSE start + maximum * (t - seen_ms) END AS level
    FROM (
      SELECT b.limit_name, b.owner, l.policy, l.maximum, l.period_ms, l.burst AS capacity,
             b.denied, b.shadow_denied, b.seen_ms,
             max(b.seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                 AS INTEGER)) AS t,
             CASE WHEN b.seen_ms IS NULL THEN l.burst * l.period_ms
                  WHEN b.period_ms = l.period_ms THEN min(b.level, l.burst * l.period_ms)
                  WHEN b.level / b.period_ms >= l.burst THEN l.burst * l.period_ms
                  ELSE max(CASE WHEN b.level >= 0 THEN b.level / b.period_ms
                                ELSE -((b.period_ms - 1 - b.level) / b.period_ms) END,
                           -(4611686018427387904 / l.period_ms)) * l.period_ms END AS start
      FROM quota_buckets AS b
      JOIN quota_owner_limits AS l ON l.name = b.limit_name AND l.owner = b.owner
       AND l.algorithm = 'token_bucket'
    )
  )
)
WHERE used > 0 OR denied > 0 OR shadow_denied > 0;
