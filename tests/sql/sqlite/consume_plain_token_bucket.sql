UPDATE quota_buckets SET
  (level, denied, burst, seen_ms, cost, maximum, period_ms, blocked_until_ms, last_allowed) =
  (SELECT level_after, denied, capacity, t, cost, maximum, period_ms, CAST(NULL AS bigint), allowed
   FROM (
  SELECT *, CASE WHEN NOT (allowed) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
         denied_before + (NOT allowed) AS denied
  FROM (
    SELECT *, cost <= capacity AND level >= cost * period_ms AS allowed
    FROM (
      SELECT *, CASE WHEN start >= full_level THEN full_level
               WHEN t - coalesce(s_seen, t) >= (full_level - start - 1) / maximum + 1 THEN full_level
               ELSE start + maximum * (t - coalesce(s_seen, t)) END AS level
      FROM (
        SELECT *, CASE WHEN s_level IS NULL THEN full_level ELSE CASE
                 WHEN s_period = period_ms THEN min(s_level, capacity * period_ms)
                 WHEN s_level / s_period >= capacity THEN capacity * period_ms
                 ELSE max(CASE WHEN s_level >= 0 THEN s_level / s_period
                               ELSE -((s_period - 1 - s_level) / s_period) END,
                          -(4611686018427387904 / period_ms)) * period_ms END END AS start
        FROM (
          SELECT l.maximum AS maximum, l.burst AS capacity, l.period_ms AS period_ms,
            :cost AS cost,
            max(coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)), coalesce(quota_buckets.seen_ms, 0)) AS t,
            l.burst * l.period_ms AS full_level,
            CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
            quota_buckets.period_ms AS s_period, quota_buckets.seen_ms AS s_seen,
            coalesce(quota_buckets.denied, 0) AS denied_before
          FROM quota_limits AS l
          WHERE l.name = :limit AND l.algorithm = 'token_bucket' AND l.plain
        ) AS inputs LIMIT -1 OFFSET 0
      ) AS started
    ) AS refilled LIMIT -1 OFFSET 0
  ) AS decided) AS decision)
WHERE limit_name = :limit AND owner = :owner
RETURNING last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > burst THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(level / period_ms, 0) AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > burst THEN -1 ELSE (cost * period_ms - level - 1) / maximum + 1 + (seen_ms - coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))) END AS retry_after_ms,
  CASE WHEN level >= (burst * period_ms) THEN seen_ms
         ELSE seen_ms + ((burst * period_ms) - level - 1) / maximum + 1 END AS reset_at_ms, denied, FALSE AS shadow_denied
