SELECT allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
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
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied,
      min(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied,
            calendar_end AS window_key, period_ms - t % period_ms AS rest,
            s_window_key AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             CASE WHEN l.calendar IS NULL THEN NULL WHEN max(CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END, coalesce(s.seen_ms, 0)) < s.window_key AND s.window_key <= max(CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END, coalesce(s.seen_ms, 0)) + l.period_ms THEN s.window_key ELSE (WITH
  calendar_request AS (
    SELECT l.calendar AS unit, l.utc_offset_ms AS off, max(CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END, coalesce(s.seen_ms, 0)) + l.utc_offset_ms AS lt,
      coalesce(
        (SELECT n.anchor_ms FROM quota_anchors AS n
         WHERE n.limit_name = l.name AND n.owner = :owner),
        (SELECT n.anchor_ms FROM quota_anchors AS n
         WHERE n.limit_name = '*' AND n.owner = :owner),
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
  FROM calendar_firsts) END AS calendar_end, CASE WHEN :cost IS NULL THEN 1 WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000 THEN CAST(:cost AS INTEGER) ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_windows AS s ON s.limit_name = l.name AND s.owner = :owner
      LEFT JOIN quota_overrides AS o ON o.limit_name = :limit AND o.owner = :owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = :owner
      WHERE l.name = :limit AND l.algorithm = 'fixed_window' AND l.calendar IS NOT NULL) AS inputs
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS keyed
      ) AS counted LIMIT -1 OFFSET 0
    ) AS decided
  ) AS written) AS decision
