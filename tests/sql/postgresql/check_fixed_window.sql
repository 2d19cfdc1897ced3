SELECT allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms,
    used_after AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until, s_shadow_denied,
      least(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + int4(FALSE) AS denied
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
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_windows AS s ON s.limit_name = l.name AND s.owner = $2
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
      WHERE l.name = $1 AND l.algorithm = 'fixed_window' AND l.calendar IS NULL) AS inputs
          ) AS clocked OFFSET 0
        ) AS keyed
      ) AS counted OFFSET 0
    ) AS decided
  ) AS written) AS decision
