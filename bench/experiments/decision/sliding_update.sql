UPDATE quota_windows_k SET
  (window_key, used, previous_used, denied, seen_ms, maximum, period_ms, allowed,
   blocked_until_ms) =
  (SELECT k, used + CASE WHEN ok THEN cost ELSE 0 END, prev, d + NOT ok, t, maximum, period_ms,
          ok, NULL
   FROM (SELECT *,
                CASE WHEN cost <= maximum AND used + cost <= maximum
                     THEN prev <= ((maximum - used - cost) * period_ms) / (period_ms - t % period_ms)
                     ELSE FALSE END AS ok
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
                           WHERE l.name = :limit AND l.algorithm = 'sliding_window'
                             AND l.plain)))))
WHERE limit_name = :limit AND owner = :owner
RETURNING allowed,
  CASE WHEN allowed THEN 'ok' WHEN :cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  CASE WHEN used >= maximum THEN 0
       WHEN previous_used > ((maximum - used) * period_ms) / (period_ms - seen_ms % period_ms) THEN 0
       ELSE ((maximum - used) * period_ms - previous_used * (period_ms - seen_ms % period_ms))
            / period_ms END AS remaining,
  CASE WHEN allowed THEN 0 WHEN :cost > maximum THEN -1
       WHEN used + :cost <= maximum AND previous_used > 0
            AND ((maximum - used - :cost) * period_ms) / previous_used > 0
       THEN (period_ms - seen_ms % period_ms) - ((maximum - used - :cost) * period_ms) / previous_used
            + seen_ms - :now
       ELSE (period_ms - seen_ms % period_ms)
            + CASE WHEN used = 0 THEN 0
                   ELSE max(0, period_ms - ((maximum - :cost) * period_ms) / used) END
            + seen_ms - :now END AS retry_after_ms,
  CASE WHEN used > 0 THEN (window_key + 2) * period_ms
       WHEN previous_used > 0 THEN (window_key + 1) * period_ms ELSE seen_ms END AS reset_at_ms,
  denied, FALSE AS shadow_denied
