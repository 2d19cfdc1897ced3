-- quota schema for PostgreSQL, migration 0006: the whole schema of version 6 in one step.
--
-- A PostgreSQL database at version 6 has the tables, columns, checks, views and trigger
-- behaviour that a SQLite database reaches through migrations/0001 to 0006, under the same
-- names; later migrations are added to both folders with the same numbers. Every object is
-- named quota_* so that it can live in an application's own database (and schema). Times are
-- milliseconds since the Unix epoch (bigint) everywhere.
--
--   CREATE TABLE quota_migrations(version, name, checksum, applied_at_ms);
--   CREATE TABLE quota_limits(name, algorithm, maximum, period_ms, burst, shadow);
--   CREATE TABLE quota_overrides(limit_name, owner, policy, maximum, burst);
--   CREATE TABLE quota_windows(limit_name, owner, window_key, used, previous_used, ...);
--   CREATE TABLE quota_log_owners(limit_name, owner, total, newest_at_ms, recorded, ...);
--   CREATE TABLE quota_log(limit_name, owner, at_ms, cost, total);
--   CREATE TABLE quota_buckets(limit_name, owner, level, ...);
--   CREATE TABLE quota_resets(limit_name, owner, now_ms, remaining);
--   CREATE VIEW  quota_owner_limits(name, owner, algorithm, period_ms, policy, maximum, burst);
--   CREATE VIEW  quota_usage(limit_name, owner, used, remaining, denied, reset_at_ms, reset_at,
--                            shadow_denied);
--
-- Types. Every integer is a bigint (quota_migrations.version an integer); every text is text
-- with the "C" collation, so that names and owners compare and sort by their bytes, as
-- SQLite's BINARY collation does, whatever the database's locale. Two columns are boolean:
-- quota_limits.shadow and the state tables' last_allowed. Text cannot hold a NUL byte and must
-- be valid UTF-8 here; the library refuses such owners before they reach any database.
--
-- quota_migrations: one row per applied migration. version is the number in the file name,
--   name the rest of the file name, checksum the SHA-256 (hex) of the file's text as applied,
--   applied_at_ms when it was applied. Opening a database compares every checksum with the
--   migrations the program was built with and refuses a mismatch.
--
-- quota_limits: one row per limit. name is what callers pass (1-64 characters of
--   A-Z a-z 0-9 _ . : -); algorithm one of sliding_log, fixed_window, sliding_window,
--   token_bucket; maximum the units allowed per period (1 .. 10^12); period_ms the period
--   (1 ms .. 366 days); burst the token bucket's capacity (NULL for the other algorithms);
--   shadow true while the limit is in shadow mode: a consume is then never denied, answers
--   as if enforcing but allowed (reason and retry_after_ms say what enforcing would have
--   answered), records its cost only when enforcing would have allowed it, and counts a
--   would-be denial in shadow_denied instead of denied.
--   Products that the decisions compute stay below 2^62: a sliding_window needs
--   maximum * period_ms <= 2^62 and a period of at most 30 days (so that period_ms^2 fits);
--   a token_bucket needs maximum * period_ms <= 2^62 and burst * period_ms <= 2^61.
--   (PostgreSQL raises "bigint out of range" where SQLite would turn an overflowing product
--   into a floating-point number; these bounds keep both from happening.)
--
-- quota_overrides: one row per limit (or '*', every limit) and owner whose answers differ
--   from the limit's. policy is one of
--     maximum  the owner's own maximum (a plan tier), and for a token_bucket its own burst
--              (NULL: the override's maximum). burst is ignored for the other algorithms.
--     exempt   always allowed; nothing is recorded; remaining is the capacity.
--     deny     always denied with reason owner_denied, remaining 0, retry_after_ms -1.
--   A row for the limit itself beats a '*' row for the same owner. owner is 1-1024 bytes.
--   An override's maximum beyond what the limit's period permits is read as the largest
--   value permitted. Removing a limit removes its overrides.
--
-- How a request is decided. A consume, record or refund is one statement on the state table
-- of the limit's algorithm, one row per limit and owner:
--   INSERT INTO <state table> (limit_name, owner, <state>, <answer>)
--   SELECT :limit, :owner, <decision from the empty state>
--   ON CONFLICT (limit_name, owner) DO UPDATE SET (<state>, <answer>) =
--     (SELECT <decision from the owner's row>)
--   RETURNING <answer>
-- For a new owner the proposed row itself is written: its values are the decision taken from
-- the empty state (used, previous_used, total, recorded and denied 0; a bucket full, at
-- burst * period_ms). For an owner with a row, the DO UPDATE decides from the row as it is
-- (locked), the limit as it is, and the request (excluded.cost, excluded.seen_ms). Two
-- sessions that bring the same new owner at once are serialized by the unique key: the second
-- waits for the first to commit and then takes the DO UPDATE path.
-- (SQLite creates a new owner's empty row in a BEFORE INSERT trigger, through the request
-- queue quota_new_owners, so that the request always meets a conflict. PostgreSQL cannot do
-- that: a row inserted by a trigger during the statement is invisible to the statement's own
-- ON CONFLICT DO UPDATE, which fails with "ON CONFLICT DO UPDATE command cannot affect row a
-- second time". So there is no new-owner trigger and no quota_new_owners table here.)
--
-- Every row proposed for insertion passes the checks before the unique key is looked at,
-- also when it then takes the DO UPDATE path. So the state columns are declared without NOT
-- NULL, and a limit that cannot be found (or is of an algorithm stored in another table)
-- gives the row maximum NULL, which the check named "unknown limit" refuses: its error
-- message (new row for relation ... violates check constraint "unknown limit") contains
-- "unknown limit", as SQLite's does. PostgreSQL tests a row's checks in the alphabetical
-- order of their names, so the state tables' other checks are named "valid <column>", after
-- "unknown limit": a write for a limit that does not exist is reported as such first, as in
-- SQLite, where that check is declared first. A row holds, besides the algorithm's state:
--   denied        denied consumes since the row was created or reset;
--   shadow_denied would-be denials counted in shadow mode since then;
--   seen_ms       the latest time an operation was evaluated at (the clock rule: a request
--                 that arrives with an earlier time is evaluated at seen_ms);
--   cost          the cost of the latest request;
--   maximum, period_ms  the limit's numbers (the override's maximum, if any) when the row was
--                 last written;
--   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms
--                 the answer given to the latest request, which RETURNING hands back.
--                 They describe that answer, not the present: quota_usage shows the present.
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
--   far), newest_at_ms (the newest row's at_ms), recorded (units the latest request recorded;
--   its trigger appends them to quota_log and prunes rows that no longer count) and refunded
--   (the units the latest refund gave back, set only by the refund statement; its trigger
--   takes them out of quota_log, newest events first). Usage at t is total minus the total
--   before the first row with at_ms > t - period_ms. The running sum starts again from zero
--   whenever nothing is live.
--
-- quota_buckets (token_bucket): the owner's bucket. level is its tokens times period_ms, an
--   integer, so that a refill of maximum tokens per period_ms adds exactly maximum units per
--   millisecond: fractional rates lose nothing. A new owner's bucket is full
--   (burst * period_ms); record may take it below zero (a debt, floored at -2^62), which
--   later requests wait out. The level was last computed at seen_ms; a limit redefined with
--   another period is re-scaled to whole tokens, and every level is clamped to the capacity.
--
-- quota_resets: a request queue for reset. Inserting (limit_name, owner, now_ms, remaining)
--   deletes the owner's state for that limit and then the request row itself; the INSERT's
--   RETURNING answers with the row as inserted (RETURNING is computed before the AFTER
--   trigger runs). remaining NULL (the limit was not found) is refused by the check named
--   "unknown limit". It is always empty between statements.
--
-- Keys. The state tables are unique on (owner, limit_name), owner first; a statement names
-- its conflict target as (limit_name, owner), which PostgreSQL matches to that index whatever
-- the order. quota_log's primary key is (owner, limit_name, at_ms). No column that every
-- request rewrites is indexed, so those updates stay HOT (heap-only).

CREATE TABLE quota_migrations (
  version       integer PRIMARY KEY,
  name          text    COLLATE "C" NOT NULL,
  checksum      text    COLLATE "C" NOT NULL,
  applied_at_ms bigint  NOT NULL
);

CREATE TABLE quota_limits (
  name      text    COLLATE "C" NOT NULL PRIMARY KEY
            CHECK (name ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  algorithm text    COLLATE "C" NOT NULL
            CHECK (algorithm IN ('sliding_log', 'fixed_window', 'sliding_window', 'token_bucket')),
  maximum   bigint  NOT NULL CHECK (maximum BETWEEN 1 AND 1000000000000),
  period_ms bigint  NOT NULL CHECK (period_ms BETWEEN 1 AND 31622400000),
  burst     bigint  CONSTRAINT quota_limits_burst_check
                    CHECK (CASE algorithm WHEN 'token_bucket'
                           THEN burst BETWEEN 1 AND 1000000000000 ELSE burst IS NULL END),
  shadow    boolean NOT NULL DEFAULT false,
  CONSTRAINT quota_limits_sliding_window_check CHECK (algorithm <> 'sliding_window'
         OR maximum <= 4611686018427387904 / period_ms),
  CONSTRAINT quota_limits_token_bucket_check CHECK (algorithm <> 'token_bucket'
         OR (maximum <= 4611686018427387904 / period_ms
             AND burst <= 2305843009213693952 / period_ms))
);

CREATE TABLE quota_overrides (
  limit_name text   COLLATE "C" NOT NULL
             CHECK (limit_name = '*' OR limit_name ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  owner      text   COLLATE "C" NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 1024),
  policy     text   COLLATE "C" NOT NULL CHECK (policy IN ('maximum', 'exempt', 'deny')),
  maximum    bigint CONSTRAINT quota_overrides_maximum_check
                    CHECK (CASE policy WHEN 'maximum' THEN maximum BETWEEN 1 AND 1000000000000
                           ELSE maximum IS NULL END),
  burst      bigint CONSTRAINT quota_overrides_burst_check
                    CHECK (burst IS NULL
                           OR (policy = 'maximum' AND burst BETWEEN 1 AND 1000000000000)),
  PRIMARY KEY (limit_name, owner)
);

CREATE TABLE quota_windows (
  limit_name          text    COLLATE "C" NOT NULL,
  owner               text    COLLATE "C" NOT NULL,
  maximum             bigint  CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           bigint  CONSTRAINT "valid period_ms" CHECK (period_ms >= 1),
  window_key          bigint,
  used                bigint  CONSTRAINT "valid used" CHECK (used >= 0),
  previous_used       bigint  CONSTRAINT "valid previous_used" CHECK (previous_used >= 0),
  denied              bigint  CONSTRAINT "valid denied" CHECK (denied >= 0),
  seen_ms             bigint,
  cost                bigint,
  last_allowed        boolean,
  last_reason         text    COLLATE "C",
  last_remaining      bigint,
  last_retry_after_ms bigint,
  last_reset_at_ms    bigint,
  shadow_denied       bigint  DEFAULT 0
                      CONSTRAINT "valid shadow_denied" CHECK (shadow_denied >= 0),
  UNIQUE (owner, limit_name)
);

CREATE TABLE quota_log_owners (
  limit_name          text    COLLATE "C" NOT NULL,
  owner               text    COLLATE "C" NOT NULL,
  maximum             bigint  CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           bigint  CONSTRAINT "valid period_ms" CHECK (period_ms >= 1),
  total               bigint  CONSTRAINT "valid total" CHECK (total >= 0),
  newest_at_ms        bigint,
  recorded            bigint  CONSTRAINT "valid recorded" CHECK (recorded >= 0),
  denied              bigint  CONSTRAINT "valid denied" CHECK (denied >= 0),
  seen_ms             bigint,
  cost                bigint,
  last_allowed        boolean,
  last_reason         text    COLLATE "C",
  last_remaining      bigint,
  last_retry_after_ms bigint,
  last_reset_at_ms    bigint,
  shadow_denied       bigint  DEFAULT 0
                      CONSTRAINT "valid shadow_denied" CHECK (shadow_denied >= 0),
  refunded            bigint  CONSTRAINT "valid refunded" CHECK (refunded >= 0),
  UNIQUE (owner, limit_name)
);

CREATE TABLE quota_log (
  limit_name text   COLLATE "C" NOT NULL,
  owner      text   COLLATE "C" NOT NULL,
  at_ms      bigint NOT NULL,
  cost       bigint NOT NULL CONSTRAINT "valid cost" CHECK (cost >= 1),
  total      bigint NOT NULL CONSTRAINT "valid total" CHECK (total >= cost),
  PRIMARY KEY (owner, limit_name, at_ms)
);

CREATE TABLE quota_buckets (
  limit_name          text    COLLATE "C" NOT NULL,
  owner               text    COLLATE "C" NOT NULL,
  maximum             bigint  CONSTRAINT "unknown limit" CHECK (maximum IS NOT NULL),
  period_ms           bigint  CONSTRAINT "valid period_ms" CHECK (period_ms >= 1),
  burst               bigint  CONSTRAINT "valid burst" CHECK (burst >= 1),
  level               bigint  CONSTRAINT "valid level" CHECK (level >= -4611686018427387904),
  denied              bigint  CONSTRAINT "valid denied" CHECK (denied >= 0),
  seen_ms             bigint,
  cost                bigint,
  last_allowed        boolean,
  last_reason         text    COLLATE "C",
  last_remaining      bigint,
  last_retry_after_ms bigint,
  last_reset_at_ms    bigint,
  shadow_denied       bigint  DEFAULT 0
                      CONSTRAINT "valid shadow_denied" CHECK (shadow_denied >= 0),
  UNIQUE (owner, limit_name)
);

CREATE TABLE quota_resets (
  limit_name text   COLLATE "C" NOT NULL,
  owner      text   COLLATE "C" NOT NULL,
  now_ms     bigint NOT NULL,
  remaining  bigint CONSTRAINT "unknown limit" CHECK (remaining IS NOT NULL)
);

-- quota_refuse: fails the statement with `message`. The statements call it for a request
-- whose cost or time is out of range (src/sql/dialect.h), so that a SQL client gets the same
-- refusal as the library's callers, and nothing is written.
CREATE FUNCTION quota_refuse(message text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '%', message USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- The sliding log's reads of its events, for the statements' decision (src/sql/dialect.h).
-- A subquery of an INSERT's ON CONFLICT DO UPDATE reads other tables at the statement's
-- snapshot, taken before the statement waited for the owner's row lock: it would not see the
-- events that the transaction holding the lock committed meanwhile, and would admit too much.
-- A VOLATILE function takes a fresh snapshot for each query it runs, and the DO UPDATE calls
-- it once the row is locked, so these see every event of the owner that is committed. They
-- are the same queries as SQLite's subqueries in the statements. PL/pgSQL rather than SQL
-- functions: PL/pgSQL keeps each query's plan for the session, while a VOLATILE SQL function
-- is planned again at every call (about 30 % of a sliding-log consume on the server,
-- docs/performance-notes.md).
--   quota_log_live_base: the running total before the first event after `after_ms` (NULL
--     when there is none): the owner's usage is its total minus this.
--   quota_log_covering_event: the time of the first event after `after_ms` whose running
--     total reaches `total`: a denied request waits until it expires.
--   quota_log_newest_kept: the time of the first event whose running total reaches `total`:
--     the newest event a refund down to `total` keeps.
CREATE FUNCTION quota_log_live_base(limit_name text, owner text, after_ms bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN (SELECT e.total - e.cost FROM quota_log AS e
          WHERE e.limit_name = $1 AND e.owner = $2 AND e.at_ms > $3
          ORDER BY e.at_ms LIMIT 1);
END
$$;

CREATE FUNCTION quota_log_covering_event(limit_name text, owner text, after_ms bigint,
                                         total bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN (SELECT e.at_ms FROM quota_log AS e
          WHERE e.limit_name = $1 AND e.owner = $2 AND e.at_ms > $3 AND e.total >= $4
          ORDER BY e.at_ms LIMIT 1);
END
$$;

CREATE FUNCTION quota_log_newest_kept(limit_name text, owner text, total bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN (SELECT e.at_ms FROM quota_log AS e
          WHERE e.limit_name = $1 AND e.owner = $2 AND e.total >= $3
          ORDER BY e.at_ms LIMIT 1);
END
$$;

-- The log of a sliding_log owner: what the latest request recorded becomes an event at
-- newest_at_ms (merged into the event of the same millisecond); the events that expired by
-- then are deleted when newest_at_ms enters a new prune interval of
--   interval = max(min(period_ms / 4, period_ms * 32 / maximum), 1) ms
-- or the running total restarts (nothing was live: total = recorded, which a new owner's
-- first record also is), so the log holds the events of at most period_ms plus one interval
-- and the events left always form one running sum. It runs for the row a new owner's
-- request inserts as well as for an update.
-- Example: period 1000, maximum 10, so intervals of 250 ms. Events at 100, 900 and 1600 (the
-- record at 1600 in interval 6). A record at 2050 (interval 8) deletes 100 and 900 (<= 1050);
-- one at 2550 (interval 10) deletes nothing (nothing <= 1550); one at 2700 (interval 10 again)
-- deletes nothing, though 1600 has expired; one at 2750 (interval 11) deletes 1600.
-- It writes quota_log only, so it never fires itself again.
CREATE FUNCTION quota_log_owners_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  prune_interval bigint := greatest(least(NEW.period_ms / 4, NEW.period_ms * 32 / NEW.maximum),
                                    1);
BEGIN
  INSERT INTO quota_log AS e (limit_name, owner, at_ms, cost, total)
  VALUES (NEW.limit_name, NEW.owner, NEW.newest_at_ms, NEW.recorded, NEW.total)
  ON CONFLICT (limit_name, owner, at_ms) DO UPDATE SET
    cost = e.cost + excluded.cost, total = excluded.total;
  -- On an insert OLD is NULL, and NULL is distinct from every interval.
  IF NEW.total = NEW.recorded
     OR NEW.newest_at_ms / prune_interval IS DISTINCT FROM OLD.newest_at_ms / prune_interval THEN
    DELETE FROM quota_log
    WHERE owner = NEW.owner AND limit_name = NEW.limit_name
      AND at_ms <= NEW.newest_at_ms - NEW.period_ms;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_log_owners_record AFTER INSERT OR UPDATE ON quota_log_owners
FOR EACH ROW WHEN (NEW.recorded > 0) EXECUTE FUNCTION quota_log_owners_record();

-- A refund of a sliding_log owner: the owner's new running total is NEW.total, lower by
-- NEW.refunded; the events recorded after it are given back, newest first. Events wholly
-- above the new total go; the one it falls inside keeps what is below it. Only the refund
-- statement names refunded in its SET list, so no other statement runs this trigger.
-- Example: events (at 100, cost 2, total 2), (at 200, cost 3, total 5); a refund of 4 sets
-- total 1: the event at 200 goes, the event at 100 becomes cost 1, total 1.
CREATE FUNCTION quota_log_owners_refund() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_log
  WHERE owner = NEW.owner AND limit_name = NEW.limit_name AND total - cost >= NEW.total;
  UPDATE quota_log SET cost = cost - (total - NEW.total), total = NEW.total
  WHERE owner = NEW.owner AND limit_name = NEW.limit_name AND total > NEW.total;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_log_owners_refund AFTER UPDATE OF refunded ON quota_log_owners
FOR EACH ROW WHEN (NEW.refunded > 0) EXECUTE FUNCTION quota_log_owners_refund();

-- reset: forget the owner's state for the limit, then the request itself (by its key: a
-- table without rowid; a request row never outlives its statement, so no other row has it).
CREATE FUNCTION quota_resets_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_windows WHERE owner = NEW.owner AND limit_name = NEW.limit_name;
  DELETE FROM quota_log_owners WHERE owner = NEW.owner AND limit_name = NEW.limit_name;
  DELETE FROM quota_log WHERE owner = NEW.owner AND limit_name = NEW.limit_name;
  DELETE FROM quota_buckets WHERE owner = NEW.owner AND limit_name = NEW.limit_name;
  DELETE FROM quota_resets
  WHERE limit_name = NEW.limit_name AND owner = NEW.owner AND now_ms = NEW.now_ms;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_resets_apply AFTER INSERT ON quota_resets
FOR EACH ROW EXECUTE FUNCTION quota_resets_apply();

-- Changing a limit's algorithm discards its state (the numbers would mean something else);
-- changing only its numbers keeps it.
CREATE FUNCTION quota_limits_algorithm_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_limits_algorithm_changed AFTER UPDATE OF algorithm ON quota_limits
FOR EACH ROW WHEN (OLD.algorithm IS DISTINCT FROM NEW.algorithm)
EXECUTE FUNCTION quota_limits_algorithm_changed();

-- Removing a limit removes its state...
CREATE FUNCTION quota_limits_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_windows WHERE limit_name = OLD.name;
  DELETE FROM quota_log_owners WHERE limit_name = OLD.name;
  DELETE FROM quota_log WHERE limit_name = OLD.name;
  DELETE FROM quota_buckets WHERE limit_name = OLD.name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_limits_removed AFTER DELETE ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_removed();

-- ...and its overrides (the '*' overrides stay: they belong to no one limit).
CREATE FUNCTION quota_limits_removed_overrides() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM quota_overrides WHERE limit_name = OLD.name;
  RETURN NULL;
END
$$;

CREATE TRIGGER quota_limits_removed_overrides AFTER DELETE ON quota_limits
FOR EACH ROW EXECUTE FUNCTION quota_limits_removed_overrides();

-- quota_owner_limits: the limit as each owner with state sees it, its override applied.
-- One row per state row (limit_name, owner) of a limit that exists; policy is NULL, or
-- the override's: maximum, exempt or deny. quota_usage reads its numbers from here.
CREATE VIEW quota_owner_limits AS
SELECT name, owner, algorithm, period_ms, policy,
       CASE WHEN policy IS DISTINCT FROM 'maximum' THEN maximum
            WHEN algorithm IN ('sliding_window', 'token_bucket')
            THEN least(override_maximum, 4611686018427387904 / period_ms)
            ELSE override_maximum END AS maximum,
       CASE WHEN algorithm <> 'token_bucket' THEN NULL
            WHEN policy IS DISTINCT FROM 'maximum' THEN burst
            ELSE least(override_burst, 2305843009213693952 / period_ms) END AS burst
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
) AS r;

-- quota_usage: who is near their limit, as of the statement's time (or of the latest time an
-- owner's state has seen, if that is later). One row per limit and owner that has usage,
-- denials or shadow denials. used follows the limit's algorithm (exact for sliding_log and
-- fixed_window, the estimate rounded up for sliding_window, capacity minus tokens rounded up
-- for token_bucket) and the owner's override (its capacity; exempt: remaining is the
-- capacity; deny: remaining 0); remaining = capacity - used (>= 0); reset_at_ms is when usage
-- is back to zero if nothing else happens, reset_at the same as ISO-8601 UTC text with
-- milliseconds, exactly as SQLite's strftime('%Y-%m-%dT%H:%M:%fZ') writes it (NULL after the
-- year 9999, as there).
-- Example: SELECT * FROM quota_usage ORDER BY remaining LIMIT 10;
--   send_message | u42 | 10 | 0 | 3 | 1700000060000 | 2023-11-14T22:14:20.000Z | 0
CREATE VIEW quota_usage AS
SELECT limit_name, owner, used,
       CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0
            ELSE greatest(capacity - used, 0) END AS remaining,
       denied, reset_at_ms,
       CASE WHEN reset_at_ms BETWEEN -62135596800000 AND 253402300799999
            THEN to_char(timestamp '1970-01-01' + reset_at_ms * interval '1 millisecond',
                         'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END AS reset_at,
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
    FROM (SELECT *, greatest(seen_ms, CAST(floor(extract(epoch FROM statement_timestamp())
                                                 * 1000) AS bigint)) AS t
          FROM quota_log_owners) AS o
    JOIN quota_owner_limits AS l ON l.name = o.limit_name AND l.owner = o.owner
     AND l.algorithm = 'sliding_log'
  ) AS log_rows
  UNION ALL
  -- fixed_window: the current window's count. sliding_window: that plus the previous
  -- window's count weighted by the part of it still inside the sliding period, rounded up.
  SELECT limit_name, owner, policy, capacity, denied, shadow_denied,
         CASE algorithm WHEN 'fixed_window' THEN cur
              -- (prev % P) * rest is split at 2^18 so that no product passes 2^54, as in
              -- the statements (src/statements.cpp, kWeightedRest): periods up to 366 days.
              ELSE cur + (prev / period_ms) * rest
                   + ((prev % period_ms) * (rest / 262144) / period_ms) * 262144
                   + (((prev % period_ms) * (rest / 262144)) % period_ms * 262144
                      + (prev % period_ms) * (rest % 262144) + period_ms - 1) / period_ms
              END AS used,
         CASE WHEN cur > 0
              THEN (window_key + CASE algorithm WHEN 'sliding_window' THEN 2 ELSE 1 END)
                   * period_ms
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
               greatest(w.seen_ms, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000)
                                        AS bigint)) AS t,
               CASE WHEN w.period_ms = l.period_ms THEN w.window_key
                    ELSE w.seen_ms / l.period_ms END AS row_key
        FROM quota_windows AS w
        JOIN quota_owner_limits AS l ON l.name = w.limit_name AND l.owner = w.owner
         AND l.algorithm IN ('fixed_window', 'sliding_window')
      ) AS window_rows
    ) AS window_keys
  ) AS window_counts
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
             greatest(b.seen_ms, CAST(floor(extract(epoch FROM statement_timestamp()) * 1000)
                                      AS bigint)) AS t,
             CASE WHEN b.seen_ms IS NULL THEN l.burst * l.period_ms
                  WHEN b.period_ms = l.period_ms THEN least(b.level, l.burst * l.period_ms)
                  WHEN b.level / b.period_ms >= l.burst THEN l.burst * l.period_ms
                  ELSE greatest(CASE WHEN b.level >= 0 THEN b.level / b.period_ms
                                     ELSE -((b.period_ms - 1 - b.level) / b.period_ms) END,
                                -(4611686018427387904 / l.period_ms)) * l.period_ms END AS start
      FROM quota_buckets AS b
      JOIN quota_owner_limits AS l ON l.name = b.limit_name AND l.owner = b.owner
       AND l.algorithm = 'token_bucket'
    ) AS bucket_rows
  ) AS bucket_levels
) AS usage_rows
WHERE used > 0 OR denied > 0 OR shadow_denied > 0;
