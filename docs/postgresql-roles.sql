-- A least-privilege role for the hosts that consume: it can check, consume, record, refund,
-- reset, read usage and collect garbage, but cannot define, change or remove limits or
-- overrides, and cannot migrate. Limits, overrides and migrations stay with the schema's owner
-- (quotactl limit/override/migrate run as that owner).
--
-- Run it with psql, as the owner of quota's tables, after `quotactl migrate`, on the database
-- and schema that hold them; run it again after every migration (a new table needs its grant):
--
--   psql "postgresql://OWNER@HOST/DB" -v ON_ERROR_STOP=1 \
--        -v role=quota_app -v schema=public -f docs/postgresql-roles.sql
--
-- The script only grants; it needs no right beyond owning quota's tables (and their schema).
-- The role itself (default quota_app) is made first by whoever may make roles, a superuser or
-- a role with CREATEROLE, which a database's owner usually lacks:
--
--   psql "postgresql://ADMIN@HOST/postgres" -c 'CREATE ROLE quota_app LOGIN'
--
-- When the role is missing and the user running the script may make roles, the script makes
-- it (with LOGIN and no password); when it may not, the script stops before granting anything
-- and says which statement to have run. Give the role a password with psql's \password
-- quota_app, which sends only a hash (a password in a command line or a statement lands in
-- shell histories and server logs). schema (default public) is where the tables are. The
-- hosts then open the engine as that role with migrations off (Options::migrate = false;
-- quotactl migrates only in `quotactl migrate`), since the role cannot migrate.
--
-- Why each grant: every consume, check, record and refund is one statement on the state table
-- of the limit's algorithm that also reads the limit and the owner's overrides; reset inserts a
-- request row into quota_resets. The triggers those statements fire are not SECURITY DEFINER:
-- they run with this role's privileges, so the role needs what the trigger bodies do as well
-- (quota_log writes for the sliding log, quota_resets and state-table deletes for reset).

\if :{?role}
\else
  \set role quota_app
\endif
\if :{?schema}
\else
  \set schema public
\endif

-- The role: made here only when it is missing and this user may make roles; otherwise the
-- script stops, having changed nothing, with the statement to have run.
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') AS quota_role_missing,
       (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user)
         AS quota_may_create_roles \gset
\if :quota_role_missing
  \if :quota_may_create_roles
    SELECT format('CREATE ROLE %I LOGIN', :'role') \gexec
  \else
    SELECT format('DO $quota$ BEGIN RAISE EXCEPTION %L; END $quota$',
                  format('role %I does not exist, and %I may not create roles (no CREATEROLE): '
                         'have a superuser or a role with CREATEROLE run CREATE ROLE %I LOGIN, '
                         'then run this script again', :'role', current_user, :'role')) \gexec
  \endif
\endif

BEGIN;

-- To find the tables at all. Not CREATE: the role creates nothing, so it cannot migrate.
GRANT USAGE ON SCHEMA :"schema" TO :"role";

-- Read only: every statement reads the limit (quota_limits) and the owner's overrides
-- (quota_overrides) and calendar anchors (quota_anchors); opening reads the applied migrations (quota_migrations) to check their
-- checksums and the schema's version. No INSERT, UPDATE or DELETE here: Engine::define,
-- set_override, set_anchor, remove, remove_override, remove_anchor and migrating fail with "the database role lacks a
-- privilege".
GRANT SELECT ON :"schema".quota_limits, :"schema".quota_overrides, :"schema".quota_anchors,
  :"schema".quota_migrations
  TO :"role";

-- The views, for reading usage with SQL (quotactl usage reads the state tables through the
-- engine; a dashboard may read the views). A view reads its tables with its owner's rights.
GRANT SELECT ON :"schema".quota_usage, :"schema".quota_owner_limits, :"schema".quota_limits_plain
  TO :"role";

-- The state: consume, record and refund insert an owner's row or update it (INSERT ... ON
-- CONFLICT DO UPDATE ... RETURNING needs SELECT, INSERT and UPDATE); reset's trigger deletes
-- the owner's rows in every state table; gc deletes dead rows, after LOCK TABLE ... IN
-- EXCLUSIVE MODE, which needs UPDATE or DELETE.
GRANT SELECT, INSERT, UPDATE, DELETE
  ON :"schema".quota_windows, :"schema".quota_buckets, :"schema".quota_log_owners
  TO :"role";

-- The sliding log's events: quota_log_owners' triggers append (INSERT ... ON CONFLICT DO
-- UPDATE) and prune (DELETE) them, a refund's trigger takes them back (DELETE, UPDATE), and
-- the statements read them through the functions below.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".quota_log TO :"role";

-- Idempotency keys: a request with a key reads its key's row (SELECT), claims it (INSERT ...
-- ON CONFLICT DO UPDATE), stores its answer in it (UPDATE); gc deletes expired keys (DELETE).
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".quota_idempotency TO :"role";

-- Concurrency leases (migration 0012): an acquire upserts the owner's row of
-- quota_lease_owners, whose trigger inserts the lease; renew updates a lease, release and reset
-- (through quota_resets' trigger) delete leases, gc deletes expired ones.
GRANT SELECT, INSERT, UPDATE, DELETE
  ON :"schema".quota_lease_owners, :"schema".quota_leases
  TO :"role";

-- reset: the statement inserts a request row (INSERT ... RETURNING reads it back: SELECT);
-- the request's trigger deletes that row again once it has applied it (DELETE ... WHERE reads
-- its columns: SELECT).
GRANT SELECT, INSERT, DELETE ON :"schema".quota_resets TO :"role";

-- Functions the statements call: quota_refuse (a cost or time out of range), and the sliding
-- log's reads of its events after the owner's row is locked. PostgreSQL grants EXECUTE on
-- functions to PUBLIC by default; these grants keep the role working where an operator has
-- revoked that. (Trigger functions need no EXECUTE grant: a trigger runs whoever fires it.)
GRANT EXECUTE ON FUNCTION
  :"schema".quota_refuse(text),
  :"schema".quota_log_live_base(text, text, bigint),
  :"schema".quota_log_covering_event(text, text, bigint, bigint),
  :"schema".quota_log_newest_kept(text, text, bigint),
  :"schema".quota_leases_held(text, text, bigint),
  :"schema".quota_leases_last_expiry(text, text, bigint),
  :"schema".quota_leases_freed_at(text, text, bigint, bigint)
  TO :"role";

COMMIT;
