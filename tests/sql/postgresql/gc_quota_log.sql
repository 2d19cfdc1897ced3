
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR EXISTS (
    SELECT 1 FROM quota_limits AS l
    LEFT JOIN quota_log_owners AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
    WHERE l.name = s.limit_name
      AND l.algorithm IN ('sliding_log')
      AND (o.owner IS NULL OR s.at_ms <= greatest(?1, coalesce(o.seen_ms, 0)) - l.period_ms))
