-- quota schema, migration 0013: a keyed acquire keeps its lease. A retried acquire_lease (or a
-- consume_all over a concurrency limit) made with an idempotency key is answered with the
-- lease the first request took, not with a second one.
--
--   ALTER TABLE quota_idempotency ADD COLUMN lease, lease_expires_at_ms;
--
-- lease: the id of the lease (quota_leases.id) that the request took on this row's limit and
--   owner; NULL when it took none (not a concurrency limit, denied, an exempt owner, a
--   shadow-mode allowance). A consume_all stores in each row the lease of that row's limit.
-- lease_expires_at_ms: that lease's expiry as the request answered it (a renewal later does
--   not change it here); NULL with lease.
--
-- The lease itself lives in quota_leases as any other: released, renewed and expired there.

ALTER TABLE quota_idempotency ADD COLUMN lease TEXT;
ALTER TABLE quota_idempotency ADD COLUMN lease_expires_at_ms INTEGER;
