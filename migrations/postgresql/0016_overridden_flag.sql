-- quota schema on PostgreSQL, migration 0016: the overridden flag, as
-- migrations/0016_overridden_flag.sql on SQLite (read its header for what the flag means).
--
--   ALTER TABLE     quota_limits ADD COLUMN overridden;
--   CREATE FUNCTION quota_limit_is_overridden(name);
--   CREATE VIEW     quota_limits_overridden(name, overridden);
--   CREATE TRIGGER  quota_limits_overridden;
--
-- quota_limits.overridden is a boolean here. A BEFORE trigger on quota_limits sets it on every
-- insert and on every update of name, plain or overridden. A change to quota_overrides
-- already updates the limits it concerns (migration 0010's quota_overrides_plain sets
-- plain = plain on them), which runs this trigger too.
--
-- Exact under concurrency as the plain flag is: the trigger takes migration 0010's
-- transaction-level advisory lock (key 1903520877) before it reads quota_overrides.

ALTER TABLE quota_limits ADD COLUMN overridden boolean NOT NULL DEFAULT false;

-- The rule, written once: an override of the limit or of '*'.
CREATE FUNCTION quota_limit_is_overridden(name text)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM quota_overrides AS o WHERE o.limit_name IN ($1, '*'))
$$;

CREATE VIEW quota_limits_overridden AS
SELECT l.name, quota_limit_is_overridden(l.name) AS overridden
FROM quota_limits AS l;

CREATE FUNCTION quota_limits_overridden() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(1903520877);
  NEW.overridden := quota_limit_is_overridden(NEW.name);
  RETURN NEW;
END
$$;

CREATE TRIGGER quota_limits_overridden
BEFORE INSERT OR UPDATE OF name, plain, overridden ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_overridden();

UPDATE quota_limits SET overridden = quota_limit_is_overridden(name);
