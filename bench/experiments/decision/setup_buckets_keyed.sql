-- The buckets' state keyed (limit_name, owner) in a WITHOUT ROWID table, state columns only,
-- no trigger; the limit's `plain` flag as in setup_windows_keyed.sql.
ALTER TABLE quota_limits ADD COLUMN plain INTEGER NOT NULL DEFAULT 1;
CREATE TABLE quota_buckets_k (
  limit_name       TEXT    NOT NULL,
  owner            TEXT    NOT NULL,
  level            INTEGER NOT NULL CHECK (level >= -4611686018427387904),
  denied           INTEGER NOT NULL CHECK (denied >= 0),
  seen_ms          INTEGER NOT NULL,
  maximum          INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms        INTEGER NOT NULL,
  burst            INTEGER NOT NULL,
  allowed          INTEGER NOT NULL,
  blocked_until_ms INTEGER,
  shadow_denied    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (limit_name, owner)
) STRICT, WITHOUT ROWID;
INSERT INTO quota_buckets_k
SELECT limit_name, owner, level, denied, seen_ms, maximum, period_ms, burst, last_allowed,
       blocked_until_ms, shadow_denied
FROM quota_buckets WHERE seen_ms IS NOT NULL;
