-- quota schema, migration 0011: idempotency keys. A retried request is answered, not charged.
--
--   CREATE TABLE quota_idempotency(limit_name, owner, key, request, decided_by, allowed,
--                                  reason, remaining, retry_after_ms, reset_at_ms, denied,
--                                  shadow_denied, expires_at_ms);
--
-- A consume, record or consume_all made with an idempotency key (1 to 255 bytes) stores its
-- answer here, keyed by the limit, the owner and the key, in the same transaction as the
-- request itself (docs/concepts.md, "Retries"). A request with the same limit, owner and key
-- before expires_at_ms is answered from the row (replayed) and charges nothing; one that asks
-- for something else under the same key is refused (idempotency_conflict). A consume_all
-- stores one row per limit (and owner) of the call, each with the call's answer.
--
-- request: what was asked, as the library writes it: "consume 1" (the operation and the
--   cost), "record 5", or "consume_all 1 a:u,b:u" (the cost and every limit:owner of the
--   call, sorted); the same key with another request text is a conflict.
-- decided_by: for consume_all, the limit whose answer decided (Decision::limit); else NULL.
-- allowed ... shadow_denied: the answer (quota::Result), as the request answered it.
-- expires_at_ms: when the key may be used again for a new request: the request's time plus
--   Options::idempotency_ttl (24 hours unless set). gc deletes the rows past it.
--
-- Removing a limit removes its keys.

CREATE TABLE quota_idempotency (
  limit_name     TEXT    NOT NULL,
  owner          TEXT    NOT NULL,
  key            TEXT    NOT NULL CHECK (length(CAST(key AS BLOB)) BETWEEN 1 AND 255),
  request        TEXT    NOT NULL,
  decided_by     TEXT,
  allowed        INTEGER CHECK (allowed IN (0, 1)),
  reason         TEXT,
  remaining      INTEGER,
  retry_after_ms INTEGER,
  reset_at_ms    INTEGER,
  denied         INTEGER,
  shadow_denied  INTEGER CHECK (shadow_denied IN (0, 1)),
  expires_at_ms  INTEGER NOT NULL,
  PRIMARY KEY (limit_name, owner, key)
) WITHOUT ROWID;

CREATE INDEX quota_idempotency_expiry ON quota_idempotency (expires_at_ms);

CREATE TRIGGER quota_limits_removed_keys AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_idempotency WHERE limit_name = OLD.name;
END;
