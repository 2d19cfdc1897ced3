
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR (coalesce(s.denied, 0) = 0 AND coalesce(s.shadow_denied, 0) = 0 AND coalesce(s.seen_ms, 0) <= ?1
      AND EXISTS (
        SELECT 1 FROM quota_limits AS l
        WHERE l.name = s.limit_name AND l.algorithm = 'token_bucket'
          AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                          WHERE o.owner = s.owner AND o.limit_name IN (s.limit_name, '*')
                            AND o.policy = 'maximum')
          AND (CASE
                 WHEN s.period_ms = l.period_ms THEN least(s.level, l.burst * l.period_ms)
                 WHEN s.level / s.period_ms >= l.burst THEN l.burst * l.period_ms
                 ELSE greatest(CASE WHEN s.level >= 0 THEN s.level / s.period_ms
                               ELSE -((s.period_ms - 1 - s.level) / s.period_ms) END,
                          -(4611686018427387904 / l.period_ms)) * l.period_ms END >= l.burst * l.period_ms OR ?1 - coalesce(s.seen_ms, ?1) >= (l.burst * l.period_ms - CASE
                 WHEN s.period_ms = l.period_ms THEN least(s.level, l.burst * l.period_ms)
                 WHEN s.level / s.period_ms >= l.burst THEN l.burst * l.period_ms
                 ELSE greatest(CASE WHEN s.level >= 0 THEN s.level / s.period_ms
                               ELSE -((s.period_ms - 1 - s.level) / s.period_ms) END,
                          -(4611686018427387904 / l.period_ms)) * l.period_ms END - 1) / l.maximum + 1)))
