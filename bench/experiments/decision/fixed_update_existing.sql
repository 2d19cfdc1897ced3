UPDATE quota_windows SET
  (window_key, used, previous_used, denied, seen_ms, cost, maximum, period_ms, blocked_until_ms,
   last_allowed) =
  (SELECT k, used + CASE WHEN ok THEN cost ELSE 0 END, prev, d + NOT ok, t, cost, maximum,
          period_ms, NULL, ok
   FROM (SELECT *, cost <= maximum AND used + cost <= maximum AS ok
         FROM (SELECT maximum, period_ms, cost, t, d, k,
                      CASE WHEN rk = k THEN su ELSE 0 END AS used,
                      CASE rk WHEN k THEN sp WHEN k - 1 THEN su ELSE 0 END AS prev
               FROM (SELECT maximum, period_ms, cost, t, t / period_ms AS k, rk, su, sp, d
                     FROM (SELECT l.maximum, l.period_ms, :cost AS cost,
                                  max(:now, quota_windows.seen_ms) AS t,
                                  CASE WHEN quota_windows.period_ms = l.period_ms
                                       THEN quota_windows.window_key
                                       ELSE quota_windows.seen_ms / l.period_ms END AS rk,
                                  quota_windows.used AS su, quota_windows.previous_used AS sp,
                                  quota_windows.denied AS d
                           FROM quota_limits AS l
                           WHERE l.name = :limit AND l.algorithm = 'fixed_window'
                             AND l.calendar IS NULL AND NOT l.shadow AND l.block_ms IS NULL
                             AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                                             WHERE o.limit_name = :limit AND o.owner = :owner)
                             AND NOT EXISTS (SELECT 1 FROM quota_overrides AS a
                                             WHERE a.limit_name = '*' AND a.owner = :owner))))))
WHERE limit_name = :limit AND owner = :owner
RETURNING last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(maximum - used, 0) AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > maximum THEN -1
       ELSE (window_key + 1) * period_ms - :now END AS retry_after_ms,
  CASE WHEN used > 0 THEN (window_key + 1) * period_ms ELSE seen_ms END AS reset_at_ms,
  denied, FALSE AS shadow_denied
