SELECT last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(maximum - used, 0) AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > maximum THEN -1 ELSE (window_key + 1) * period_ms - seen_ms + (seen_ms - coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))) END AS retry_after_ms,
  CASE WHEN used > 0 THEN (window_key + 1) * period_ms ELSE seen_ms END AS reset_at_ms, denied, FALSE AS shadow_denied
FROM quota_windows
WHERE limit_name = :limit AND owner = :owner
