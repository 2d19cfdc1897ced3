INSERT INTO quota_resets (limit_name, owner, now_ms, remaining)
VALUES ($1, $2, CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END,
        (SELECT CASE l.algorithm WHEN 'token_bucket' THEN CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) ELSE coalesce(o.burst, o.maximum) END, 2305843009213693952 / l.period_ms) ELSE l.burst END
                                 WHEN 'sliding_window' THEN CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END
                                 ELSE CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END END
         FROM quota_limits AS l
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
         WHERE l.name = $1))
RETURNING TRUE AS allowed, 'ok' AS reason, remaining, 0 AS retry_after_ms,
  now_ms AS reset_at_ms, 0 AS denied, FALSE AS shadow_denied
