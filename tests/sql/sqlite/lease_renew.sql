UPDATE quota_leases
SET expires_at_ms = r.t + coalesce(r.ttl, l.period_ms)
FROM (SELECT :lease AS lease,
             CASE WHEN :ttl IS NULL THEN NULL
                  WHEN :ttl = CAST(:ttl AS bigint) AND CAST(:ttl AS bigint) BETWEEN 1000 AND 86400000
                  THEN CAST(:ttl AS bigint) ELSE json_extract('{}', 'the ttl must be a whole number of ms from 1000 to 86400000 (NULL: the TTL of the limit)') END AS ttl,
             CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS bigint) AND CAST(:now AS bigint) >= 0 THEN CAST(:now AS bigint) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS t) AS r,
     quota_limits AS l
WHERE quota_leases.id = r.lease AND l.name = quota_leases.limit_name
  AND quota_leases.expires_at_ms > r.t
RETURNING TRUE AS allowed, 'ok' AS reason, id AS lease, limit_name, owner, cost, expires_at_ms
