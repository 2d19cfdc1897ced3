s.expires_at_ms <= ?1
