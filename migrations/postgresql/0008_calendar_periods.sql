-- quota schema on PostgreSQL, migration 0008: calendar periods, as
-- migrations/0008_calendar_periods.sql on SQLite (read its header for what each column means).
--
--   ALTER TABLE  quota_limits ADD COLUMN calendar, utc_offset_ms, anchor_ms;
--   CREATE TABLE quota_anchors(limit_name, owner, anchor_ms);
--   CREATE OR REPLACE VIEW quota_usage;  -- as in 0007, with calendar windows
--
-- The view is replaced rather than dropped, so that the privileges granted on it stay.

ALTER TABLE quota_limits ADD COLUMN calendar text
  CONSTRAINT "valid calendar" CHECK (calendar IS NULL
                       OR (algorithm = 'fixed_window'
                           AND period_ms = CASE calendar WHEN 'day' THEN 86400000
                                                         WHEN 'week' THEN 604800000
                                                         WHEN 'month' THEN 2678400000
                                                         WHEN 'year' THEN 31622400000 END));
ALTER TABLE quota_limits ADD COLUMN utc_offset_ms bigint NOT NULL DEFAULT 0
  CONSTRAINT "valid utc_offset_ms"
  CHECK (utc_offset_ms BETWEEN -50400000 AND 50400000 AND utc_offset_ms % 60000 = 0
         AND (calendar IS NOT NULL OR utc_offset_ms = 0));
ALTER TABLE quota_limits ADD COLUMN anchor_ms bigint
  CONSTRAINT "valid anchor_ms"
  CHECK (anchor_ms IS NULL OR (calendar IS NOT NULL AND anchor_ms BETWEEN 0 AND 253402300800000));

CREATE TABLE quota_anchors (
  limit_name text   COLLATE "C" NOT NULL CHECK (limit_name = '*' OR limit_name ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  owner      text   COLLATE "C" NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 1024),
  anchor_ms  bigint NOT NULL CHECK (anchor_ms BETWEEN 0 AND 253402300800000),
  PRIMARY KEY (limit_name, owner)
);

-- Removing a limit removes its owners' anchors (the '*' ones stay: they belong to no one limit).
CREATE FUNCTION quota_limits_removed_anchors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_anchors WHERE limit_name = OLD.name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_limits_removed_anchors AFTER DELETE ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_removed_anchors();

-- quota_usage, as in 0007, with calendar windows.
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
         CASE WHEN cur > 0 AND calendar THEN window_key
              WHEN cur > 0
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
      SELECT *, CASE WHEN NOT calendar THEN t / period_ms
                     WHEN t < row_key AND row_key <= t + period_ms THEN row_key END AS window_key
      FROM (
        SELECT w.limit_name, w.owner, l.policy, l.algorithm, l.maximum AS capacity, l.period_ms,
               w.denied, w.shadow_denied, w.used AS row_used, w.previous_used AS row_previous,
               w.blocked_until_ms AS row_blocked_until,
               greatest(w.seen_ms, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000)
                                        AS bigint)) AS t,
               c.calendar IS NOT NULL AS calendar,
               CASE WHEN c.calendar IS NOT NULL OR w.period_ms = l.period_ms THEN w.window_key
                    ELSE w.seen_ms / l.period_ms END AS row_key
        FROM quota_windows AS w
        JOIN quota_owner_limits AS l ON l.name = w.limit_name AND l.owner = w.owner
         AND l.algorithm IN ('fixed_window', 'sliding_window')
        JOIN quota_limits AS c ON c.name = w.limit_name
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
