UPDATE quota_log_owners SET
  (total, newest_at_ms, recorded, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied) =
  (SELECT total, newest_at_ms, recorded, denied, t, cost, maximum, period_ms,
          (allowed AND NOT blocked) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN reason = 'rate_limited' AND NOT shadow THEN greatest(retry_after_ms, coalesce(block_ms, 0)) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN blocked THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, quota_log_owners.shadow_denied + int4(NOT allowed AND shadow)
   FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT blocked THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE coalesce(quota_log_covering_event(key_limit, key_owner, t - period_ms, live_base + excess), t) + period_ms - t END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded ELSE s_total + recorded END AS total,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + int4((NOT allowed OR blocked) AND NOT shadow) AS denied
    FROM (
      SELECT *, CASE WHEN allowed AND NOT blocked AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *, coalesce(s_total - live_base, 0) AS used
          FROM (
            SELECT *, quota_log_live_base(key_limit, key_owner, t - period_ms) AS live_base, coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
            FROM (
              SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, l.period_ms AS period_ms, $3 AS cost,
                greatest(coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)), coalesce(quota_log_owners.seen_ms, 0)) AS t, l.name AS key_limit, $2 AS key_owner,
                quota_log_owners.total AS s_total,
                quota_log_owners.newest_at_ms AS s_newest_at,
                coalesce(quota_log_owners.denied, 0) AS denied_before,
            CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, coalesce($4, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)) AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
            l.block_ms AS block_ms, quota_log_owners.blocked_until_ms AS s_blocked_until
              FROM quota_limits AS l
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
              WHERE l.name = $1 AND l.algorithm = 'sliding_log' AND TRUE
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
