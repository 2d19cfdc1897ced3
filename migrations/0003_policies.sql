-- quota schema, migration 0003: policies. Per-owner overrides, shadow mode, refunds.
--
--   CREATE TABLE quota_overrides(limit_name, owner, policy, maximum, burst);
--   ALTER TABLE  quota_limits     ADD COLUMN shadow;
--   ALTER TABLE  quota_windows    ADD COLUMN shadow_denied;
--   ALTER TABLE  quota_log_owners ADD COLUMN shadow_denied;  -- and refunded
--   ALTER TABLE  quota_buckets    ADD COLUMN shadow_denied;
--   CREATE VIEW  quota_owner_limits(name, owner, algorithm, period_ms, policy, maximum, burst);
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

ALTER TABLE quota_limits ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0 CHECK (shadow IN (0, 1));
ALTER TABLE quota_windows ADD COLUMN
  shadow_denied INTEGER DEFAULT 0 CHECK (shadow_denied >= 0);
ALTER TABLE quota_log_owners ADD COLUMN
  shadow_denied INTEGER DEFAULT 0 CHECK (shadow_denied >= 0);
ALTER TABLE quota_log_owners ADD COLUMN refunded INTEGER CHECK (refunded >= 0);
ALTER TABLE quota_buckets ADD COLUMN
  shadow_denied INTEGER DEFAULT 0 CHECK (shadow_denied >= 0);

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
DROP VIEW quota_usage;
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
              ELSE cur + (prev / period_ms) * rest + ((prev % period_ms) * rest + period_ms - 1)
                                                     / period_ms END AS used,
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
