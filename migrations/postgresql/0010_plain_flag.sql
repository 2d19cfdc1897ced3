-- quota schema on PostgreSQL, migration 0010: the plain flag, as migrations/0010_plain_flag.sql
-- on SQLite (read its header for what the flag means).
--
--   ALTER TABLE     quota_limits ADD COLUMN plain;
--   CREATE FUNCTION quota_limit_is_plain(name, shadow, block_ms, calendar);
--   CREATE VIEW     quota_limits_plain(name, plain);
--   CREATE TRIGGER  quota_limits_plain, quota_overrides_plain;
--
-- quota_limits.plain is a boolean here. A BEFORE trigger on quota_limits sets it on every
-- insert and on every update of the columns it depends on; a change to quota_overrides
-- updates the limits it concerns, which runs that trigger again.
--
-- Exact under concurrency: every trigger first takes one transaction-level advisory lock
-- (key 1903520877), held until its transaction ends, and only then reads quota_overrides, in
-- a statement of its own that sees every transaction that held the lock before. So a limit
-- inserted while another host inserts its first override, or the last override deleted while
-- another is inserted, ends with the flag that the committed rows call for. This holds for
-- clients at READ COMMITTED, PostgreSQL's default and the library's own.

ALTER TABLE quota_limits ADD COLUMN plain boolean NOT NULL DEFAULT false;

-- The rule, written once: the limit's own columns, and no override of the limit or of '*'.
CREATE FUNCTION quota_limit_is_plain(name text, shadow boolean, block_ms bigint, calendar text)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT NOT $2 AND $3 IS NULL AND $4 IS NULL
         AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o WHERE o.limit_name IN ($1, '*'))
$$;

CREATE VIEW quota_limits_plain AS
SELECT l.name, quota_limit_is_plain(l.name, l.shadow, l.block_ms, l.calendar) AS plain
FROM quota_limits AS l;

CREATE FUNCTION quota_limits_plain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(1903520877);
  NEW.plain := quota_limit_is_plain(NEW.name, NEW.shadow, NEW.block_ms, NEW.calendar);
  RETURN NEW;
END
$$;

CREATE TRIGGER quota_limits_plain
BEFORE INSERT OR UPDATE OF name, shadow, block_ms, calendar, plain ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_plain();

-- An override added, removed or moved: the limits it names (every limit for '*') are updated,
-- and quota_limits_plain computes their flag.
CREATE FUNCTION quota_overrides_plain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(1903520877);
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE quota_limits SET plain = plain
    WHERE name = OLD.limit_name OR OLD.limit_name = '*';
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    UPDATE quota_limits SET plain = plain
    WHERE name = NEW.limit_name OR NEW.limit_name = '*';
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_overrides_plain
AFTER INSERT OR DELETE OR UPDATE OF limit_name ON quota_overrides
FOR EACH ROW EXECUTE FUNCTION quota_overrides_plain();

UPDATE quota_limits SET plain = quota_limit_is_plain(name, shadow, block_ms, calendar);
