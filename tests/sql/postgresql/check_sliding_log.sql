SELECT allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AS allowed, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END AS remaining,
  CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE shown_used END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE coalesce(quota_log_covering_event(key_limit, key_owner, t - period_ms, live_base + excess), t) + period_ms - t END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded ELSE s_total + recorded END AS total,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + int4(FALSE) AS denied
    FROM (
      SELECT *, CASE WHEN FALSE THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *, coalesce(s_total - live_base, 0) AS used
          FROM (
            SELECT *,
              quota_log_live_base(key_limit, key_owner, t - period_ms) AS live_base,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
              FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             l.name AS key_limit, $2 AS key_owner,
             s.total AS s_total, s.newest_at_ms AS s_newest_at, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_log_owners AS s ON s.limit_name = l.name AND s.owner = $2
      LEFT JOIN quota_overrides AS o ON o.limit_name = $1 AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
      WHERE l.name = $1 AND l.algorithm = 'sliding_log') AS inputs OFFSET 0
            ) AS clocked OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS summed) AS decision
