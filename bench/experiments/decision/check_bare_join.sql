SELECT s.used, l.maximum FROM quota_limits AS l
JOIN quota_windows_k AS s ON s.limit_name = l.name AND s.owner = :owner
WHERE l.name = :limit AND l.plain
