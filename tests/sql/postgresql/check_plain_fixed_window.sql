SELECT allowed,
  CASE WHEN allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  greatest(maximum - used_after, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN cost > maximum THEN -1 ELSE (window_key + 1) * period_ms - t + (t - coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint))) END AS retry_after_ms,
  CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms, denied, FALSE AS shadow_denied, used_after AS used,
  shadow_denials, maximum AS capacity, CAST(NULL AS bigint) AS blocked_until_ms
FROM (
  SELECT *, least(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
         denied_before + int4(FALSE) AS denied
  FROM (
    SELECT *, cost <= maximum AND used + cost <= maximum AS allowed
    FROM (
      SELECT maximum, period_ms, cost, t, window_key, rest, denied_before, shadow_denials,
        CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
        CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
      FROM (
        SELECT *, t / period_ms AS window_key, period_ms - t % period_ms AS rest,
          CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key
        FROM (
          SELECT l.maximum AS maximum, l.period_ms AS period_ms, $3 AS cost,
            greatest(coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)), coalesce(quota_windows.seen_ms, 0)) AS t,
            quota_windows.period_ms AS s_period, quota_windows.window_key AS s_window_key,
            quota_windows.seen_ms AS s_seen, quota_windows.used AS s_used,
            quota_windows.previous_used AS s_previous,
            coalesce(quota_windows.denied, 0) AS denied_before, coalesce(quota_windows.shadow_denied, 0) AS shadow_denials
          FROM quota_limits AS l
          LEFT JOIN quota_windows ON quota_windows.limit_name = l.name AND quota_windows.owner = $2
          WHERE l.name = $1 AND l.algorithm = 'fixed_window' AND l.plain
        ) AS inputs
      ) AS keyed OFFSET 0
    ) AS counted
  ) AS decided) AS decision
