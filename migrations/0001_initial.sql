-- quota schema, migration 0001: limits, the sliding log, the windowKey counters, resets.
--
-- Every object is named quota_* so that it can live in an application's own database file.
-- Times are milliseconds since the Unix epoch (64-bit integers) everywhere.
--
--   CREATE TABLE quota_migrations(version, name, checksum, applied_at_ms);
--   CREATE TABLE quota_limits(id, name, algorithm, maximum, period_ms, burst);
--   CREATE TABLE quota_log(limit_id, owner, at_ms, cost, total, denied, seen_ms, last_*);
--   CREATE TABLE quota_windows(limit_id, owner, window_key, used, previous_used, denied,
--                              seen_ms, last_*);
--   CREATE TABLE quota_resets(limit_id, owner, now_ms, remaining);
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
--   id is the stable key the state tables use; redefining a limit keeps its id.
--
-- Per-owner state is kept in one table per family of algorithms, so that a consume writes
-- exactly one row in the common case. Every state row ends with the answer given to the
-- latest operation that wrote it (last_allowed, last_reason, last_remaining,
-- last_retry_after_ms, last_reset_at_ms): the single INSERT ... ON CONFLICT DO UPDATE
-- statement of a consume or record returns them with RETURNING. They describe that answer,
-- not the present: quota_usage shows the present.
--
-- quota_log (sliding_log): one row per millisecond in which an owner recorded usage.
--   at_ms is that millisecond, cost the units recorded in it, total the owner's running sum
--   of cost up to and including this row (so the usage of any suffix of the log is one
--   subtraction). The owner's newest row also carries denied (denied consumes since the state
--   was created or reset) and seen_ms (the latest time an operation was evaluated at: the
--   clock rule). Rows with at_ms <= t - period_ms no longer count; they are deleted when the
--   owner next records, except the newest row, which always stays to carry the counters.
--   A row with cost 0 exists only as an owner's first row, when its first request was denied.
--
-- quota_windows (fixed_window, sliding_window): one row per owner and window.
--   window_key = floor(t / period_ms), windows aligned to the Unix epoch; used is the units
--   recorded in that window; previous_used the units recorded in window_key - 1 (copied when
--   the window opens, so one row answers both algorithms); denied and seen_ms as above.
--   When a new window's row is inserted, the owner's older rows are deleted.
--
-- quota_resets: a request queue for reset. Inserting (limit_id, owner) deletes the owner's
--   state for that limit and then the request row itself; the INSERT's RETURNING answers with
--   the fresh state. It is always empty between statements.

CREATE TABLE quota_migrations (
  version       INTEGER PRIMARY KEY,
  name          TEXT    NOT NULL,
  checksum      TEXT    NOT NULL,
  applied_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE quota_limits (
  id        INTEGER PRIMARY KEY,
  name      TEXT    NOT NULL UNIQUE
            CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
  algorithm TEXT    NOT NULL
            CHECK (algorithm IN ('sliding_log', 'fixed_window', 'sliding_window', 'token_bucket')),
  maximum   INTEGER NOT NULL CHECK (maximum BETWEEN 1 AND 1000000000000),
  period_ms INTEGER NOT NULL CHECK (period_ms BETWEEN 1 AND 31622400000),
  burst     INTEGER CHECK (CASE algorithm WHEN 'token_bucket'
                           THEN burst BETWEEN 1 AND 1000000000000 ELSE burst IS NULL END)
) STRICT;

CREATE TABLE quota_log (
  limit_id            INTEGER NOT NULL,
  owner               TEXT    NOT NULL,
  at_ms               INTEGER NOT NULL,
  cost                INTEGER NOT NULL CHECK (cost >= 0),
  total               INTEGER NOT NULL CHECK (total >= cost),
  denied              INTEGER NOT NULL CHECK (denied >= 0),
  seen_ms             INTEGER NOT NULL CHECK (seen_ms >= at_ms),
  last_allowed        INTEGER NOT NULL,
  last_reason         TEXT    NOT NULL,
  last_remaining      INTEGER NOT NULL,
  last_retry_after_ms INTEGER NOT NULL,
  last_reset_at_ms    INTEGER NOT NULL,
  PRIMARY KEY (limit_id, owner, at_ms)
) STRICT, WITHOUT ROWID;

CREATE TABLE quota_windows (
  limit_id            INTEGER NOT NULL,
  owner               TEXT    NOT NULL,
  window_key          INTEGER NOT NULL,
  used                INTEGER NOT NULL CHECK (used >= 0),
  previous_used       INTEGER NOT NULL CHECK (previous_used >= 0),
  denied              INTEGER NOT NULL CHECK (denied >= 0),
  seen_ms             INTEGER NOT NULL,
  last_allowed        INTEGER NOT NULL,
  last_reason         TEXT    NOT NULL,
  last_remaining      INTEGER NOT NULL,
  last_retry_after_ms INTEGER NOT NULL,
  last_reset_at_ms    INTEGER NOT NULL,
  PRIMARY KEY (limit_id, owner, window_key)
) STRICT, WITHOUT ROWID;

CREATE TABLE quota_resets (
  limit_id  INTEGER NOT NULL,
  owner     TEXT    NOT NULL,
  now_ms    INTEGER NOT NULL,
  remaining INTEGER NOT NULL
) STRICT;

-- A consume, record or reset names its limit by name; the statement turns the name into
-- limit_id and leaves it NULL when no such limit exists. These guards turn that NULL into the
-- error "unknown limit" before any constraint is checked, so nothing is written.
CREATE TRIGGER quota_log_unknown_limit BEFORE INSERT ON quota_log
WHEN NEW.limit_id IS NULL BEGIN
  SELECT RAISE(ABORT, 'unknown limit');
END;

CREATE TRIGGER quota_windows_unknown_limit BEFORE INSERT ON quota_windows
WHEN NEW.limit_id IS NULL BEGIN
  SELECT RAISE(ABORT, 'unknown limit');
END;

CREATE TRIGGER quota_resets_unknown_limit BEFORE INSERT ON quota_resets
WHEN NEW.limit_id IS NULL BEGIN
  SELECT RAISE(ABORT, 'unknown limit');
END;

-- Pruning on write keeps a sliding log's cost independent of its maximum: a new row deletes
-- the rows that expired at its time, all but the newest of which carry nothing else.
-- Example: period 1000, rows at 100, 900, 1500; inserting 2050 deletes 100 and 900
-- (<= 1050) and keeps 1500 and 2050.
CREATE TRIGGER quota_log_prune AFTER INSERT ON quota_log BEGIN
  DELETE FROM quota_log
  WHERE limit_id = NEW.limit_id AND owner = NEW.owner
    AND at_ms <= NEW.at_ms - (SELECT period_ms FROM quota_limits WHERE id = NEW.limit_id);
END;

-- A new window's row carries everything that still matters (its previous_used, denied,
-- seen_ms), so the owner's older windows can go.
CREATE TRIGGER quota_windows_prune AFTER INSERT ON quota_windows BEGIN
  DELETE FROM quota_windows
  WHERE limit_id = NEW.limit_id AND owner = NEW.owner AND window_key < NEW.window_key;
END;

-- reset: forget the owner's state for the limit, then the request itself.
CREATE TRIGGER quota_resets_apply AFTER INSERT ON quota_resets BEGIN
  DELETE FROM quota_log WHERE limit_id = NEW.limit_id AND owner = NEW.owner;
  DELETE FROM quota_windows WHERE limit_id = NEW.limit_id AND owner = NEW.owner;
  DELETE FROM quota_resets WHERE rowid = NEW.rowid;
END;

-- Changing a limit's algorithm discards its state (the numbers would mean something else);
-- changing only its numbers keeps it. Removing a limit removes its state.
CREATE TRIGGER quota_limits_algorithm_changed AFTER UPDATE OF algorithm ON quota_limits
WHEN OLD.algorithm IS NOT NEW.algorithm BEGIN
  DELETE FROM quota_log WHERE limit_id = OLD.id;
  DELETE FROM quota_windows WHERE limit_id = OLD.id;
END;

CREATE TRIGGER quota_limits_removed AFTER DELETE ON quota_limits BEGIN
  DELETE FROM quota_log WHERE limit_id = OLD.id;
  DELETE FROM quota_windows WHERE limit_id = OLD.id;
END;

-- quota_usage: who is near their limit, as of the database's current time (or of the latest
-- time an owner's state has seen, if that is later). One row per limit and owner that has
-- usage or denials. used follows the limit's algorithm; remaining = maximum - used (>= 0);
-- reset_at_ms is when usage is back to zero if nothing else happens, reset_at the same as
-- ISO-8601 UTC text.
-- Example: SELECT * FROM quota_usage ORDER BY remaining LIMIT 10;
--   send_message|u42|10|0|3|1700000060000|2023-11-14T22:14:20.000Z
CREATE VIEW quota_usage AS
SELECT limit_name, owner, used, max(maximum - used, 0) AS remaining, denied, reset_at_ms,
       strftime('%Y-%m-%dT%H:%M:%fZ', reset_at_ms / 1000.0, 'unixepoch') AS reset_at
FROM (
  -- sliding_log: the newest row's running total minus the total before the first live row.
  SELECT limit_name, owner, maximum, denied, used,
         CASE WHEN used > 0 THEN newest_at + period_ms ELSE t END AS reset_at_ms
  FROM (
    SELECT l.name AS limit_name, n.owner AS owner, l.maximum AS maximum,
           l.period_ms AS period_ms, n.denied AS denied, n.at_ms AS newest_at, n.t AS t,
           coalesce(n.total - (SELECT f.total - f.cost FROM quota_log AS f
                               WHERE f.limit_id = n.limit_id AND f.owner = n.owner
                                 AND f.at_ms > n.t - l.period_ms
                               ORDER BY f.at_ms LIMIT 1), 0) AS used
    FROM (SELECT *, max(seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                      AS INTEGER)) AS t
          FROM quota_log AS m
          WHERE at_ms = (SELECT max(at_ms) FROM quota_log
                         WHERE limit_id = m.limit_id AND owner = m.owner)) AS n
    JOIN quota_limits AS l ON l.id = n.limit_id AND l.algorithm = 'sliding_log'
  )
  UNION ALL
  -- fixed_window: the newest window's count if it is the current window, else nothing.
  SELECT limit_name, owner, maximum, denied, used,
         CASE WHEN used > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms
  FROM (
    SELECT l.name AS limit_name, w.owner AS owner, l.maximum AS maximum,
           l.period_ms AS period_ms, w.denied AS denied, w.window_key AS window_key, w.t AS t,
           CASE WHEN w.window_key = w.t / l.period_ms THEN w.used ELSE 0 END AS used
    FROM (SELECT *, max(seen_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0)
                                      AS INTEGER)) AS t
          FROM quota_windows AS m
          WHERE window_key = (SELECT max(window_key) FROM quota_windows
                              WHERE limit_id = m.limit_id AND owner = m.owner)) AS w
    JOIN quota_limits AS l ON l.id = w.limit_id AND l.algorithm = 'fixed_window'
  )
)
WHERE used > 0 OR denied > 0;
