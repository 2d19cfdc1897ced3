-- quota schema on PostgreSQL, migration 0013: a keyed acquire keeps its lease, as
-- migrations/0013_idempotent_leases.sql on SQLite (read its header for what each column means).
--
--   ALTER TABLE quota_idempotency ADD COLUMN lease, lease_expires_at_ms;

ALTER TABLE quota_idempotency ADD COLUMN lease text COLLATE "C";
ALTER TABLE quota_idempotency ADD COLUMN lease_expires_at_ms bigint;
