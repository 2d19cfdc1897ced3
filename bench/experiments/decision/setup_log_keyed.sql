-- The sliding log's owners keyed (limit_name, owner) in a WITHOUT ROWID table, the state
-- columns only (used: the usage after the latest request; retry_at_ms: when its denial
-- ends), no new-owner trigger; the recording trigger of 0005 on it; the limit's `plain` flag
-- as in setup_windows_keyed.sql. The events stay in quota_log.
ALTER TABLE quota_limits ADD COLUMN plain INTEGER NOT NULL DEFAULT 1;
CREATE TABLE quota_log_owners_k (
  limit_name       TEXT    NOT NULL,
  owner            TEXT    NOT NULL,
  total            INTEGER NOT NULL CHECK (total >= 0),
  newest_at_ms     INTEGER,
  recorded         INTEGER NOT NULL CHECK (recorded >= 0),
  used             INTEGER NOT NULL,
  denied           INTEGER NOT NULL CHECK (denied >= 0),
  seen_ms          INTEGER NOT NULL,
  maximum          INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms        INTEGER NOT NULL,
  allowed          INTEGER NOT NULL,
  retry_at_ms      INTEGER,
  blocked_until_ms INTEGER,
  shadow_denied    INTEGER NOT NULL DEFAULT 0,
  refunded         INTEGER,
  PRIMARY KEY (limit_name, owner)
) STRICT, WITHOUT ROWID;
INSERT INTO quota_log_owners_k
SELECT limit_name, owner, total, newest_at_ms, recorded, last_reset_at_ms * 0 + total, denied,
       seen_ms, maximum, period_ms, last_allowed, NULL, blocked_until_ms, shadow_denied, NULL
FROM quota_log_owners WHERE seen_ms IS NOT NULL;
CREATE TRIGGER quota_log_owners_k_record AFTER UPDATE ON quota_log_owners_k
WHEN NEW.recorded > 0 BEGIN
  INSERT INTO quota_log (limit_name, owner, at_ms, cost, total)
  VALUES (NEW.limit_name, NEW.owner, NEW.newest_at_ms, NEW.recorded, NEW.total)
  ON CONFLICT (limit_name, owner, at_ms) DO UPDATE SET
    cost = cost + excluded.cost, total = excluded.total;
  DELETE FROM quota_log
  WHERE (NEW.total = NEW.recorded
         OR NEW.newest_at_ms / max(min(NEW.period_ms / 4, NEW.period_ms * 32 / NEW.maximum), 1)
            IS NOT OLD.newest_at_ms
                   / max(min(NEW.period_ms / 4, NEW.period_ms * 32 / NEW.maximum), 1))
    AND limit_name = NEW.limit_name AND owner = NEW.owner
    AND at_ms <= NEW.newest_at_ms - NEW.period_ms;
END;
