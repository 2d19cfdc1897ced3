SELECT ok AS allowed,
  CASE WHEN ok THEN 'ok' WHEN :cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(maximum - used, 0) AS remaining,
  CASE WHEN ok THEN 0 WHEN :cost > maximum THEN -1
       ELSE (k + 1) * period_ms - :now END AS retry_after_ms,
  CASE WHEN used > 0 THEN (k + 1) * period_ms ELSE t END AS reset_at_ms,
  denied, FALSE AS shadow_denied, used, shadow_denied AS shadow_denials, maximum AS capacity,
  NULL AS blocked_until_ms
FROM (SELECT *, used + :cost <= maximum AND :cost <= maximum AS ok
      FROM (SELECT maximum, period_ms, t, k, denied, shadow_denied,
                   CASE WHEN CASE WHEN s_period = period_ms THEN window_key
                                  ELSE seen_ms / period_ms END = k
                        THEN s_used ELSE 0 END AS used
            FROM (SELECT l.maximum, l.period_ms, max(:now, s.seen_ms) AS t,
                         max(:now, s.seen_ms) / l.period_ms AS k, s.period_ms AS s_period,
                         s.window_key, s.seen_ms, s.used AS s_used, s.denied, s.shadow_denied
                  FROM quota_limits AS l
                  JOIN quota_windows_k AS s ON s.limit_name = l.name AND s.owner = :owner
                  WHERE l.name = :limit AND l.algorithm = 'fixed_window' AND l.plain
                  LIMIT -1 OFFSET 0)))
