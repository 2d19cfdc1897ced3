UPDATE quota_leases
SET expires_at_ms = r.t + coalesce(r.ttl, l.period_ms)
FROM (SELECT CAST($1 AS text) AS lease,
             CASE WHEN CAST($2 AS bigint) IS NULL THEN NULL
                  WHEN CAST($2 AS bigint) = CAST(CAST($2 AS bigint) AS bigint) AND CAST(CAST($2 AS bigint) AS bigint) BETWEEN 1000 AND 86400000
                  THEN CAST(CAST($2 AS bigint) AS bigint) ELSE quota_refuse('the ttl must be a whole number of ms from 1000 to 86400000 (NULL: the TTL of the limit)') END AS ttl,
             CASE WHEN CAST($3 AS bigint) IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN CAST($3 AS bigint) = CAST(CAST($3 AS bigint) AS bigint) AND CAST(CAST($3 AS bigint) AS bigint) >= 0 THEN CAST(CAST($3 AS bigint) AS bigint) ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS t) AS r,
     quota_limits AS l
WHERE quota_leases.id = r.lease AND l.name = quota_leases.limit_name
  AND quota_leases.expires_at_ms > r.t
RETURNING TRUE AS allowed, 'ok' AS reason, id AS lease, limit_name, owner, cost, expires_at_ms
