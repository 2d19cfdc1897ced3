UPDATE quota_windows SET
  (window_key, used, previous_used, denied, seen_ms, cost, maximum, period_ms, blocked_until_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms) =
  (SELECT window_key, used_after, previous_used, denied, t, cost, maximum, period_ms, NULL,
          allowed,
          CASE WHEN allowed THEN 'ok' WHEN cost > capacity THEN 'cost_exceeds_capacity'
               ELSE 'rate_limited' END,
          max(maximum - used_after, 0),
          CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1
               ELSE (window_key + 1) * period_ms - t + (t - now) END,
          CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END
   FROM (SELECT *, used + CASE WHEN allowed THEN cost ELSE 0 END AS used_after,
                denied_before + NOT allowed AS denied
         FROM (SELECT *, cost <= capacity AND used + cost <= maximum AS allowed
               FROM (SELECT maximum, capacity, period_ms, cost, now, t, window_key, denied_before,
                            CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
                            CASE row_key WHEN window_key THEN s_previous
                                         WHEN window_key - 1 THEN s_used ELSE 0 END AS previous_used
                     FROM (SELECT *, t / period_ms AS window_key,
                                  CASE WHEN s_period = period_ms THEN s_window_key
                                       ELSE s_seen / period_ms END AS row_key
                           FROM (SELECT l.maximum, l.maximum AS capacity, l.period_ms, :cost AS cost,
                                        :now AS now, max(:now, quota_windows.seen_ms) AS t,
                                        quota_windows.period_ms AS s_period,
                                        quota_windows.window_key AS s_window_key,
                                        quota_windows.seen_ms AS s_seen,
                                        quota_windows.used AS s_used,
                                        quota_windows.previous_used AS s_previous,
                                        quota_windows.denied AS denied_before
                                 FROM quota_limits AS l
                                 WHERE l.name = :limit AND l.algorithm = 'fixed_window'
                                   AND l.calendar IS NULL AND NOT l.shadow
                                   AND l.block_ms IS NULL
                                   AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                                                   WHERE o.limit_name = :limit
                                                     AND o.owner = :owner)
                                   AND NOT EXISTS (SELECT 1 FROM quota_overrides AS a
                                                   WHERE a.limit_name = '*'
                                                     AND a.owner = :owner)))))))
WHERE limit_name = :limit AND owner = :owner
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  FALSE AS shadow_denied
