UPDATE quota_buckets SET
  (level, denied, burst, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms) =
  (SELECT level_after, denied, capacity, t, cost, maximum, period_ms,
          allowed AND NOT blocked, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN blocked THEN s_blocked_until END
   FROM (
  SELECT *,
    greatest(level_after / period_ms, 0) AS remaining,
    CASE WHEN allowed AND NOT blocked THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (cost * period_ms - level_after - 1) / maximum + 1 END AS retry_after_ms,
    CASE WHEN level_after >= full_level THEN t
         ELSE t + (full_level - level_after - 1) / maximum + 1 END AS reset_at_ms
  FROM (
  SELECT *, CASE WHEN NOT (policy IS DISTINCT FROM 'exempt') THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
         denied_before + int4(FALSE) AS denied
  FROM (
    SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND level >= cost * period_ms END AS allowed
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
                          -(4611686018427387904 / period_ms)) * period_ms END END AS start, coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
        FROM (
          SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) ELSE coalesce(o.burst, o.maximum) END, 2305843009213693952 / l.period_ms) ELSE l.burst END AS capacity, l.period_ms AS period_ms,
            $3 AS cost,
            greatest(coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)), coalesce(quota_buckets.seen_ms, 0)) AS t,
            CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) ELSE coalesce(o.burst, o.maximum) END, 2305843009213693952 / l.period_ms) ELSE l.burst END * l.period_ms AS full_level,
            CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
            quota_buckets.period_ms AS s_period, quota_buckets.seen_ms AS s_seen,
            coalesce(quota_buckets.denied, 0) AS denied_before,
            coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)) AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
            l.block_ms AS block_ms, quota_buckets.blocked_until_ms AS s_blocked_until
          FROM quota_limits AS l
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
          WHERE l.name = $1 AND l.algorithm = 'token_bucket' AND TRUE
        ) AS inputs OFFSET 0
      ) AS started
    ) AS refilled OFFSET 0
  ) AS decided OFFSET 0) AS answered) AS decision)
WHERE limit_name = $1 AND owner = $2
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
