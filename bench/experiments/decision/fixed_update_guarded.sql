UPDATE quota_windows_k SET
  (window_key, used, previous_used, denied, seen_ms, maximum, period_ms, allowed,
   blocked_until_ms) =
  (SELECT k, used + CASE WHEN ok THEN cost ELSE 0 END, prev, d + NOT ok, t, maximum, period_ms,
          ok, NULL
   FROM (SELECT *, cost <= maximum AND used + cost <= maximum AS ok
         FROM (SELECT maximum, period_ms, cost, t, d, k,
                      CASE WHEN rk = k THEN su ELSE 0 END AS used,
                      CASE rk WHEN k THEN sp WHEN k - 1 THEN su ELSE 0 END AS prev
               FROM (SELECT maximum, period_ms, cost, t, t / period_ms AS k, rk, su, sp, d
                     FROM (SELECT l.maximum, l.period_ms, :cost AS cost,
                                  max(:now, quota_windows_k.seen_ms) AS t,
                                  CASE WHEN quota_windows_k.period_ms = l.period_ms
                                       THEN quota_windows_k.window_key
                                       ELSE quota_windows_k.seen_ms / l.period_ms END AS rk,
                                  quota_windows_k.used AS su, quota_windows_k.previous_used AS sp,
                                  quota_windows_k.denied AS d
                           FROM quota_limits AS l
                           WHERE l.name = :limit AND l.algorithm = 'fixed_window' AND l.calendar IS NULL AND NOT l.shadow AND l.block_ms IS NULL
                             AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                                             WHERE o.limit_name = :limit AND o.owner = :owner)
                             AND NOT EXISTS (SELECT 1 FROM quota_overrides AS a
                                             WHERE a.limit_name = '*' AND a.owner = :owner))))))
WHERE limit_name = :limit AND owner = :owner
RETURNING allowed,
  CASE WHEN allowed THEN 'ok' WHEN :cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(maximum - used, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN :cost > maximum THEN -1
       ELSE (window_key + 1) * period_ms - :now END AS retry_after_ms,
  CASE WHEN used > 0 THEN (window_key + 1) * period_ms ELSE seen_ms END AS reset_at_ms,
  denied, FALSE AS shadow_denied
