INSERT INTO quota_resets (limit_name, owner, now_ms, remaining)
VALUES (:limit, :owner, CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END,
        (SELECT CASE l.algorithm WHEN 'token_bucket' THEN CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN min(CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) ELSE coalesce(o.burst, o.maximum) END, 2305843009213693952 / l.period_ms) ELSE l.burst END
                                 WHEN 'sliding_window' THEN CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN min(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END
                                 ELSE CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END END
         FROM quota_limits AS l
      LEFT JOIN quota_overrides AS o ON o.limit_name = :limit AND o.owner = :owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = :owner
         WHERE l.name = :limit))
RETURNING TRUE AS allowed, 'ok' AS reason, remaining, 0 AS retry_after_ms,
  now_ms AS reset_at_ms, 0 AS denied, FALSE AS shadow_denied
