UPDATE quota_log_owners SET
  (total, newest_at_ms, recorded, denied, seen_ms, cost, maximum, period_ms, blocked_until_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms) =
  (SELECT total, newest_at_ms, recorded, denied, t, cost, maximum, period_ms, CAST(NULL AS bigint),
          allowed, reason, remaining, retry_after_ms, reset_at_ms
   FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > maximum THEN -1 ELSE coalesce(quota_log_covering_event(key_limit, key_owner, t - period_ms, live_base + excess), t) + period_ms - t + (t - coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint))) END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded ELSE s_total + recorded END AS total,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + int4(NOT allowed) AS denied
    FROM (
      SELECT *, CASE WHEN allowed THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, cost <= maximum AND used + cost <= maximum AS allowed
        FROM (
          SELECT *, coalesce(s_total - live_base, 0) AS used
          FROM (
            SELECT *, quota_log_live_base(key_limit, key_owner, t - period_ms) AS live_base
            FROM (
              SELECT l.maximum AS maximum, l.period_ms AS period_ms, $3 AS cost,
                greatest(coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)), coalesce(quota_log_owners.seen_ms, 0)) AS t, l.name AS key_limit, $2 AS key_owner,
                quota_log_owners.total AS s_total,
                quota_log_owners.newest_at_ms AS s_newest_at,
                coalesce(quota_log_owners.denied, 0) AS denied_before
              FROM quota_limits AS l
              WHERE l.name = $1 AND l.algorithm = 'sliding_log' AND l.plain
            ) AS inputs OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS summed) AS decision)
WHERE limit_name = $1 AND owner = $2
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
