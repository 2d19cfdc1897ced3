INSERT INTO quota_windows_k
  (limit_name, owner, window_key, used, previous_used, denied, seen_ms, maximum, period_ms,
   allowed, blocked_until_ms)
SELECT :limit, :owner, k, used + CASE WHEN ok THEN cost ELSE 0 END, prev, d + NOT ok, t,
       maximum, period_ms, ok, NULL
FROM (SELECT *, cost <= maximum AND used + cost <= maximum AS ok
      FROM (SELECT maximum, period_ms, cost, t, d, k,
                   CASE WHEN rk = k THEN su ELSE 0 END AS used,
                   CASE rk WHEN k THEN sp WHEN k - 1 THEN su ELSE 0 END AS prev
            FROM (SELECT maximum, period_ms, cost, t, t / period_ms AS k,
                         CASE WHEN s_period = period_ms THEN s_key
                              ELSE s_seen / period_ms END AS rk, su, sp, d
                  FROM (SELECT l.maximum, l.period_ms, :cost AS cost,
                               max(:now, coalesce(s.seen_ms, 0)) AS t, s.period_ms AS s_period,
                               s.window_key AS s_key, s.seen_ms AS s_seen, s.used AS su,
                               s.previous_used AS sp, coalesce(s.denied, 0) AS d
                        FROM quota_limits AS l
                        LEFT JOIN quota_windows_k AS s ON s.limit_name = l.name AND s.owner = :owner
                        WHERE l.name = :limit AND l.algorithm = 'fixed_window' AND l.plain))))
WHERE TRUE
ON CONFLICT (limit_name, owner) DO UPDATE SET
  window_key = excluded.window_key, used = excluded.used, previous_used = excluded.previous_used,
  denied = excluded.denied, seen_ms = excluded.seen_ms, maximum = excluded.maximum,
  period_ms = excluded.period_ms, allowed = excluded.allowed,
  blocked_until_ms = excluded.blocked_until_ms
RETURNING allowed,
  CASE WHEN allowed THEN 'ok' WHEN :cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(maximum - used, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN :cost > maximum THEN -1
       ELSE (window_key + 1) * period_ms - :now END AS retry_after_ms,
  CASE WHEN used > 0 THEN (window_key + 1) * period_ms ELSE seen_ms END AS reset_at_ms,
  denied, FALSE AS shadow_denied
