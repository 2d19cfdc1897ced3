INSERT INTO quota_log_owners (limit_name, owner, cost, seen_ms, maximum)
VALUES (:limit, :owner, CASE WHEN :cost IS NULL THEN 1 WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000 THEN CAST(:cost AS INTEGER) ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END, CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END, 0)
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (total, newest_at_ms, recorded, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, refunded) =
  (SELECT total, newest_at_ms, recorded, denied, t, cost, maximum, period_ms,
          allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE), reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END, s_total - total
   FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE coalesce((SELECT e.at_ms FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms AND e.total - live_base >= excess ORDER BY e.at_ms LIMIT 1), t) + period_ms - t END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE coalesce((SELECT e.at_ms FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.total >= live_base + used ORDER BY e.at_ms LIMIT 1), s_newest_at) + period_ms END AS reset_at_ms,
    coalesce(live_base + used, s_total) AS total,
    CASE WHEN recorded > 0 THEN t ELSE coalesce((SELECT e.at_ms FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.total >= live_base + used ORDER BY e.at_ms LIMIT 1), s_newest_at) END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + (FALSE) AS denied
    FROM (
      SELECT *, CASE WHEN FALSE THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *, max(coalesce(s_total - live_base, 0) - refund, 0) AS used
          FROM (
            SELECT *,
              (SELECT e.total - e.cost FROM quota_log AS e WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms ORDER BY e.at_ms LIMIT 1) AS live_base,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, max(now, coalesce(s_seen, 0)) AS t
              FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             1 AS cost, excluded.cost AS refund, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_log_owners.blocked_until_ms AS s_blocked_until,
             excluded.limit_name AS key_limit,
             excluded.owner AS key_owner, quota_log_owners.total AS s_total,
             quota_log_owners.newest_at_ms AS s_newest_at,
             quota_log_owners.denied AS s_denied, quota_log_owners.seen_ms AS s_seen
      FROM (SELECT 1) AS request
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'sliding_log'
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs LIMIT -1 OFFSET 0
            ) AS clocked LIMIT -1 OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS summed) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
