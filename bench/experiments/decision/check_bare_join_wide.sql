SELECT s.used, l.maximum, s.window_key, s.seen_ms, s.denied, s.shadow_denied, s.period_ms,
       l.period_ms, s.previous_used, 'ok', NULL
FROM quota_limits AS l
JOIN quota_windows_k AS s ON s.limit_name = l.name AND s.owner = :owner
WHERE l.name = :limit AND l.plain
