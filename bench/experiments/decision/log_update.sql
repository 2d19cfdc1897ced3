UPDATE quota_log_owners_k SET
  (total, newest_at_ms, recorded, used, denied, seen_ms, maximum, period_ms, allowed,
   retry_at_ms, blocked_until_ms) =
  (SELECT CASE WHEN rec = 0 THEN s_total WHEN used = 0 THEN rec ELSE s_total + rec END,
          CASE WHEN rec > 0 THEN t ELSE s_newest END,
          rec, used + rec, d + NOT ok, t, maximum, period_ms, ok,
          CASE WHEN ok OR cost > maximum THEN NULL
               ELSE coalesce((SELECT e.at_ms FROM quota_log AS e
                              WHERE e.limit_name = :limit AND e.owner = :owner
                                AND e.at_ms > t - period_ms
                                AND e.total - live_base >= used + cost - maximum
                              ORDER BY e.at_ms LIMIT 1), t) + period_ms END,
          NULL
   FROM (SELECT *, CASE WHEN ok THEN cost ELSE 0 END AS rec
         FROM (SELECT *, cost <= maximum AND used + cost <= maximum AS ok
               FROM (SELECT *, coalesce(s_total - live_base, 0) AS used
                     FROM (SELECT *,
                                  (SELECT e.total - e.cost FROM quota_log AS e
                                   WHERE e.limit_name = :limit AND e.owner = :owner
                                     AND e.at_ms > t - period_ms
                                   ORDER BY e.at_ms LIMIT 1) AS live_base
                           FROM (SELECT l.maximum, l.period_ms, :cost AS cost,
                                        max(:now, quota_log_owners_k.seen_ms) AS t,
                                        quota_log_owners_k.total AS s_total,
                                        quota_log_owners_k.newest_at_ms AS s_newest,
                                        quota_log_owners_k.denied AS d
                                 FROM quota_limits AS l
                                 WHERE l.name = :limit AND l.algorithm = 'sliding_log'
                                   AND l.plain) LIMIT -1 OFFSET 0)))))
WHERE limit_name = :limit AND owner = :owner
RETURNING allowed,
  CASE WHEN allowed THEN 'ok' WHEN :cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(maximum - used, 0) AS remaining,
  CASE WHEN allowed THEN 0 WHEN :cost > maximum THEN -1 ELSE retry_at_ms - :now END
    AS retry_after_ms,
  CASE WHEN used = 0 THEN seen_ms WHEN recorded > 0 THEN seen_ms + period_ms
       ELSE newest_at_ms + period_ms END AS reset_at_ms,
  denied, FALSE AS shadow_denied
