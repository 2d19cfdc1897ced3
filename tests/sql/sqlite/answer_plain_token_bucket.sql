SELECT last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > burst THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(level / period_ms, 0) AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > burst THEN -1 ELSE (cost * period_ms - level - 1) / maximum + 1 + (seen_ms - coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))) END AS retry_after_ms,
  CASE WHEN level >= (burst * period_ms) THEN seen_ms
         ELSE seen_ms + ((burst * period_ms) - level - 1) / maximum + 1 END AS reset_at_ms, denied, FALSE AS shadow_denied
FROM quota_buckets
WHERE limit_name = :limit AND owner = :owner
