SELECT s.used FROM quota_windows_k AS s WHERE s.limit_name = :limit AND s.owner = :owner
