UPDATE quota_buckets_k SET
  (level, denied, seen_ms, maximum, period_ms, burst, allowed, blocked_until_ms) =
  (SELECT CASE WHEN NOT ok THEN level
               WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
               ELSE level - cost * period_ms END,
          d + NOT ok, t, maximum, period_ms, capacity, ok, NULL
   FROM (SELECT *, cost <= capacity AND level >= cost * period_ms AS ok
         FROM (SELECT maximum, capacity, period_ms, cost, t, d,
                      CASE WHEN start >= full_level THEN full_level
                           WHEN t - seen >= (full_level - start - 1) / maximum + 1 THEN full_level
                           ELSE start + maximum * (t - seen) END AS level
               FROM (SELECT *,
                       CASE WHEN s_period = period_ms THEN min(s_level, full_level)
                            WHEN s_level / s_period >= capacity THEN full_level
                            ELSE max(CASE WHEN s_level >= 0 THEN s_level / s_period
                                          ELSE -((s_period - 1 - s_level) / s_period) END,
                                     -(4611686018427387904 / period_ms)) * period_ms END AS start
                     FROM (SELECT l.maximum, l.burst AS capacity, l.period_ms, :cost AS cost,
                                  max(:now, quota_buckets_k.seen_ms) AS t,
                                  l.burst * l.period_ms AS full_level,
                                  quota_buckets_k.seen_ms AS seen, quota_buckets_k.level AS s_level,
                                  quota_buckets_k.period_ms AS s_period,
                                  quota_buckets_k.denied AS d
                           FROM quota_limits AS l
                           WHERE l.name = :limit AND l.algorithm = 'token_bucket'
                             AND l.plain) LIMIT -1 OFFSET 0))))
WHERE limit_name = :limit AND owner = :owner
RETURNING allowed,
  CASE WHEN allowed THEN 'ok' WHEN :cost > burst THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(level / period_ms, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN :cost > burst THEN -1
       ELSE (:cost * period_ms - level - 1) / maximum + 1 + seen_ms - :now END AS retry_after_ms,
  CASE WHEN level >= burst * period_ms THEN seen_ms
       ELSE seen_ms + (burst * period_ms - level - 1) / maximum + 1 END AS reset_at_ms,
  denied, FALSE AS shadow_denied
