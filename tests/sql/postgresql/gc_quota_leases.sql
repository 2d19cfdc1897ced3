
  s.expires_at_ms <= ?1
  OR NOT EXISTS (SELECT 1 FROM quota_limits AS l
                 WHERE l.name = s.limit_name AND l.algorithm = 'concurrency')
