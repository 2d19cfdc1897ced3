-- quota schema on PostgreSQL, migration 0012: concurrency leases, limits on what is in flight
-- at once. The tables and their meaning are SQLite's migration 0012's.
--
--   quota_limits: algorithm also 'concurrency' (its TTL in period_ms, 1 s to 1 day, no block)
--   CREATE TABLE quota_lease_owners(limit_name, owner, maximum, period_ms, cost, seen_ms,
--                                   denied, shadow_denied, last_*);
--   CREATE TABLE quota_leases(id, limit_name, owner, cost, expires_at_ms, acquired_at_ms);
--
-- Exact across hosts: the acquire statement upserts the owner's row of quota_lease_owners, so
-- its decision runs with that row locked; the leases it counts are read by the VOLATILE
-- functions below, each of which takes a fresh snapshot after the lock is held (as the sliding
-- log's event reads do, 0006), never the statement's snapshot from before the wait.

ALTER TABLE quota_limits DROP CONSTRAINT quota_limits_algorithm_check;
ALTER TABLE quota_limits ADD CONSTRAINT quota_limits_algorithm_check
  CHECK (algorithm IN ('sliding_log', 'fixed_window', 'sliding_window', 'token_bucket',
                       'concurrency'));
ALTER TABLE quota_limits ADD CONSTRAINT quota_limits_concurrency_check
  CHECK (algorithm <> 'concurrency' OR (period_ms BETWEEN 1000 AND 86400000 AND block_ms IS NULL));

CREATE TABLE quota_lease_owners (
  limit_name          text    COLLATE "C" NOT NULL,
  owner               text    COLLATE "C" NOT NULL,
  maximum             bigint  CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           bigint  CONSTRAINT "valid period_ms" CHECK (period_ms >= 1),
  cost                bigint,
  seen_ms             bigint,
  denied              bigint  CONSTRAINT "valid denied" CHECK (denied >= 0),
  shadow_denied       bigint  DEFAULT 0
                      CONSTRAINT "valid shadow_denied" CHECK (shadow_denied >= 0),
  last_allowed        boolean,
  last_reason         text    COLLATE "C",
  last_remaining      bigint,
  last_retry_after_ms bigint,
  last_reset_at_ms    bigint,
  last_shadow_denied  boolean,
  last_lease          text    COLLATE "C",
  last_expires_at_ms  bigint,
  UNIQUE (owner, limit_name)
);

CREATE TABLE quota_leases (
  id             text   COLLATE "C" NOT NULL PRIMARY KEY,
  limit_name     text   COLLATE "C" NOT NULL,
  owner          text   COLLATE "C" NOT NULL,
  cost           bigint NOT NULL CHECK (cost BETWEEN 1 AND 1000000000000),
  expires_at_ms  bigint NOT NULL,
  acquired_at_ms bigint NOT NULL
);

CREATE INDEX quota_leases_by_owner ON quota_leases (owner, limit_name, expires_at_ms);

-- The units held by the owner's leases unexpired at `at_ms`.
CREATE FUNCTION quota_leases_held(limit_name text, owner text, at_ms bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN (SELECT coalesce(sum(e.cost), 0) FROM quota_leases AS e
          WHERE e.owner = $2 AND e.limit_name = $1 AND e.expires_at_ms > $3);
END
$$;

-- The last expiry of the owner's leases unexpired at `at_ms` (NULL: none).
CREATE FUNCTION quota_leases_last_expiry(limit_name text, owner text, at_ms bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN (SELECT max(e.expires_at_ms) FROM quota_leases AS e
          WHERE e.owner = $2 AND e.limit_name = $1 AND e.expires_at_ms > $3);
END
$$;

-- The first expiry after `at_ms` by which the owner's leases unexpired at `at_ms` free at
-- least `units` (NULL: they never do).
CREATE FUNCTION quota_leases_freed_at(limit_name text, owner text, at_ms bigint, units bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN (SELECT min(x.expires_at_ms) FROM quota_leases AS x
          WHERE x.owner = $2 AND x.limit_name = $1 AND x.expires_at_ms > $3
            AND (SELECT sum(y.cost) FROM quota_leases AS y
                 WHERE y.owner = $2 AND y.limit_name = $1 AND y.expires_at_ms > $3
                   AND y.expires_at_ms <= x.expires_at_ms) >= $4);
END
$$;

-- A write of the owner's row that took a lease (last_lease set) inserts it.
CREATE FUNCTION quota_lease_owners_taken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO quota_leases (id, limit_name, owner, cost, expires_at_ms, acquired_at_ms)
  VALUES (NEW.last_lease, NEW.limit_name, NEW.owner, NEW.cost, NEW.last_expires_at_ms,
          NEW.seen_ms);
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_lease_owners_taken AFTER INSERT OR UPDATE ON quota_lease_owners
FOR EACH ROW WHEN (NEW.last_lease IS NOT NULL) EXECUTE FUNCTION quota_lease_owners_taken();

-- reset releases every lease of the owner and forgets its row.
CREATE FUNCTION quota_resets_leases() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_lease_owners WHERE owner = NEW.owner AND limit_name = NEW.limit_name;
  DELETE FROM quota_leases WHERE owner = NEW.owner AND limit_name = NEW.limit_name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_resets_leases AFTER INSERT ON quota_resets
FOR EACH ROW EXECUTE FUNCTION quota_resets_leases();

-- Changing a limit's algorithm or removing it discards its leases and lease owners.
CREATE FUNCTION quota_limits_leases_discarded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_lease_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_leases WHERE limit_name = OLD.name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_limits_algorithm_changed_leases AFTER UPDATE OF algorithm ON quota_limits
FOR EACH ROW WHEN (OLD.algorithm IS DISTINCT FROM NEW.algorithm)
EXECUTE FUNCTION quota_limits_leases_discarded();

CREATE TRIGGER quota_limits_removed_leases AFTER DELETE ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_leases_discarded();
