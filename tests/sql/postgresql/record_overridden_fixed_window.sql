UPDATE quota_windows SET
  (window_key, used, previous_used, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms) =
  (SELECT window_key, used_after, previous_used, denied, t, cost, maximum, period_ms,
          allowed AND NOT blocked, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN blocked THEN s_blocked_until END
   FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT blocked THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms
  FROM (
  SELECT *, least(used + CASE WHEN policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
         denied_before + int4(FALSE) AS denied
  FROM (
    SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
    FROM (
      SELECT maximum, period_ms, cost, t, window_key, rest, denied_before, capacity, now, policy, shadow, block_ms, s_blocked_until, coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked,
        CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
        CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
      FROM (
        SELECT *, t / period_ms AS window_key, period_ms - t % period_ms AS rest,
          CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key
        FROM (
          SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, l.period_ms AS period_ms, $3 AS cost,
            greatest(coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)), coalesce(quota_windows.seen_ms, 0)) AS t,
            quota_windows.period_ms AS s_period, quota_windows.window_key AS s_window_key,
            quota_windows.seen_ms AS s_seen, quota_windows.used AS s_used,
            quota_windows.previous_used AS s_previous,
            coalesce(quota_windows.denied, 0) AS denied_before,
            CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)) AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
            l.block_ms AS block_ms, quota_windows.blocked_until_ms AS s_blocked_until
          FROM quota_limits AS l
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
          WHERE l.name = $1 AND l.algorithm = 'fixed_window' AND TRUE AND l.calendar IS NULL
        ) AS inputs
      ) AS keyed OFFSET 0
    ) AS counted
  ) AS decided OFFSET 0) AS answered) AS decision)
WHERE limit_name = $1 AND owner = $2
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
