-- The windows' state keyed (limit_name, owner) in a WITHOUT ROWID table: one b-tree per
-- write, the state columns only (no answer columns, no cost), no trigger; and a flag on the
-- limit that the specialised statements' guard reads (1: no overrides, shadow, block or
-- calendar). The fixed_window limit's rows are copied from quota_windows.
ALTER TABLE quota_limits ADD COLUMN plain INTEGER NOT NULL DEFAULT 1;
CREATE TABLE quota_windows_k (
  limit_name       TEXT    NOT NULL,
  owner            TEXT    NOT NULL,
  window_key       INTEGER NOT NULL,
  used             INTEGER NOT NULL CHECK (used >= 0),
  previous_used    INTEGER NOT NULL CHECK (previous_used >= 0),
  denied           INTEGER NOT NULL CHECK (denied >= 0),
  seen_ms          INTEGER NOT NULL,
  maximum          INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms        INTEGER NOT NULL,
  allowed          INTEGER NOT NULL,
  blocked_until_ms INTEGER,
  shadow_denied    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (limit_name, owner)
) STRICT, WITHOUT ROWID;
INSERT INTO quota_windows_k
SELECT limit_name, owner, window_key, used, previous_used, denied, seen_ms, maximum, period_ms,
       last_allowed, blocked_until_ms, shadow_denied
FROM quota_windows WHERE seen_ms IS NOT NULL;
