
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR (coalesce(s.denied, 0) = 0 AND coalesce(s.shadow_denied, 0) = 0 AND coalesce(s.seen_ms, 0) <= ?1
      AND EXISTS (
        SELECT 1 FROM quota_limits AS l
        WHERE l.name = s.limit_name
          AND ((l.algorithm = 'fixed_window' AND NOT coalesce(s.used > 0 AND CASE WHEN l.calendar IS NOT NULL THEN s.window_key > ?1 ELSE CASE WHEN s.period_ms = l.period_ms THEN s.window_key ELSE s.seen_ms / l.period_ms END >= ?1 / l.period_ms END, FALSE))
               OR (l.algorithm = 'sliding_window' AND NOT coalesce(s.used > 0 AND CASE WHEN s.period_ms = l.period_ms THEN s.window_key ELSE s.seen_ms / l.period_ms END + 1 >= ?1 / l.period_ms, FALSE) AND NOT coalesce(s.previous_used > 0 AND CASE WHEN s.period_ms = l.period_ms THEN s.window_key ELSE s.seen_ms / l.period_ms END >= ?1 / l.period_ms, FALSE)))))
