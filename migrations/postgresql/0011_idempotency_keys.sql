-- quota schema on PostgreSQL, migration 0011: idempotency keys, as
-- migrations/0011_idempotency_keys.sql on SQLite (read its header for what each column means).
--
--   CREATE TABLE quota_idempotency(limit_name, owner, key, request, decided_by, allowed,
--                                  reason, remaining, retry_after_ms, reset_at_ms, denied,
--                                  shadow_denied, expires_at_ms);

CREATE TABLE quota_idempotency (
  limit_name     text    COLLATE "C" NOT NULL,
  owner          text    COLLATE "C" NOT NULL,
  key            text    COLLATE "C" NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
  request        text    NOT NULL,
  decided_by     text    COLLATE "C",
  allowed        boolean,
  reason         text,
  remaining      bigint,
  retry_after_ms bigint,
  reset_at_ms    bigint,
  denied         bigint,
  shadow_denied  boolean,
  expires_at_ms  bigint  NOT NULL,
  PRIMARY KEY (limit_name, owner, key)
);

CREATE INDEX quota_idempotency_expiry ON quota_idempotency (expires_at_ms);

-- Removing a limit removes its keys.
CREATE FUNCTION quota_limits_removed_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_idempotency WHERE limit_name = OLD.name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_limits_removed_keys AFTER DELETE ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_removed_keys();
