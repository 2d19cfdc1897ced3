SELECT allowed AND NOT blocked AS allowed, reason, remaining,
  retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied,
  CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE held END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN blocked THEN s_blocked_until END AS blocked_until_ms
FROM (
  SELECT *,
    CASE WHEN reason = 'blocked' AND own_retry >= 0
         THEN greatest(s_blocked_until - t, own_retry) + (t - now) 
         WHEN own_retry > 0 THEN own_retry + (t - now) ELSE own_retry END AS retry_after_ms,
    CASE WHEN blocked THEN s_blocked_until END AS blocked_until_ms
  FROM (
  SELECT *,
    CASE WHEN allowed AND NOT blocked THEN 'ok'
         WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked'
         WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN capacity
         WHEN policy IS NOT DISTINCT FROM 'deny' OR blocked THEN 0
         ELSE greatest(capacity - held_after, 0) END AS remaining,
    CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         WHEN NOT recorded OR quota_leases_freed_at(key_limit, key_owner, t, excess) < t + period_ms THEN coalesce(quota_leases_freed_at(key_limit, key_owner, t, excess), t + period_ms) - t
         WHEN excess <= cost THEN period_ms
         ELSE greatest(t + period_ms, quota_leases_freed_at(key_limit, key_owner, t, excess_later)) - t END AS own_retry,
    greatest(coalesce(quota_leases_last_expiry(key_limit, key_owner, t), t), CASE WHEN recorded THEN t + period_ms ELSE t END)
      AS reset_at_ms,
    CASE WHEN recorded THEN t + period_ms END AS expires_at_ms,
    CASE WHEN recorded THEN replace(CAST(gen_random_uuid() AS text), '-', '') END AS lease
  FROM (
    SELECT *,
      held + CASE WHEN recorded THEN cost ELSE 0 END AS held_after,
      held + CASE WHEN recorded THEN cost ELSE 0 END + cost - capacity AS excess,
      held + CASE WHEN recorded THEN cost ELSE 0 END - capacity AS excess_later,
      denied_before + int4(FALSE) AS denied
    FROM (
      SELECT *, FALSE AS recorded
      FROM (
        SELECT *,
          CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE
               ELSE cost <= capacity AND held + cost <= capacity END AS allowed
        FROM (
          SELECT *, quota_leases_held(key_limit, key_owner, t) AS held, coalesce(s_denied, 0) AS denied_before,
            coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow
                     AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
          FROM (
            SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT l.name AS key_limit, $2 AS key_owner, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost,
             CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now, l.maximum AS maximum, CASE WHEN l.name IS NULL THEN NULL WHEN coalesce(o.policy, a.policy) = 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity,
             l.period_ms AS period_ms, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, s.seen_ms AS s_seen, s.denied AS s_denied,
             s.shadow_denied AS s_shadow_denied, s.blocked_until_ms AS s_blocked_until
      FROM quota_limits AS l
      LEFT JOIN quota_lease_owners AS s ON s.owner = $2 AND s.limit_name = l.name
      LEFT JOIN quota_overrides AS o ON o.limit_name = l.name AND o.owner = $2
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = $2
      WHERE l.name = $1 AND l.algorithm = 'concurrency') AS inputs OFFSET 0
          ) AS clocked OFFSET 0
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS answered
  ) AS reasoned) AS decision
