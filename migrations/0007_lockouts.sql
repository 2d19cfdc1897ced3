-- quota schema, migration 0007: lockouts. A limit may block an owner after a denial.
--
--   ALTER TABLE  quota_limits     ADD COLUMN block_ms;
--   ALTER TABLE  quota_windows    ADD COLUMN blocked_until_ms;
--   ALTER TABLE  quota_log_owners ADD COLUMN blocked_until_ms;
--   ALTER TABLE  quota_buckets    ADD COLUMN blocked_until_ms;
--   CREATE VIEW  quota_usage;  -- as in 0006, with blocked_until_ms
--
-- quota_limits.block_ms: NULL (no lockout), or 1 ms to 366 days. A consume that the limit
--   denies as rate_limited then blocks the owner until t + block_ms, and answers a
--   retry_after_ms of at least block_ms. While t < that end, consume and check answer allowed
--   0, reason 'blocked', remaining 0, retry_after_ms = the end - t (or the algorithm's own
--   wait, if longer); a blocked consume records nothing, counts in denied and leaves the end
--   where it is; record still records and answers 'blocked'; a refund gives back usage and
--   leaves the block. A limit in shadow mode, or without block_ms, answers as if no owner were
--   blocked (its stored ends are ignored, not erased), and an exempt owner is never blocked.
--   reset deletes the owner's row and so lifts the block.
--   Example (block_ms 3600000, maximum 1 per 60000; owner u):
--     consume :now=0     -> allowed 1, ok
--     consume :now=10    -> allowed 0, rate_limited, retry 3600000  (blocked until 3600010)
--     check   :now=70000 -> allowed 0, blocked,      retry 3530010
--
-- blocked_until_ms (every state table): the end of the owner's latest block (Unix ms), NULL
--   when none; an end that has passed is cleared by the owner's next write. The statements
--   (src/statements.cpp) read it from the owner's locked row and write it in the same upsert,
--   so any SQLite client gets the same lockouts.
--
-- quota_usage.blocked_until_ms: the end of the owner's block while it holds, else NULL; while
--   it holds, remaining is 0 (an exempt owner's is still its capacity), as check answers.
--   Example: who is locked out now:
--     SELECT limit_name, owner, blocked_until_ms FROM quota_usage
--     WHERE blocked_until_ms IS NOT NULL;
--
-- Adding columns keeps every row: an existing owner reads as not blocked.

ALTER TABLE quota_limits ADD COLUMN
  block_ms INTEGER CHECK (block_ms BETWEEN 1 AND 31622400000);
ALTER TABLE quota_windows ADD COLUMN blocked_until_ms INTEGER;
ALTER TABLE quota_log_owners ADD COLUMN blocked_until_ms INTEGER;
ALTER TABLE quota_buckets ADD COLUMN blocked_until_ms INTEGER;

-- quota_usage, as in 0006, with the end of each owner's block while it holds.
DROP VIEW quota_usage;
CREATE VIEW quota_usage AS
SELECT limit_name, owner, used,
       CASE WHEN policy = 'exempt' THEN capacity WHEN policy = 'deny' OR blocked THEN 0
            ELSE max(capacity - used, 0) END AS remaining,
       denied, reset_at_ms,
       strftime('%Y-%m-%dT%H:%M:%fZ', reset_at_ms / 1000.0, 'unixepoch') AS reset_at,
       shadow_denied,
       CASE WHEN blocked THEN blocked_until_ms END AS blocked_until_ms
FROM (
-- A block holds on a limit with a block that is not in shadow mode, for an owner that is
-- not exempt (the statements' rule).
SELECT usage_rows.*,
       coalesce(blocked_until_ms IS NOT NULL AND l.block_ms IS NOT NULL AND NOT l.shadow
                AND coalesce(policy, '') <> 'exempt', FALSE) AS blocked
FROM (
  -- sliding_log: the running total minus the total before the first row that still counts.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied, used,
         CASE WHEN used > 0 THEN newest_at_ms + period_ms ELSE t END AS reset_at_ms,
         CASE WHEN row_blocked_until > t THEN row_blocked_until END AS blocked_until_ms
  FROM (
    SELECT o.limit_name, o.owner, l.policy, l.maximum AS capacity, l.period_ms, o.denied,
           o.shadow_denied, o.newest_at_ms, o.t, o.blocked_until_ms AS row_blocked_until,
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
              ELSE t END AS reset_at_ms,
         CASE WHEN row_blocked_until > t THEN row_blocked_until END AS blocked_until_ms
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
               w.blocked_until_ms AS row_blocked_until,
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
              ELSE t + (capacity * period_ms - level - 1) / maximum + 1 END AS reset_at_ms,
         CASE WHEN row_blocked_until > t THEN row_blocked_until END AS blocked_until_ms
  FROM (
    SELECT *, CASE WHEN start >= capacity * period_ms THEN capacity * period_ms
                   WHEN t - seen_ms >= (capacity * period_ms - start - 1) / maximum + 1
                   THEN capacity * period_ms
                   ELSE start + maximum * (t - seen_ms) END AS level
    FROM (
      SELECT b.limit_name, b.owner, l.policy, l.maximum, l.period_ms, l.burst AS capacity,
             b.denied, b.shadow_denied, b.seen_ms, b.blocked_until_ms AS row_blocked_until,
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
) AS usage_rows
JOIN quota_limits AS l ON l.name = usage_rows.limit_name
) AS blocking_rows
WHERE used > 0 OR denied > 0 OR shadow_denied > 0;
