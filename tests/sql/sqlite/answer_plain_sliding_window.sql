SELECT last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  max(CASE WHEN used >= maximum THEN 0     WHEN previous_used > ((maximum - used) * period_ms) / (period_ms - seen_ms % period_ms) THEN 0     ELSE ((maximum - used) * period_ms - previous_used * (period_ms - seen_ms % period_ms)) / period_ms END, 0) AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > maximum THEN -1 ELSE CASE WHEN used + cost <= maximum AND previous_used > 0          AND ((maximum - used - cost) * period_ms) / previous_used > 0     THEN (period_ms - seen_ms % period_ms) - ((maximum - used - cost) * period_ms) / previous_used     ELSE (period_ms - seen_ms % period_ms) + CASE WHEN used = 0 THEN 0                      ELSE max(0, period_ms - ((maximum - cost) * period_ms) / used)                 END END + (seen_ms - coalesce(:now, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))) END AS retry_after_ms,
  CASE WHEN used > 0 THEN (window_key + 2) * period_ms     WHEN previous_used > 0 THEN (window_key + 1) * period_ms ELSE seen_ms END AS reset_at_ms, denied, FALSE AS shadow_denied
FROM quota_windows
WHERE limit_name = :limit AND owner = :owner
