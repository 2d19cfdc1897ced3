SELECT allowed,
  CASE WHEN allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(CASE WHEN used_after >= maximum THEN 0     WHEN previous_used > ((maximum - used_after) * period_ms) / rest THEN 0     ELSE ((maximum - used_after) * period_ms - previous_used * rest) / period_ms END, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN cost > maximum THEN -1 ELSE CASE WHEN used_after + cost <= maximum AND previous_used > 0          AND ((maximum - used_after - cost) * period_ms) / previous_used > 0     THEN rest - ((maximum - used_after - cost) * period_ms) / previous_used     ELSE rest + CASE WHEN used_after = 0 THEN 0                      ELSE max(0, period_ms - ((maximum - cost) * period_ms) / used_after)                 END END + (t - coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))) END AS retry_after_ms,
  CASE WHEN used_after > 0 THEN (window_key + 2) * period_ms     WHEN previous_used > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms, denied, FALSE AS shadow_denied, used_after + (previous_used / period_ms) * rest + ((previous_used % period_ms) * (rest / 262144) / period_ms) * 262144 + (((previous_used % period_ms) * (rest / 262144)) % period_ms * 262144 + (previous_used % period_ms) * (rest % 262144) + period_ms - 1) / period_ms AS used,
  shadow_denials, maximum AS capacity, CAST(NULL AS bigint) AS blocked_until_ms
FROM (
  SELECT *, min(used + CASE WHEN FALSE THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
         denied_before + (FALSE) AS denied
  FROM (
    SELECT *, cost <= maximum AND CASE WHEN used + cost <= maximum     THEN previous_used <= ((maximum - used - cost) * period_ms) / rest ELSE FALSE END AS allowed
    FROM (
      SELECT maximum, period_ms, cost, t, window_key, rest, denied_before, shadow_denials,
        CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
        CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
      FROM (
        SELECT *, t / period_ms AS window_key, period_ms - t % period_ms AS rest,
          CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key
        FROM (
          SELECT l.maximum AS maximum, l.period_ms AS period_ms, :cost AS cost,
            max(coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)), coalesce(quota_windows.seen_ms, 0)) AS t,
            quota_windows.period_ms AS s_period, quota_windows.window_key AS s_window_key,
            quota_windows.seen_ms AS s_seen, quota_windows.used AS s_used,
            quota_windows.previous_used AS s_previous,
            coalesce(quota_windows.denied, 0) AS denied_before, coalesce(quota_windows.shadow_denied, 0) AS shadow_denials
          FROM quota_limits AS l
          LEFT JOIN quota_windows ON quota_windows.limit_name = l.name AND quota_windows.owner = :owner
          WHERE l.name = :limit AND l.algorithm = 'sliding_window' AND l.plain
        ) AS inputs
      ) AS keyed LIMIT -1 OFFSET 0
    ) AS counted
  ) AS decided) AS decision
