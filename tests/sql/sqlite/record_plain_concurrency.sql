UPDATE quota_lease_owners SET
  (maximum, period_ms, cost, seen_ms, denied, shadow_denied, last_allowed, last_reason,
   last_remaining, last_retry_after_ms, last_reset_at_ms, last_shadow_denied, last_lease,
   last_expires_at_ms, blocked_until_ms) =
  (SELECT maximum, period_ms, cost, t, denied, coalesce(s_shadow_denied, 0), allowed AND NOT blocked, reason,
          remaining, retry_after_ms, reset_at_ms, FALSE, lease, expires_at_ms,
          blocked_until_ms
   FROM (
  SELECT *,
    CASE WHEN reason = 'blocked' AND own_retry >= 0
         THEN max(s_blocked_until - t, own_retry) + (t - now) 
         WHEN own_retry > 0 THEN own_retry + (t - now) ELSE own_retry END AS retry_after_ms,
    CASE WHEN blocked THEN s_blocked_until END AS blocked_until_ms
  FROM (
  SELECT *,
    CASE WHEN allowed AND NOT blocked THEN 'ok'
         WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked'
         WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN capacity
         WHEN policy IS NOT DISTINCT FROM 'deny' OR blocked THEN 0
         ELSE max(capacity - held_after, 0) END AS remaining,
    CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         WHEN NOT recorded OR (SELECT min(x.expires_at_ms) FROM quota_leases AS x WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t AND e.expires_at_ms <= x.expires_at_ms) >= excess) < t + period_ms THEN coalesce((SELECT min(x.expires_at_ms) FROM quota_leases AS x WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t AND e.expires_at_ms <= x.expires_at_ms) >= excess), t + period_ms) - t
         WHEN excess <= cost THEN period_ms
         ELSE max(t + period_ms, (SELECT min(x.expires_at_ms) FROM quota_leases AS x WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t AND e.expires_at_ms <= x.expires_at_ms) >= excess_later)) - t END AS own_retry,
    max(coalesce((SELECT max(e.expires_at_ms) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t), t), CASE WHEN recorded THEN t + period_ms ELSE t END)
      AS reset_at_ms,
    CASE WHEN recorded THEN t + period_ms END AS expires_at_ms,
    CASE WHEN recorded THEN lower(hex(randomblob(16))) END AS lease
  FROM (
    SELECT *,
      held + CASE WHEN recorded THEN cost ELSE 0 END AS held_after,
      held + CASE WHEN recorded THEN cost ELSE 0 END + cost - capacity AS excess,
      held + CASE WHEN recorded THEN cost ELSE 0 END - capacity AS excess_later,
      denied_before + (FALSE) AS denied
    FROM (
      SELECT *, policy IS DISTINCT FROM 'exempt' AS recorded
      FROM (
        SELECT *,
          CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE
               ELSE cost <= capacity AND held + cost <= capacity END AS allowed
        FROM (
          SELECT *, (SELECT coalesce(sum(e.cost), 0) FROM quota_leases AS e WHERE e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t) AS held, coalesce(s_denied, 0) AS denied_before,
            coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow
                     AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT l.name AS key_limit, :owner AS key_owner, :cost AS cost,
             coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) AS now, l.maximum AS maximum,
             l.maximum AS capacity, l.period_ms AS period_ms, NULL AS policy, FALSE AS shadow,
             NULL AS block_ms, quota_lease_owners.seen_ms AS s_seen,
             quota_lease_owners.denied AS s_denied,
             quota_lease_owners.shadow_denied AS s_shadow_denied,
             quota_lease_owners.blocked_until_ms AS s_blocked_until
      FROM quota_limits AS l
      WHERE l.name = :limit AND l.algorithm = 'concurrency' AND l.plain) AS inputs LIMIT -1 OFFSET 0
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS answered
  ) AS reasoned) AS decision)
WHERE limit_name = :limit AND owner = :owner
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_shadow_denied AS shadow_denied, last_lease AS lease, last_expires_at_ms AS expires_at_ms
