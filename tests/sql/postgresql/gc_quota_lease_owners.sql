
  NOT EXISTS (SELECT 1 FROM quota_leases AS e
              WHERE e.owner = s.owner AND e.limit_name = s.limit_name AND e.expires_at_ms > ?1)
  AND (NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
       OR (coalesce(s.denied, 0) = 0 AND coalesce(s.shadow_denied, 0) = 0 AND coalesce(s.seen_ms, 0) <= ?1
           AND EXISTS (SELECT 1 FROM quota_limits AS l
                       WHERE l.name = s.limit_name AND l.algorithm = 'concurrency')))
