-- quota schema, migration 0008: calendar periods. A fixed_window limit may count per calendar
-- day, ISO week, month or year at a fixed UTC offset, its windows placed by an anchor.
--
--   ALTER TABLE  quota_limits ADD COLUMN calendar, utc_offset_ms, anchor_ms;
--   CREATE TABLE quota_anchors(limit_name, owner, anchor_ms);
--   CREATE VIEW  quota_usage;  -- as in 0007, with calendar windows
--
-- quota_limits.calendar: NULL (windows of period_ms from the epoch), or 'day', 'week',
--   'month' or 'year', only for fixed_window. period_ms is then the unit's longest window
--   (1, 7, 31 or 366 days), which gc and the checks of 0001 read as the window's bound.
-- quota_limits.utc_offset_ms: the calendar's fixed offset from UTC, -14:00 to +14:00 in whole
--   minutes (0 without a calendar). A window of an instant t is taken at local time
--   t + utc_offset_ms: a day from midnight, a week from Monday 00:00 (ISO 8601), a month from
--   the 1st 00:00, a year from 1 January 00:00. No daylight-saving rules.
-- quota_limits.anchor_ms: NULL, or an instant (Unix ms, up to 10000-01-01) whose place in the
--   unit at the offset is where every window starts instead: its time of day (day), weekday
--   and time (week), day of the month and time (month; a day that a month lacks is that
--   month's last day), month, day and time (year; 29 February is 28 February in other years).
--   Example: 'month', utc_offset_ms 32400000 (+09:00), anchor 2026-01-31T00:00:00+09:00: the
--   windows start on 2026-02-28, 2026-03-31, 2026-04-30, ... at 00:00 +09:00.
--
-- quota_anchors: an owner's own anchor (the day its subscription began), for one calendar
--   limit or for '*' (every calendar limit); the owner's row for the limit beats its '*' row,
--   which beats the limit's anchor_ms. Removing a limit removes its anchors; a limit that
--   stops being a calendar limit ignores them.
--
-- How the statements count (src/statements.cpp). A calendar limit's owner row keeps in
--   window_key the end of the window it counts (Unix ms) instead of the window's number. The
--   row's count is current while t < window_key <= t + period_ms; otherwise the statement
--   computes the window that holds t from the configuration (integer civil-calendar
--   arithmetic, no date functions) and starts it from zero. retry_after_ms and reset_at_ms
--   point at the window's end, the next window's start. So a change of offset or anchor, or
--   to a longer unit, applies to each owner from the end of the window it is counting; a
--   change to a shorter unit ends the windows longer than it at once; and a row written under
--   a period in ms (whose window number is below any end) starts afresh.
--   Example (limit 'api': fixed_window, 2 per month, utc_offset 0, no anchor; owner 'k'):
--     consume :now=2026-11-30T23:59:59.999Z -> allowed 1, reset_at_ms 2026-12-01T00:00Z
--     consume :now=2026-12-01T00:00:00.000Z -> allowed 1 (a new window), reset_at 2027-01-01
--
-- quota_usage: a calendar row's used is its count while its window holds, and its reset_at_ms
--   that window's end.
--
-- Adding columns keeps every row: existing limits read as windows of period_ms.

ALTER TABLE quota_limits ADD COLUMN
  calendar TEXT CHECK (calendar IS NULL
                       OR (algorithm = 'fixed_window'
                           AND period_ms = CASE calendar WHEN 'day' THEN 86400000
                                                         WHEN 'week' THEN 604800000
                                                         WHEN 'month' THEN 2678400000
                                                         WHEN 'year' THEN 31622400000 END));
ALTER TABLE quota_limits ADD COLUMN
  utc_offset_ms INTEGER NOT NULL DEFAULT 0
  CHECK (utc_offset_ms BETWEEN -50400000 AND 50400000 AND utc_offset_ms % 60000 = 0
         AND (calendar IS NOT NULL OR utc_offset_ms = 0));
ALTER TABLE quota_limits ADD COLUMN
  anchor_ms INTEGER CHECK (anchor_ms IS NULL
                           OR (calendar IS NOT NULL AND anchor_ms BETWEEN 0 AND 253402300800000));

CREATE TABLE quota_anchors (
  limit_name TEXT    NOT NULL
             CHECK (limit_name = '*' OR (length(limit_name) BETWEEN 1 AND 64
                                         AND limit_name NOT GLOB '*[^A-Za-z0-9_.:-]*')),
  owner      TEXT    NOT NULL CHECK (length(CAST(owner AS BLOB)) BETWEEN 1 AND 1024),
  anchor_ms  INTEGER NOT NULL CHECK (anchor_ms BETWEEN 0 AND 253402300800000),
  PRIMARY KEY (limit_name, owner)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER quota_limits_removed_anchors AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_anchors WHERE limit_name = OLD.name;
END;

-- quota_usage, as in 0007, with calendar windows.
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
         CASE WHEN cur > 0 AND calendar THEN window_key
              WHEN cur > 0 THEN (window_key + 1 + (algorithm = 'sliding_window')) * period_ms
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
               max(w.seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                   AS INTEGER)) AS t,
               c.calendar IS NOT NULL AS calendar,
               CASE WHEN c.calendar IS NOT NULL OR w.period_ms = l.period_ms THEN w.window_key
                    ELSE w.seen_ms / l.period_ms END AS row_key
        FROM quota_windows AS w
        JOIN quota_owner_limits AS l ON l.name = w.limit_name AND l.owner = w.owner
         AND l.algorithm IN ('fixed_window', 'sliding_window')
        JOIN quota_limits AS c ON c.name = w.limit_name
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
