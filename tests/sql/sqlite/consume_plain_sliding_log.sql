UPDATE quota_log_owners SET
  (total, newest_at_ms, recorded, denied, seen_ms, cost, maximum, period_ms, blocked_until_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms) =
  (SELECT total, newest_at_ms, recorded, denied, t, cost, maximum, period_ms, CAST(NULL AS bigint),
          allowed, reason, remaining, retry_after_ms, reset_at_ms
   FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > maximum THEN -1 ELSE coalesce((SELECT e.at_ms FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms AND e.total - live_base >= excess ORDER BY e.at_ms LIMIT 1), t) + period_ms - t + (t - coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))) END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded ELSE s_total + recorded END AS total,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + (NOT allowed) AS denied
    FROM (
      SELECT *, CASE WHEN allowed THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, cost <= maximum AND used + cost <= maximum AS allowed
        FROM (
          SELECT *, coalesce(s_total - live_base, 0) AS used
          FROM (
            SELECT *, (SELECT e.total - e.cost FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms ORDER BY e.at_ms LIMIT 1) AS live_base
            FROM (
              SELECT l.maximum AS maximum, l.period_ms AS period_ms, :cost AS cost,
                max(coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)), coalesce(quota_log_owners.seen_ms, 0)) AS t, l.name AS key_limit, :owner AS key_owner,
                quota_log_owners.total AS s_total,
                quota_log_owners.newest_at_ms AS s_newest_at,
                coalesce(quota_log_owners.denied, 0) AS denied_before
              FROM quota_limits AS l
              WHERE l.name = :limit AND l.algorithm = 'sliding_log' AND l.plain
            ) AS inputs LIMIT -1 OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS summed) AS decision)
WHERE limit_name = :limit AND owner = :owner
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
