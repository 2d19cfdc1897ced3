UPDATE quota_log_owners SET
  (total, newest_at_ms, recorded, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied) =
  (SELECT total, newest_at_ms, recorded, denied, t, cost, maximum, period_ms,
          (allowed AND NOT blocked) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN reason = 'rate_limited' AND NOT shadow THEN max(retry_after_ms, coalesce(block_ms, 0)) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN blocked THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, quota_log_owners.shadow_denied + (NOT allowed AND shadow)
   FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT blocked THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE coalesce((SELECT e.at_ms FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms AND e.total - live_base >= excess ORDER BY e.at_ms LIMIT 1), t) + period_ms - t END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded ELSE s_total + recorded END AS total,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + ((NOT allowed OR blocked) AND NOT shadow) AS denied
    FROM (
      SELECT *, CASE WHEN allowed AND NOT blocked AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *, coalesce(s_total - live_base, 0) AS used
          FROM (
            SELECT *, (SELECT e.total - e.cost FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms ORDER BY e.at_ms LIMIT 1) AS live_base, coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
            FROM (
              SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, l.period_ms AS period_ms, :cost AS cost,
                max(coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)), coalesce(quota_log_owners.seen_ms, 0)) AS t, l.name AS key_limit, :owner AS key_owner,
                quota_log_owners.total AS s_total,
                quota_log_owners.newest_at_ms AS s_newest_at,
                coalesce(quota_log_owners.denied, 0) AS denied_before,
            CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
            l.block_ms AS block_ms, quota_log_owners.blocked_until_ms AS s_blocked_until
              FROM quota_limits AS l
      LEFT JOIN quota_overrides AS o ON o.limit_name = :limit AND o.owner = :owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = :owner
              WHERE l.name = :limit AND l.algorithm = 'sliding_log' AND TRUE
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
