SELECT allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    greatest(level_after / period_ms, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (cost * period_ms - level_after - 1) / maximum + 1 END AS retry_after_ms,
    CASE WHEN level_after >= full_level THEN t
         ELSE t + (full_level - level_after - 1) / maximum + 1 END AS reset_at_ms,
    capacity - CASE WHEN level_after >= 0 THEN level_after / period_ms
                    ELSE -((period_ms - 1 - level_after) / period_ms) END AS shown_used
  FROM (
    SELECT *,
      CASE WHEN NOT (FALSE) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
      denied_before + int4(FALSE) AS denied
    FROM (
      SELECT *,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND level >= cost * period_ms END AS allowed
      FROM (
        SELECT *, CASE WHEN start >= full_level THEN full_level
               WHEN t - coalesce(s_seen, t) >= (full_level - start - 1) / maximum + 1 THEN full_level
               ELSE start + maximum * (t - coalesce(s_seen, t)) END AS level
        FROM (
          SELECT *,
            CASE WHEN s_level IS NULL THEN full_level ELSE CASE
                 WHEN s_period = period_ms THEN least(s_level, capacity * period_ms)
                 WHEN s_level / s_period >= capacity THEN capacity * period_ms
                 ELSE greatest(CASE WHEN s_level >= 0 THEN s_level / s_period
                               ELSE -((s_period - 1 - s_level) / s_period) END,
                          -(4611686018427387904 / period_ms)) * period_ms END END AS start,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, greatest(now, coalesce(s_seen, 0)) AS t, capacity * period_ms AS full_level
            FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END, 4611686018427387904 / l.period_ms) ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN least(CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) ELSE coalesce(o.burst, o.maximum) END, 2305843009213693952 / l.period_ms) ELSE l.burst END AS capacity, l.period_ms AS period_ms,
             CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.level AS s_level, s.period_ms AS s_period, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_buckets AS s ON s.limit_name = l.name AND s.owner = $2
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
      WHERE l.name = $1 AND l.algorithm = 'token_bucket') AS inputs OFFSET 0
          ) AS clocked OFFSET 0
        ) AS started OFFSET 0
      ) AS refilled
    ) AS decided OFFSET 0
  ) AS recorded) AS decision
