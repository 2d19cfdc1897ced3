DROP VIEW IF EXISTS quota_usage;
DROP VIEW IF EXISTS quota_usage_sliding_log;
DROP VIEW IF EXISTS quota_usage_fixed_window;
DROP VIEW IF EXISTS quota_usage_calendar_window;
DROP VIEW IF EXISTS quota_usage_sliding_window;
DROP VIEW IF EXISTS quota_usage_token_bucket;
DROP VIEW IF EXISTS quota_usage_concurrency;

CREATE VIEW quota_usage_sliding_log AS
SELECT usage_limit AS limit_name, usage_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM (SELECT usage_limit, usage_owner, allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE coalesce((SELECT e.at_ms FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms AND e.total - live_base >= excess ORDER BY e.at_ms LIMIT 1), t) + period_ms - t END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded ELSE s_total + recorded END AS total,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + (FALSE) AS denied
    FROM (
      SELECT *, CASE WHEN FALSE THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *, coalesce(s_total - live_base, 0) AS used
          FROM (
            SELECT *,
              (SELECT e.total - e.cost FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms ORDER BY e.at_ms LIMIT 1) AS live_base,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, max(now, coalesce(s_seen, 0)) AS t
              FROM (
      SELECT s.limit_name AS usage_limit, s.owner AS usage_owner, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             1 AS cost, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             l.name AS key_limit, s.owner AS key_owner,
             s.total AS s_total, s.newest_at_ms AS s_newest_at, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_log_owners AS s
      JOIN quota_limits AS l ON l.name = s.limit_name
      LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
      WHERE l.algorithm = 'sliding_log') AS inputs LIMIT -1 OFFSET 0
            ) AS clocked LIMIT -1 OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS summed) AS decision) AS usage_sliding_log;

CREATE VIEW quota_usage_fixed_window AS
SELECT usage_limit AS limit_name, usage_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM (SELECT usage_limit, usage_owner, allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms,
    used_after AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
      min(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT s.limit_name AS usage_limit, s.owner AS usage_owner, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             1 AS cost, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_windows AS s
      JOIN quota_limits AS l ON l.name = s.limit_name
      LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
      WHERE l.algorithm = 'fixed_window' AND l.calendar IS NULL) AS inputs
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS keyed
      ) AS counted LIMIT -1 OFFSET 0
    ) AS decided
  ) AS written) AS decision) AS usage_fixed_window;

CREATE VIEW quota_usage_calendar_window AS
SELECT usage_limit AS limit_name, usage_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM (SELECT usage_limit, usage_owner, allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE window_key - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN window_key ELSE t END AS reset_at_ms,
    used_after AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
      min(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
            calendar_end AS window_key, period_ms - t % period_ms AS rest,
            s_window_key AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT s.limit_name AS usage_limit, s.owner AS usage_owner, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             CASE WHEN l.calendar IS NULL THEN NULL WHEN max(CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), coalesce(s.seen_ms, 0)) < s.window_key AND s.window_key <= max(CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), coalesce(s.seen_ms, 0)) + l.period_ms THEN s.window_key ELSE (WITH
  calendar_request AS (
    SELECT l.calendar AS unit, l.utc_offset_ms AS off, max(CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), coalesce(s.seen_ms, 0)) + l.utc_offset_ms AS lt,
      coalesce(
        (SELECT n.anchor_ms FROM quota_anchors AS n
         WHERE n.limit_name = l.name AND n.owner = s.owner),
        (SELECT n.anchor_ms FROM quota_anchors AS n
         WHERE n.limit_name = '*' AND n.owner = s.owner),
        l.anchor_ms, CASE l.calendar WHEN 'week' THEN 345600000 ELSE 0 END - l.utc_offset_ms)
      + l.utc_offset_ms AS at LIMIT -1 OFFSET 0),
  calendar_years AS (
    SELECT unit, off, lt, at, (at % 86400000 + 86400000) % 86400000 AS atod,
      ((lt + 86400000) / 86400000 + 719467) AS l_z, ((at + 86400000) / 86400000 + 719467) AS a_z,
      (((lt + 86400000) / 86400000 + 719467) % 146097 - (((lt + 86400000) / 86400000 + 719467) % 146097) / 1460 + (((lt + 86400000) / 86400000 + 719467) % 146097) / 36524
       - (((lt + 86400000) / 86400000 + 719467) % 146097) / 146096) / 365 AS l_yoe,
      (((at + 86400000) / 86400000 + 719467) % 146097 - (((at + 86400000) / 86400000 + 719467) % 146097) / 1460 + (((at + 86400000) / 86400000 + 719467) % 146097) / 36524
       - (((at + 86400000) / 86400000 + 719467) % 146097) / 146096) / 365 AS a_yoe
    FROM calendar_request LIMIT -1 OFFSET 0),
  calendar_dates AS (
    SELECT unit, off, lt, at, atod, l_z, l_yoe,
      l_z % 146097 - (365 * l_yoe + l_yoe / 4 - l_yoe / 100) AS l_doy,
      a_z % 146097 - (365 * a_yoe + a_yoe / 4 - a_yoe / 100) AS a_doy
    FROM calendar_years LIMIT -1 OFFSET 0),
  calendar_bases AS (
    SELECT unit, off, lt, at, atod,
      a_doy - (153 * ((5 * a_doy + 2) / 153) + 2) / 5 + 1 AS dom,
      CASE unit WHEN 'year'
        THEN (((l_yoe + (l_z / 146097) * 400) * 12 + (5 * l_doy + 2) / 153 + 2) / 12) * 12
             + ((5 * a_doy + 2) / 153 + 2) % 12
        ELSE (l_yoe + (l_z / 146097) * 400) * 12 + (5 * l_doy + 2) / 153 + 2 END AS b,
      CASE unit WHEN 'year' THEN 12 ELSE 1 END AS step
    FROM calendar_dates LIMIT -1 OFFSET 0),
  calendar_firsts AS (
    SELECT unit, off, lt, at, atod, dom, (((b) - 2) / 12 / 400) * 146097 + (((b) - 2) / 12 % 400) * 365 + (((b) - 2) / 12 % 400) / 4 - (((b) - 2) / 12 % 400) / 100 + (153 * (((b) - 2) % 12) + 2) / 5 - 719468 AS fd0, (((b + 1) - 2) / 12 / 400) * 146097 + (((b + 1) - 2) / 12 % 400) * 365 + (((b + 1) - 2) / 12 % 400) / 4 - (((b + 1) - 2) / 12 % 400) / 100 + (153 * (((b + 1) - 2) % 12) + 2) / 5 - 719468 AS fd1, (((b + step) - 2) / 12 / 400) * 146097 + (((b + step) - 2) / 12 % 400) * 365 + (((b + step) - 2) / 12 % 400) / 4 - (((b + step) - 2) / 12 % 400) / 100 + (153 * (((b + step) - 2) % 12) + 2) / 5 - 719468 AS fdn,
      (((b + step + 1) - 2) / 12 / 400) * 146097 + (((b + step + 1) - 2) / 12 % 400) * 365 + (((b + step + 1) - 2) / 12 % 400) / 4 - (((b + step + 1) - 2) / 12 % 400) / 100 + (153 * (((b + step + 1) - 2) % 12) + 2) / 5 - 719468 AS fdn1
    FROM calendar_bases LIMIT -1 OFFSET 0)
  SELECT CASE
      WHEN unit = 'day' THEN lt - ((lt - at) % 86400000 + 86400000) % 86400000 + 86400000
      WHEN unit = 'week' THEN lt - ((lt - at) % 604800000 + 604800000) % 604800000 + 604800000
      WHEN lt >= (fd0 + min(dom, fd1 - fd0) - 1) * 86400000 + atod
      THEN (fdn + min(dom, fdn1 - fdn) - 1) * 86400000 + atod
      ELSE (fd0 + min(dom, fd1 - fd0) - 1) * 86400000 + atod
    END - off
  FROM calendar_firsts) END AS calendar_end, 1 AS cost, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_windows AS s
      JOIN quota_limits AS l ON l.name = s.limit_name
      LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
      WHERE l.algorithm = 'fixed_window' AND l.calendar IS NOT NULL) AS inputs
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS keyed
      ) AS counted LIMIT -1 OFFSET 0
    ) AS decided
  ) AS written) AS decision) AS usage_calendar_window;

CREATE VIEW quota_usage_sliding_window AS
SELECT usage_limit AS limit_name, usage_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM (SELECT usage_limit, usage_owner, allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    max(CASE WHEN used_after >= maximum THEN 0     WHEN previous_used > ((maximum - used_after) * period_ms) / rest THEN 0     ELSE ((maximum - used_after) * period_ms - previous_used * rest) / period_ms END, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE CASE WHEN used_after + cost <= maximum AND previous_used > 0          AND ((maximum - used_after - cost) * period_ms) / previous_used > 0     THEN rest - ((maximum - used_after - cost) * period_ms) / previous_used     ELSE rest + CASE WHEN used_after = 0 THEN 0                      ELSE max(0, period_ms - ((maximum - cost) * period_ms) / used_after)                 END END END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 2) * period_ms     WHEN previous_used > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms,
    used_after + (previous_used / period_ms) * rest + ((previous_used % period_ms) * (rest / 262144) / period_ms) * 262144 + (((previous_used % period_ms) * (rest / 262144)) % period_ms * 262144 + (previous_used % period_ms) * (rest % 262144) + period_ms - 1) / period_ms AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
      min(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND CASE WHEN used + cost <= maximum     THEN previous_used <= ((maximum - used - cost) * period_ms) / rest ELSE FALSE END END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied, usage_limit, usage_owner,
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT s.limit_name AS usage_limit, s.owner AS usage_owner, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN min(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN min(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             1 AS cost, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_windows AS s
      JOIN quota_limits AS l ON l.name = s.limit_name
      LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
      WHERE l.algorithm = 'sliding_window') AS inputs
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS keyed
      ) AS counted LIMIT -1 OFFSET 0
    ) AS decided
  ) AS written) AS decision) AS usage_sliding_window;

CREATE VIEW quota_usage_token_bucket AS
SELECT usage_limit AS limit_name, usage_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM (SELECT usage_limit, usage_owner, allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    max(level_after / period_ms, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (cost * period_ms - level_after - 1) / maximum + 1 END AS retry_after_ms,
    CASE WHEN level_after >= full_level THEN t
         ELSE t + (full_level - level_after - 1) / maximum + 1 END AS reset_at_ms,
    capacity - CASE WHEN level_after >= 0 THEN level_after / period_ms
                    ELSE -((period_ms - 1 - level_after) / period_ms) END AS shown_used
  FROM (
    SELECT *,
      CASE WHEN NOT (FALSE) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT *,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND level >= cost * period_ms END AS allowed
      FROM (
        SELECT *, CASE WHEN start >= full_level THEN full_level
               WHEN t - coalesce(s_seen, t) >= (full_level - start - 1) / maximum + 1 THEN full_level
               ELSE start + maximum * (t - coalesce(s_seen, t)) END AS level
        FROM (
          SELECT *,
            CASE WHEN s_level IS NULL THEN full_level ELSE CASE
                 WHEN s_period = period_ms THEN min(s_level, capacity * period_ms)
                 WHEN s_level / s_period >= capacity THEN capacity * period_ms
                 ELSE max(CASE WHEN s_level >= 0 THEN s_level / s_period
                               ELSE -((s_period - 1 - s_level) / s_period) END,
                          -(4611686018427387904 / period_ms)) * period_ms END END AS start,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t, capacity * period_ms AS full_level
            FROM (
      SELECT s.limit_name AS usage_limit, s.owner AS usage_owner, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN min(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN min(CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) ELSE coalesce(o.burst, o.maximum) END, 2305843009213693952 / l.period_ms) ELSE l.burst END AS capacity, l.period_ms AS period_ms,
             1 AS cost, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.level AS s_level, s.period_ms AS s_period, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_buckets AS s
      JOIN quota_limits AS l ON l.name = s.limit_name
      LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
      WHERE l.algorithm = 'token_bucket') AS inputs LIMIT -1 OFFSET 0
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS started LIMIT -1 OFFSET 0
      ) AS refilled
    ) AS decided LIMIT -1 OFFSET 0
  ) AS recorded) AS decision) AS usage_token_bucket;

CREATE VIEW quota_usage_concurrency AS
SELECT key_limit AS limit_name, key_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM (SELECT allowed AND NOT blocked AS allowed, reason, remaining,
  retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied,
  CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE held END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN blocked THEN s_blocked_until END AS blocked_until_ms, key_limit, key_owner
FROM (
  SELECT *,
    CASE WHEN reason = 'blocked' AND own_retry >= 0
         THEN max(s_blocked_until - t, own_retry) + (t - now) 
         WHEN own_retry > 0 THEN own_retry + (t - now) ELSE own_retry END AS retry_after_ms,
    CASE WHEN blocked THEN s_blocked_until END AS blocked_until_ms
  FROM (
  SELECT *,
    CASE WHEN allowed AND NOT blocked THEN 'ok'
         WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked'
         WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN capacity
         WHEN policy IS NOT DISTINCT FROM 'deny' OR blocked THEN 0
         ELSE max(capacity - held_after, 0) END AS remaining,
    CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         WHEN NOT recorded OR (SELECT min(x.expires_at_ms) FROM quota_leases AS x WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t AND e.expires_at_ms <= x.expires_at_ms) >= excess) < t + period_ms THEN coalesce((SELECT min(x.expires_at_ms) FROM quota_leases AS x WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t AND e.expires_at_ms <= x.expires_at_ms) >= excess), t + period_ms) - t
         WHEN excess <= cost THEN period_ms
         ELSE max(t + period_ms, (SELECT min(x.expires_at_ms) FROM quota_leases AS x WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t AND e.expires_at_ms <= x.expires_at_ms) >= excess_later)) - t END AS own_retry,
    max(coalesce((SELECT max(e.expires_at_ms) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t), t), CASE WHEN recorded THEN t + period_ms ELSE t END)
      AS reset_at_ms,
    CASE WHEN recorded THEN t + period_ms END AS expires_at_ms,
    CASE WHEN recorded THEN lower(hex(randomblob(16))) END AS lease
  FROM (
    SELECT *,
      held + CASE WHEN recorded THEN cost ELSE 0 END AS held_after,
      held + CASE WHEN recorded THEN cost ELSE 0 END + cost - capacity AS excess,
      held + CASE WHEN recorded THEN cost ELSE 0 END - capacity AS excess_later,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT *, FALSE AS recorded
      FROM (
        SELECT *,
          CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE
               ELSE cost <= capacity AND held + cost <= capacity END AS allowed
        FROM (
          SELECT *, (SELECT coalesce(sum(e.cost), 0) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t) AS held, coalesce(s_denied, 0) AS denied_before,
            coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow
                     AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT l.name AS key_limit, s.owner AS key_owner, 1 AS cost,
             CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS now, l.maximum AS maximum, CASE WHEN l.name IS NULL THEN NULL WHEN coalesce(o.policy, a.policy) = 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity,
             l.period_ms AS period_ms, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, s.seen_ms AS s_seen, s.denied AS s_denied,
             s.shadow_denied AS s_shadow_denied, s.blocked_until_ms AS s_blocked_until
      FROM quota_lease_owners AS s
      JOIN quota_limits AS l ON l.name = s.limit_name
      LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
      WHERE l.algorithm = 'concurrency') AS inputs LIMIT -1 OFFSET 0
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS answered
  ) AS reasoned) AS decision) AS usage_concurrency;

CREATE VIEW quota_usage AS
SELECT limit_name, owner, used, remaining, denied, reset_at_ms,
       strftime('%Y-%m-%dT%H:%M:%fZ', reset_at_ms / 1000.0, 'unixepoch') AS reset_at,
       shadow_denied, blocked_until_ms
FROM (
  SELECT * FROM quota_usage_sliding_log
  UNION ALL
  SELECT * FROM quota_usage_fixed_window
  UNION ALL
  SELECT * FROM quota_usage_calendar_window
  UNION ALL
  SELECT * FROM quota_usage_sliding_window
  UNION ALL
  SELECT * FROM quota_usage_token_bucket
  UNION ALL
  SELECT * FROM quota_usage_concurrency
) AS usage_rows
WHERE used > 0 OR denied > 0 OR shadow_denied > 0
