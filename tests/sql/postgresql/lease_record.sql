INSERT INTO quota_lease_owners (limit_name, owner, maximum, period_ms, cost, seen_ms, denied, shadow_denied, last_allowed, last_reason,
   last_remaining, last_retry_after_ms, last_reset_at_ms, last_shadow_denied, last_lease,
   last_expires_at_ms, blocked_until_ms)
SELECT key_limit, key_owner, maximum, period_ms, cost, t, denied, coalesce(s_shadow_denied, 0), allowed AND NOT blocked, reason,
          remaining, retry_after_ms, reset_at_ms, FALSE, lease, expires_at_ms,
          blocked_until_ms
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
      SELECT *, policy IS DISTINCT FROM 'exempt' AS recorded
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
      SELECT r.limit_name AS key_limit, r.owner AS key_owner, r.cost AS cost, r.now AS now,
             l.maximum AS maximum, CASE WHEN l.name IS NULL THEN NULL WHEN coalesce(o.policy, a.policy) = 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, l.block_ms AS block_ms,
             nobody.seen_ms AS s_seen, nobody.denied AS s_denied,
             nobody.shadow_denied AS s_shadow_denied, nobody.blocked_until_ms AS s_blocked_until
      FROM (SELECT $1 AS limit_name, $2 AS owner, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost,
                   CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now) AS r
      LEFT JOIN quota_limits AS l ON l.name = r.limit_name AND l.algorithm = 'concurrency'
      LEFT JOIN quota_overrides AS o ON o.limit_name = r.limit_name AND o.owner = r.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = r.owner
      LEFT JOIN quota_lease_owners AS nobody ON FALSE) AS inputs OFFSET 0
          ) AS clocked OFFSET 0
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS answered
  ) AS reasoned) AS decision WHERE TRUE
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (maximum, period_ms, cost, seen_ms, denied, shadow_denied, last_allowed, last_reason,
   last_remaining, last_retry_after_ms, last_reset_at_ms, last_shadow_denied, last_lease,
   last_expires_at_ms, blocked_until_ms) =
  (SELECT maximum, period_ms, cost, t, denied, coalesce(s_shadow_denied, 0), allowed AND NOT blocked, reason,
          remaining, retry_after_ms, reset_at_ms, FALSE, lease, expires_at_ms,
          blocked_until_ms
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
      SELECT *, policy IS DISTINCT FROM 'exempt' AS recorded
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
      SELECT r.limit_name AS key_limit, r.owner AS key_owner, r.cost AS cost, r.now AS now,
             l.maximum AS maximum, CASE WHEN l.name IS NULL THEN NULL WHEN coalesce(o.policy, a.policy) = 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, l.block_ms AS block_ms,
             quota_lease_owners.seen_ms AS s_seen, quota_lease_owners.denied AS s_denied,
             quota_lease_owners.shadow_denied AS s_shadow_denied, quota_lease_owners.blocked_until_ms AS s_blocked_until
      FROM (SELECT $1 AS limit_name, $2 AS owner, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost,
                   CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now) AS r
      LEFT JOIN quota_limits AS l ON l.name = r.limit_name AND l.algorithm = 'concurrency'
      LEFT JOIN quota_overrides AS o ON o.limit_name = r.limit_name AND o.owner = r.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = r.owner) AS inputs OFFSET 0
          ) AS clocked OFFSET 0
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS answered
  ) AS reasoned) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_shadow_denied AS shadow_denied, last_lease AS lease, last_expires_at_ms AS expires_at_ms
