-- quota schema on PostgreSQL, migration 0014: lockouts on concurrency limits. The columns and
-- their meaning are SQLite's migration 0014's.
--
--   quota_limits: a concurrency limit may have a block_ms
--   ALTER TABLE quota_lease_owners ADD COLUMN blocked_until_ms;
--
-- A concurrency limit with block_ms blocks an owner whose acquire it denies as rate_limited
-- until t + block_ms, as 0007 blocks the owners of the other algorithms; the acquire
-- statement (src/sql/lease_statements.cpp) reads and writes blocked_until_ms in its upsert,
-- under the owner's row lock.

ALTER TABLE quota_limits DROP CONSTRAINT quota_limits_concurrency_check;
ALTER TABLE quota_limits ADD CONSTRAINT quota_limits_concurrency_check
  CHECK (algorithm <> 'concurrency' OR period_ms BETWEEN 1000 AND 86400000);

ALTER TABLE quota_lease_owners ADD COLUMN blocked_until_ms bigint;
