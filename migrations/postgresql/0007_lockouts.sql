-- quota schema on PostgreSQL, migration 0007: lockouts, as migrations/0007_lockouts.sql on
-- SQLite (read its header for what each column means).
--
--   ALTER TABLE  quota_limits     ADD COLUMN block_ms;
--   ALTER TABLE  quota_windows    ADD COLUMN blocked_until_ms;
--   ALTER TABLE  quota_log_owners ADD COLUMN blocked_until_ms;
--   ALTER TABLE  quota_buckets    ADD COLUMN blocked_until_ms;
--   CREATE OR REPLACE VIEW quota_usage;  -- as in 0006, with blocked_until_ms at the end
--
-- The view is replaced rather than dropped, so that the privileges granted on it (as
-- docs/postgresql-roles.sql grants them) stay. The decisions read blocked_until_ms from the
-- owner's row after its lock is held, like every other state column.

ALTER TABLE quota_limits ADD COLUMN block_ms bigint
  CONSTRAINT "valid block_ms" CHECK (block_ms BETWEEN 1 AND 31622400000);
ALTER TABLE quota_windows ADD COLUMN blocked_until_ms bigint;
ALTER TABLE quota_log_owners ADD COLUMN blocked_until_ms bigint;
ALTER TABLE quota_buckets ADD COLUMN blocked_until_ms bigint;

-- quota_usage, as in 0006, with the end of each owner's block while it holds (NULL otherwise).
CREATE OR REPLACE VIEW quota_usage AS
SELECT limit_name, owner, used,
       CASE WHEN policy = 'exempt' THEN capacity WHEN policy = 'deny' OR blocked THEN 0
            ELSE greatest(capacity - used, 0) END AS remaining,
       denied, reset_at_ms,
       CASE WHEN reset_at_ms BETWEEN -62135596800000 AND 253402300799999
            THEN to_char(timestamp '1970-01-01' + reset_at_ms * interval '1 millisecond',
                         'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END AS reset_at,
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
    FROM (SELECT *, greatest(seen_ms, CAST(floor(extract(epoch FROM statement_timestamp())
                                                 * 1000) AS bigint)) AS t
          FROM quota_log_owners) AS o
    JOIN quota_owner_limits AS l ON l.name = o.limit_name AND l.owner = o.owner
     AND l.algorithm = 'sliding_log'
  ) AS log_rows
  UNION ALL
  -- fixed_window: the current window's count. sliding_window: that plus the previous
  -- window's count weighted by the part of it still inside the sliding period, rounded up.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied,
         CASE algorithm WHEN 'fixed_window' THEN cur
              -- (prev % P) * rest is split at 2^18 so that no product passes 2^54, as in
              -- the statements (src/statements.cpp, kWeightedRest): periods up to 366 days.
              ELSE cur + (prev / period_ms) * rest
                   + ((prev % period_ms) * (rest / 262144) / period_ms) * 262144
                   + (((prev % period_ms) * (rest / 262144)) % period_ms * 262144
                      + (prev % period_ms) * (rest % 262144) + period_ms - 1) / period_ms
              END AS used,
         CASE WHEN cur > 0
              THEN (window_key + CASE algorithm WHEN 'sliding_window' THEN 2 ELSE 1 END)
                   * period_ms
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
               greatest(w.seen_ms, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000)
                                        AS bigint)) AS t,
               CASE WHEN w.period_ms = l.period_ms THEN w.window_key
                    ELSE w.seen_ms / l.period_ms END AS row_key
        FROM quota_windows AS w
        JOIN quota_owner_limits AS l ON l.name = w.limit_name AND l.owner = w.owner
         AND l.algorithm IN ('fixed_window', 'sliding_window')
      ) AS window_rows
    ) AS window_keys
  ) AS window_counts
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
             greatest(b.seen_ms, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000)
                                      AS bigint)) AS t,
             CASE WHEN b.seen_ms IS NULL THEN l.burst * l.period_ms
                  WHEN b.period_ms = l.period_ms THEN least(b.level, l.burst * l.period_ms)
                  WHEN b.level / b.period_ms >= l.burst THEN l.burst * l.period_ms
                  ELSE greatest(CASE WHEN b.level >= 0 THEN b.level / b.period_ms
                                     ELSE -((b.period_ms - 1 - b.level) / b.period_ms) END,
                                -(4611686018427387904 / l.period_ms)) * l.period_ms END AS start
      FROM quota_buckets AS b
      JOIN quota_owner_limits AS l ON l.name = b.limit_name AND l.owner = b.owner
       AND l.algorithm = 'token_bucket'
    ) AS bucket_rows
  ) AS bucket_levels
) AS usage_rows
JOIN quota_limits AS l ON l.name = usage_rows.limit_name
) AS blocking_rows
WHERE used > 0 OR denied > 0 OR shadow_denied > 0;
