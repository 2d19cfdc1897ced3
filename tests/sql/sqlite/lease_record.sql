INSERT INTO quota_lease_owners (limit_name, owner, maximum, period_ms, cost, seen_ms, denied, shadow_denied, last_allowed, last_reason,
   last_remaining, last_retry_after_ms, last_reset_at_ms, last_shadow_denied, last_lease,
   last_expires_at_ms, blocked_until_ms)
SELECT key_limit, key_owner, maximum, period_ms, cost, t, denied, coalesce(s_shadow_denied, 0), allowed AND NOT blocked, reason,
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
      SELECT r.limit_name AS key_limit, r.owner AS key_owner, r.cost AS cost, r.now AS now,
             l.maximum AS maximum, CASE WHEN l.name IS NULL THEN NULL WHEN coalesce(o.policy, a.policy) = 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, l.block_ms AS block_ms,
             s.seen_ms AS s_seen, s.denied AS s_denied,
             s.shadow_denied AS s_shadow_denied, s.blocked_until_ms AS s_blocked_until
      FROM (SELECT :limit AS limit_name, :owner AS owner, CASE WHEN :cost IS NULL THEN 1 WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000 THEN CAST(:cost AS INTEGER) ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost,
                   CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now) AS r
      LEFT JOIN quota_limits AS l ON l.name = r.limit_name AND l.algorithm = 'concurrency'
      LEFT JOIN quota_overrides AS o ON o.limit_name = r.limit_name AND o.owner = r.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = r.owner
      LEFT JOIN quota_lease_owners AS s ON s.limit_name = r.limit_name AND s.owner = r.owner) AS inputs LIMIT -1 OFFSET 0
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS answered
  ) AS reasoned) AS decision WHERE TRUE
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (maximum, period_ms, cost, seen_ms, denied, shadow_denied, last_allowed, last_reason,
   last_remaining, last_retry_after_ms, last_reset_at_ms, last_shadow_denied, last_lease,
   last_expires_at_ms, blocked_until_ms) =
  (excluded.maximum, excluded.period_ms, excluded.cost, excluded.seen_ms, excluded.denied, excluded.shadow_denied, excluded.last_allowed, excluded.last_reason, excluded.last_remaining, excluded.last_retry_after_ms, excluded.last_reset_at_ms, excluded.last_shadow_denied, excluded.last_lease, excluded.last_expires_at_ms, excluded.blocked_until_ms)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_shadow_denied AS shadow_denied, last_lease AS lease, last_expires_at_ms AS expires_at_ms
