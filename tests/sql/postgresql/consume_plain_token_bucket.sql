UPDATE quota_buckets SET
  (level, denied, burst, seen_ms, cost, maximum, period_ms, blocked_until_ms, last_allowed) =
  (SELECT level_after, denied, capacity, t, cost, maximum, period_ms, CAST(NULL AS bigint), allowed
   FROM (
  SELECT *, CASE WHEN NOT (allowed) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
         denied_before + int4(NOT allowed) AS denied
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
            coalesce(quota_buckets.denied, 0) AS denied_before
          FROM quota_limits AS l
          WHERE l.name = $1 AND l.algorithm = 'token_bucket' AND l.plain
        ) AS inputs OFFSET 0
      ) AS started
    ) AS refilled OFFSET 0
  ) AS decided) AS decision)
WHERE limit_name = $1 AND owner = $2
RETURNING last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > burst THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  greatest(level / period_ms, 0) AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > burst THEN -1 ELSE (cost * period_ms - level - 1) / maximum + 1 + (seen_ms - coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint))) END AS retry_after_ms,
  CASE WHEN level >= (burst * period_ms) THEN seen_ms
         ELSE seen_ms + ((burst * period_ms) - level - 1) / maximum + 1 END AS reset_at_ms, denied, FALSE AS shadow_denied
