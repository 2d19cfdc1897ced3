-- The complete current quota schema (schema version 6), readable on its own.
-- Migrating an empty database with the migrations in migrations/ yields exactly this schema
-- (tests/schema_test.cpp proves it); apply this file only to inspect or document it, and use
-- `quotactl migrate` (or Engine::open) to create real databases, so that quota_migrations
-- records the version.
--
-- quota schema: limits, per-owner state, the sliding log, resets, usage (migration 0001); new
-- owners created through a request queue (migration 0002); overrides, shadow mode and refunds
-- (migration 0003); the state tables keyed by owner first, the per-owner rows in rowid tables
-- (migration 0004); the sliding log pruned in batches (migration 0005); sliding_window limits
-- of any period up to 366 days (migration 0006).
--
-- Every object is named quota_* so that it can live in an application's own database file.
-- Times are milliseconds since the Unix epoch (64-bit integers) everywhere.
--
--   CREATE TABLE quota_migrations(version, name, checksum, applied_at_ms);
--   CREATE TABLE quota_limits(name, algorithm, maximum, period_ms, burst);
--   CREATE TABLE quota_windows(limit_name, owner, window_key, used, previous_used, ...);
--   CREATE TABLE quota_log_owners(limit_name, owner, total, newest_at_ms, recorded, ...);
--   CREATE TABLE quota_log(limit_name, owner, at_ms, cost, total);
--   CREATE TABLE quota_buckets(limit_name, owner, level, ...);
--   CREATE TABLE quota_resets(limit_name, owner, now_ms, remaining);
--   CREATE TABLE quota_new_owners(state_table, limit_name, owner);
--   CREATE VIEW  quota_usage(limit_name, owner, used, remaining, denied, reset_at_ms, reset_at);
--
-- quota_migrations: one row per applied migration. version is the number in the file name,
--   name the rest of the file name, checksum the SHA-256 (hex) of the file's text as applied,
--   applied_at_ms when it was applied. Opening a database compares every checksum with the
--   migrations the program was built with and refuses a mismatch.
--
-- quota_limits: one row per limit. name is what callers pass (1-64 characters of
--   A-Z a-z 0-9 _ . : -); algorithm one of sliding_log, fixed_window, sliding_window,
--   token_bucket; maximum the units allowed per period (>= 1); period_ms the period
--   (1 ms .. 366 days); burst the token bucket's capacity (NULL for the other algorithms).
--   Products that the decisions compute stay below 2^62: a sliding_window needs
--   maximum * period_ms <= 2^62; a token_bucket needs maximum * period_ms <= 2^62 and
--   burst * period_ms <= 2^61.
--
-- How a request is decided. A consume or record is one statement,
--   INSERT INTO <state table> (limit_name, owner, cost, seen_ms) VALUES (:limit, :owner, ...)
--   ON CONFLICT (limit_name, owner) DO UPDATE SET (<state>, <answer>) = (SELECT <decision>)
--   RETURNING <answer>
-- on one row per limit and owner. The owner's row always exists by the time the conflict is
-- checked: for a new owner, the state table's "new owner" trigger creates it empty (or
-- raises "unknown limit"). So the decision is always the DO UPDATE's, computed from the row
-- as it was, the limit as it is, and the request (carried in excluded.cost and
-- excluded.seen_ms). A row holds, besides the algorithm's state:
--   denied        denied consumes since the row was created or reset;
--   seen_ms       the latest time an operation was evaluated at (the clock rule: a request
--                 that arrives with an earlier time is evaluated at seen_ms);
--   cost          the cost of the latest request;
--   maximum, period_ms  the limit's numbers when the row was last written;
--   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms
--                 the answer given to the latest request, which RETURNING hands back.
--                 They describe that answer, not the present: quota_usage shows the present.
-- A row whose limit cannot be found when it is written gets maximum NULL, which the
-- "unknown limit" check refuses: statements of one algorithm do not work on another's limits.
--
-- quota_windows (fixed_window, sliding_window): the owner's windowKey counter. window_key is
--   floor(t / period_ms) of the window being counted (windows are aligned to the Unix epoch),
--   used the units recorded in that window, previous_used those recorded in the window
--   before it. When a request falls in a later window the row moves to it: used becomes
--   previous_used (or 0 if a window was skipped). A row written under another period is
--   counted in the window that holds its seen_ms.
--
-- quota_log_owners and quota_log (sliding_log): quota_log holds one row per millisecond in
--   which an owner recorded usage: at_ms, cost (units recorded in it) and total, the owner's
--   running sum of cost up to and including that row, so that the usage of any suffix of the
--   log is one subtraction. quota_log_owners holds, per owner, total (the running sum so
--   far), newest_at_ms (the newest row's at_ms) and recorded (units the latest request
--   recorded; its trigger appends them to quota_log and prunes rows that no longer count, in
--   batches: migration 0005). Usage at t is total minus the total before the first row with
--   at_ms > t - period_ms. The running sum starts again from zero whenever nothing is live.
--
-- quota_buckets (token_bucket): the owner's bucket. level is its tokens times period_ms, an
--   integer, so that a refill of maximum tokens per period_ms adds exactly maximum units per
--   millisecond: fractional rates lose nothing. A new owner's bucket is full
--   (burst * period_ms); record may take it below zero (a debt, floored at -2^62), which
--   later requests wait out. The level was last computed at seen_ms; a limit redefined with
--   another period is re-scaled to whole tokens, and every level is clamped to the capacity.
--
-- quota_resets: a request queue for reset. Inserting (limit_name, owner) deletes the owner's
--   state for that limit and then the request row itself; the INSERT's RETURNING answers with
--   the fresh state. It is always empty between statements.

CREATE TABLE quota_migrations (
  version       INTEGER PRIMARY KEY,
  name          TEXT    NOT NULL,
  checksum      TEXT    NOT NULL,
  applied_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE quota_limits (
  name      TEXT    NOT NULL PRIMARY KEY
            CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
  algorithm TEXT    NOT NULL
            CHECK (algorithm IN ('sliding_log', 'fixed_window', 'sliding_window', 'token_bucket')),
  maximum   INTEGER NOT NULL CHECK (maximum BETWEEN 1 AND 1000000000000),
  period_ms INTEGER NOT NULL CHECK (period_ms BETWEEN 1 AND 31622400000),
  burst     INTEGER CHECK (CASE algorithm WHEN 'token_bucket'
                           THEN burst BETWEEN 1 AND 1000000000000 ELSE burst IS NULL END),
  shadow    INTEGER NOT NULL DEFAULT 0 CHECK (shadow IN (0, 1)),
  CHECK (algorithm <> 'sliding_window' OR maximum <= 4611686018427387904 / period_ms),
  CHECK (algorithm <> 'token_bucket'
         OR (maximum <= 4611686018427387904 / period_ms
             AND burst <= 2305843009213693952 / period_ms))
) STRICT, WITHOUT ROWID;

-- The state columns are declared without NOT NULL: the request row of VALUES leaves them NULL
-- and must pass every check before the upsert finds the owner's row, and a write for a limit
-- that does not exist must be reported by the "unknown limit" check, which comes first.
CREATE TABLE quota_windows (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  window_key          INTEGER,
  used                INTEGER CHECK (used >= 0),
  previous_used       INTEGER CHECK (previous_used >= 0),
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  UNIQUE (owner, limit_name)
) STRICT;

CREATE TABLE quota_log_owners (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  total               INTEGER CHECK (total >= 0),
  newest_at_ms        INTEGER,
  recorded            INTEGER CHECK (recorded >= 0),
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  refunded            INTEGER CHECK (refunded >= 0),
  UNIQUE (owner, limit_name)
) STRICT;

CREATE TABLE quota_log (
  limit_name TEXT    NOT NULL,
  owner      TEXT    NOT NULL,
  at_ms      INTEGER NOT NULL,
  cost       INTEGER NOT NULL CHECK (cost >= 1),
  total      INTEGER NOT NULL CHECK (total >= cost),
  PRIMARY KEY (owner, limit_name, at_ms)
) STRICT, WITHOUT ROWID;

CREATE TABLE quota_buckets (
  limit_name          TEXT    NOT NULL,
  owner               TEXT    NOT NULL,
  maximum             INTEGER CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           INTEGER CHECK (period_ms >= 1),
  burst               INTEGER CHECK (burst >= 1),
  level               INTEGER CHECK (level >= -4611686018427387904),
  denied              INTEGER CHECK (denied >= 0),
  seen_ms             INTEGER,
  cost                INTEGER,
  last_allowed        INTEGER,
  last_reason         TEXT,
  last_remaining      INTEGER,
  last_retry_after_ms INTEGER,
  last_reset_at_ms    INTEGER,
  shadow_denied       INTEGER DEFAULT 0 CHECK (shadow_denied >= 0),
  UNIQUE (owner, limit_name)
) STRICT;

CREATE TABLE quota_resets (
  limit_name TEXT    NOT NULL,
  owner      TEXT    NOT NULL,
  now_ms     INTEGER NOT NULL,
  remaining  INTEGER CONSTRAINT "unknown limit" CHECK (remaining IS NOT NULL)
) STRICT;

-- quota_new_owners: a request queue, like quota_resets. Inserting (state_table, limit_name,
--   owner) creates the owner's empty row in state_table, or raises "unknown limit" when no
--   limit of that name and table exists, and then deletes the request row itself. It is
--   always empty between statements.

CREATE TABLE quota_new_owners (
  state_table TEXT NOT NULL
    CHECK (state_table IN ('quota_windows', 'quota_log_owners', 'quota_buckets')),
  limit_name  TEXT NOT NULL,
  owner       TEXT NOT NULL
) STRICT;

-- A new owner: queue the creation of its empty row, so that the request's upsert finds it and
-- decides in DO UPDATE. Only the request's own row (cost set) does this; the empty row (cost
-- NULL) does not fire it again.
CREATE TRIGGER quota_windows_new_owner BEFORE INSERT ON quota_windows
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_windows
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_new_owners VALUES ('quota_windows', NEW.limit_name, NEW.owner);
END;

CREATE TRIGGER quota_log_owners_new_owner BEFORE INSERT ON quota_log_owners
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_log_owners
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_new_owners VALUES ('quota_log_owners', NEW.limit_name, NEW.owner);
END;

CREATE TRIGGER quota_buckets_new_owner BEFORE INSERT ON quota_buckets
WHEN NEW.cost IS NOT NULL AND NOT EXISTS (SELECT 1 FROM quota_buckets
                                          WHERE limit_name = NEW.limit_name
                                            AND owner = NEW.owner) BEGIN
  INSERT INTO quota_new_owners VALUES ('quota_buckets', NEW.limit_name, NEW.owner);
END;

-- The queued creation: the empty row, or "unknown limit" for a limit that does not exist or
-- is of an algorithm stored in another table.
CREATE TRIGGER quota_new_owners_windows AFTER INSERT ON quota_new_owners
WHEN NEW.state_table = 'quota_windows' BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm IN ('fixed_window', 'sliding_window'));
  INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, used, previous_used, denied)
  SELECT name, NEW.owner, maximum, period_ms, 0, 0, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_new_owners WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER quota_new_owners_log_owners AFTER INSERT ON quota_new_owners
WHEN NEW.state_table = 'quota_log_owners' BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm = 'sliding_log');
  INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, recorded, denied)
  SELECT name, NEW.owner, maximum, period_ms, 0, 0, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_new_owners WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER quota_new_owners_buckets AFTER INSERT ON quota_new_owners
WHEN NEW.state_table = 'quota_buckets' BEGIN
  SELECT RAISE(ABORT, 'unknown limit')
  WHERE NOT EXISTS (SELECT 1 FROM quota_limits WHERE name = NEW.limit_name
                      AND algorithm = 'token_bucket');
  INSERT INTO quota_buckets (limit_name, owner, maximum, period_ms, burst, level, denied)
  SELECT name, NEW.owner, maximum, period_ms, burst, burst * period_ms, 0
  FROM quota_limits WHERE name = NEW.limit_name;
  DELETE FROM quota_new_owners WHERE rowid = NEW.rowid;
END;

-- The log of a sliding_log owner: what the latest request recorded becomes an event at
-- newest_at_ms (merged into the event of the same millisecond); the events that expired by
-- then are deleted when newest_at_ms enters a new prune interval or the running total
-- restarts, so the log holds the events of at most period_ms plus one interval.
CREATE TRIGGER quota_log_owners_record AFTER UPDATE ON quota_log_owners
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

-- reset: forget the owner's state for the limit, then the request itself.
CREATE TRIGGER quota_resets_apply AFTER INSERT ON quota_resets BEGIN
  DELETE FROM quota_windows WHERE limit_name = NEW.limit_name AND owner = NEW.owner;
  DELETE FROM quota_log_owners WHERE limit_name = NEW.limit_name AND owner = NEW.owner;
  DELETE FROM quota_log WHERE limit_name = NEW.limit_name AND owner = NEW.owner;
  DELETE FROM quota_buckets WHERE limit_name = NEW.limit_name AND owner = NEW.owner;
  DELETE FROM quota_resets WHERE rowid = NEW.rowid;
END;

-- Changing a limit's algorithm discards its state (the numbers would mean something else);
-- changing only its numbers keeps it. Removing a limit removes its state.
CREATE TRIGGER quota_limits_algorithm_changed AFTER UPDATE OF algorithm ON quota_limits
WHEN OLD.algorithm IS NOT NEW.algorithm BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
END;

CREATE TRIGGER quota_limits_removed AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
END;

-- quota schema, migration 0003: policies. Per-owner overrides, shadow mode, refunds.
--
--   CREATE TABLE quota_overrides(limit_name, owner, policy, maximum, burst);
--   --   --   ALTER TABLE  quota_log_owners ADD COLUMN shadow_denied;  -- and refunded
--   --   CREATE VIEW  quota_owner_limits(name, owner, algorithm, period_ms, policy, maximum, burst);
--   CREATE VIEW  quota_usage(limit_name, owner, used, remaining, denied, reset_at_ms, reset_at,
--                            shadow_denied);
--
-- quota_overrides: one row per limit (or '*', every limit) and owner whose answers differ
--   from the limit's. policy is one of
--     maximum  the owner's own maximum (a plan tier), and for a token_bucket its own burst
--              (NULL: the override's maximum). burst is ignored for the other algorithms.
--     exempt   always allowed; nothing is recorded; remaining is the capacity.
--     deny     always denied with reason owner_denied, remaining 0, retry_after_ms -1.
--   A row for the limit itself beats a '*' row for the same owner. The statements of consume,
--   check, record and refund read the override of (limit, owner) and of ('*', owner) by
--   primary key in the same statement, so any SQLite client gets the same answers:
--     INSERT INTO quota_overrides (limit_name, owner, policy, maximum, burst)
--     VALUES ('send', 'u42', 'maximum', 20, NULL);
--   An override's maximum beyond what the limit's period permits (the products of 0001) is
--   read as the largest value permitted. Removing a limit removes its overrides.
--
-- quota_limits.shadow: 1 while the limit is in shadow mode. A consume is then never denied:
--   it answers as if enforcing but with allowed 1 (reason and retry_after_ms say what
--   enforcing would have answered), records its cost only when enforcing would have
--   allowed it, and counts a would-be denial in shadow_denied instead of denied.
--
-- shadow_denied (every state table): would-be denials counted in shadow mode since the row
--   was created or reset. Like the other state columns it is declared without NOT NULL, so
--   that a write for a limit that does not exist fails on the "unknown limit" check first.
--
-- quota_log_owners.refunded: the units the latest refund gave back, set only by the refund
--   statement; its trigger takes them out of quota_log, newest events first.

CREATE TABLE quota_overrides (
  limit_name TEXT    NOT NULL
             CHECK (limit_name = '*' OR (length(limit_name) BETWEEN 1 AND 64
                                         AND limit_name NOT GLOB '*[^A-Za-z0-9_.:-]*')),
  owner      TEXT    NOT NULL CHECK (length(CAST(owner AS BLOB)) BETWEEN 1 AND 1024),
  policy     TEXT    NOT NULL CHECK (policy IN ('maximum', 'exempt', 'deny')),
  maximum    INTEGER CHECK (CASE policy WHEN 'maximum' THEN maximum BETWEEN 1 AND 1000000000000
                            ELSE maximum IS NULL END),
  burst      INTEGER CHECK (burst IS NULL
                            OR (policy = 'maximum' AND burst BETWEEN 1 AND 1000000000000)),
  PRIMARY KEY (limit_name, owner)
) STRICT, WITHOUT ROWID;


-- A refund of a sliding_log owner: the owner's new running total is NEW.total, lower by
-- NEW.refunded; the events recorded after it are given back, newest first. Events wholly
-- above the new total go; the one it falls inside keeps what is below it. Only the refund
-- statement sets refunded, so no other statement runs this trigger.
-- Example: events (at 100, cost 2, total 2), (at 200, cost 3, total 5); a refund of 4 sets
-- total 1: the event at 200 goes, the event at 100 becomes cost 1, total 1.
CREATE TRIGGER quota_log_owners_refund AFTER UPDATE OF refunded ON quota_log_owners
WHEN NEW.refunded > 0 BEGIN
  DELETE FROM quota_log
  WHERE limit_name = NEW.limit_name AND owner = NEW.owner AND total - cost >= NEW.total;
  UPDATE quota_log SET cost = cost - (total - NEW.total), total = NEW.total
  WHERE limit_name = NEW.limit_name AND owner = NEW.owner AND total > NEW.total;
END;

CREATE TRIGGER quota_limits_removed_overrides AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_overrides WHERE limit_name = OLD.name;
END;

-- quota_owner_limits: the limit as each owner with state sees it, its override applied.
-- One row per state row (limit_name, owner) of a limit that exists; policy is NULL, or
-- the override's: maximum, exempt or deny. quota_usage reads its numbers from here.
CREATE VIEW quota_owner_limits AS
SELECT name, owner, algorithm, period_ms, policy,
       CASE WHEN policy IS NOT 'maximum' THEN maximum
            WHEN algorithm IN ('sliding_window', 'token_bucket')
            THEN min(override_maximum, 4611686018427387904 / period_ms)
            ELSE override_maximum END AS maximum,
       CASE WHEN algorithm <> 'token_bucket' THEN NULL
            WHEN policy IS NOT 'maximum' THEN burst
            ELSE min(override_burst, 2305843009213693952 / period_ms) END AS burst
FROM (
  SELECT l.name, s.owner, l.algorithm, l.maximum, l.period_ms, l.burst,
         coalesce(o.policy, a.policy) AS policy,
         CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END AS override_maximum,
         CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum)
              ELSE coalesce(o.burst, o.maximum) END AS override_burst
  FROM (SELECT limit_name, owner FROM quota_windows
        UNION ALL SELECT limit_name, owner FROM quota_log_owners
        UNION ALL SELECT limit_name, owner FROM quota_buckets) AS s
  JOIN quota_limits AS l ON l.name = s.limit_name
  LEFT JOIN quota_overrides AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
  LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = s.owner
);

-- quota_usage, as in 0001, now with each owner's override (its capacity, exempt: remaining
-- is the capacity, deny: remaining 0) and the shadow_denied count. Rows with usage, denials
-- or shadow denials are shown.
CREATE VIEW quota_usage AS
SELECT limit_name, owner, used,
       CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0
            ELSE max(capacity - used, 0) END AS remaining,
       denied, reset_at_ms,
       strftime('%Y-%m-%dT%H:%M:%fZ', reset_at_ms / 1000.0, 'unixepoch') AS reset_at,
       shadow_denied
FROM (
  -- sliding_log: the running total minus the total before the first row that still counts.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied, used,
         CASE WHEN used > 0 THEN newest_at_ms + period_ms ELSE t END AS reset_at_ms
  FROM (
    SELECT o.limit_name, o.owner, l.policy, l.maximum AS capacity, l.period_ms, o.denied,
           o.shadow_denied, o.newest_at_ms, o.t,
           coalesce(o.total - (SELECT e.total - e.cost FROM quota_log AS e
                               WHERE e.limit_name = o.limit_name AND e.owner = o.owner
                                 AND e.at_ms > o.t - l.period_ms
                               ORDER BY e.at_ms LIMIT 1), 0) AS used
    FROM (SELECT *, max(seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                      AS INTEGER)) AS t
          FROM quota_log_owners) AS o
    JOIN quota_owner_limits AS l ON l.name = o.limit_name AND l.owner = o.owner
     AND l.algorithm = 'sliding_log'
  )
  UNION ALL
  -- fixed_window: the current window's count. sliding_window: that plus the previous
  -- window's count weighted by the part of it still inside the sliding period, rounded up.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied,
         CASE algorithm WHEN 'fixed_window' THEN cur
              ELSE cur + (prev / period_ms) * rest
                   + ((prev % period_ms) * (rest / 262144) / period_ms) * 262144
                   + (((prev % period_ms) * (rest / 262144)) % period_ms * 262144
                      + (prev % period_ms) * (rest % 262144) + period_ms - 1) / period_ms
              END AS used,
         CASE WHEN cur > 0 THEN (window_key + 1 + (algorithm = 'sliding_window')) * period_ms
              WHEN prev > 0 AND algorithm = 'sliding_window' THEN (window_key + 1) * period_ms
              ELSE t END AS reset_at_ms
  FROM (
    SELECT *, CASE WHEN row_key = window_key THEN row_used ELSE 0 END AS cur,
           CASE row_key WHEN window_key THEN row_previous WHEN window_key - 1 THEN row_used
                ELSE 0 END AS prev,
           (window_key + 1) * period_ms - t AS rest
    FROM (
      SELECT *, t / period_ms AS window_key
      FROM (
        SELECT w.limit_name, w.owner, l.policy, l.algorithm, l.maximum AS capacity, l.period_ms,
               w.denied, w.shadow_denied, w.used AS row_used, w.previous_used AS row_previous,
               max(w.seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                   AS INTEGER)) AS t,
               CASE WHEN w.period_ms = l.period_ms THEN w.window_key
                    ELSE w.seen_ms / l.period_ms END AS row_key
        FROM quota_windows AS w
        JOIN quota_owner_limits AS l ON l.name = w.limit_name AND l.owner = w.owner
         AND l.algorithm IN ('fixed_window', 'sliding_window')
      )
    )
  )
  UNION ALL
  -- token_bucket: capacity minus the tokens (rounded down) after refilling up to now.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied,
         capacity - CASE WHEN level >= 0 THEN level / period_ms
                         ELSE -((period_ms - 1 - level) / period_ms) END AS used,
         CASE WHEN level >= capacity * period_ms THEN t
              ELSE t + (capacity * period_ms - level - 1) / maximum + 1 END AS reset_at_ms
  FROM (
    SELECT *, CASE WHEN start >= capacity * period_ms THEN capacity * period_ms
                   WHEN t - seen_ms >= (capacity * period_ms - start - 1) / maximum + 1
                   THEN capacity * period_ms
                   ELSE start + maximum * (t - seen_ms) END AS level
    FROM (
      SELECT b.limit_name, b.owner, l.policy, l.maximum, l.period_ms, l.burst AS capacity,
             b.denied, b.shadow_denied, b.seen_ms,
             max(b.seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                 AS INTEGER)) AS t,
             CASE WHEN b.seen_ms IS NULL THEN l.burst * l.period_ms
                  WHEN b.period_ms = l.period_ms THEN min(b.level, l.burst * l.period_ms)
                  WHEN b.level / b.period_ms >= l.burst THEN l.burst * l.period_ms
                  ELSE max(CASE WHEN b.level >= 0 THEN b.level / b.period_ms
                                ELSE -((b.period_ms - 1 - b.level) / b.period_ms) END,
                           -(4611686018427387904 / l.period_ms)) * l.period_ms END AS start
      FROM quota_buckets AS b
      JOIN quota_owner_limits AS l ON l.name = b.limit_name AND l.owner = b.owner
       AND l.algorithm = 'token_bucket'
    )
  )
)
WHERE used > 0 OR denied > 0 OR shadow_denied > 0;
