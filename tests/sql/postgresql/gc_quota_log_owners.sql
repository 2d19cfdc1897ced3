
  NOT EXISTS (SELECT 1 FROM quota_log AS e
              WHERE e.limit_name = s.limit_name AND e.owner = s.owner)
  AND (NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
       OR (coalesce(s.denied, 0) = 0 AND coalesce(s.shadow_denied, 0) = 0 AND coalesce(s.seen_ms, 0) <= ?1
           AND EXISTS (SELECT 1 FROM quota_limits AS l
                       WHERE l.name = s.limit_name AND l.algorithm IN ('sliding_log'))))
