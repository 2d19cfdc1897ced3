SELECT allowed,
  CASE WHEN allowed THEN 'ok' WHEN cost > capacity THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  greatest(level_after / period_ms, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (cost * period_ms - level_after - 1) / maximum + 1 + (t - coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint))) END AS retry_after_ms,
  CASE WHEN level_after >= full_level THEN t
         ELSE t + (full_level - level_after - 1) / maximum + 1 END AS reset_at_ms, denied, FALSE AS shadow_denied, capacity - CASE WHEN level_after >= 0 THEN level_after / period_ms
                    ELSE -((period_ms - 1 - level_after) / period_ms) END AS used,
  shadow_denials, capacity AS capacity, CAST(NULL AS bigint) AS blocked_until_ms
FROM (
  SELECT *, CASE WHEN NOT (FALSE) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
         denied_before + int4(FALSE) AS denied
  FROM (
    SELECT *, cost <= capacity AND level >= cost * period_ms AS allowed
    FROM (
      SELECT *, CASE WHEN start >= full_level THEN full_level
               WHEN t - coalesce(s_seen, t) >= (full_level - start - 1) / maximum + 1 THEN full_level
               ELSE start + maximum * (t - coalesce(s_seen, t)) END AS level
      FROM (
        SELECT *, CASE WHEN s_level IS NULL THEN full_level ELSE CASE
                 WHEN s_period = period_ms THEN least(s_level, capacity * period_ms)
                 WHEN s_level / s_period >= capacity THEN capacity * period_ms
                 ELSE greatest(CASE WHEN s_level >= 0 THEN s_level / s_period
                               ELSE -((s_period - 1 - s_level) / s_period) END,
                          -(4611686018427387904 / period_ms)) * period_ms END END AS start
        FROM (
          SELECT l.maximum AS maximum, l.burst AS capacity, l.period_ms AS period_ms,
            $3 AS cost,
            greatest(coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)), coalesce(quota_buckets.seen_ms, 0)) AS t,
            l.burst * l.period_ms AS full_level,
            CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
            quota_buckets.period_ms AS s_period, quota_buckets.seen_ms AS s_seen,
            coalesce(quota_buckets.denied, 0) AS denied_before, coalesce(quota_buckets.shadow_denied, 0) AS shadow_denials
          FROM quota_limits AS l
          LEFT JOIN quota_buckets ON quota_buckets.limit_name = l.name AND quota_buckets.owner = $2
          WHERE l.name = $1 AND l.algorithm = 'token_bucket' AND l.plain
        ) AS inputs OFFSET 0
      ) AS started
    ) AS refilled OFFSET 0
  ) AS decided) AS decision
