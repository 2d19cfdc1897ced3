-- Statements for the schema checks: hand-written consume, record, refund and reset statements
-- of the shape the engine uses on PostgreSQL (one INSERT ... ON CONFLICT (limit_name, owner)
-- DO UPDATE ... RETURNING per request, with a new owner's answer computed from the empty
-- state in the proposed row), with simplified decisions: they exercise the schema's keys,
-- checks and triggers, not the algorithms' arithmetic. Each is a SQL function of the four
-- parameters (limit, owner, cost, now), so that concurrent sessions run the same text.
-- Loaded by tests/postgresql/schema_check.sh into the schema check_helpers.

CREATE SCHEMA check_helpers;

-- Fails the script with `what` unless `ok` is true.
CREATE FUNCTION check_helpers.expect(ok boolean, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN RAISE EXCEPTION 'check failed: %', what; END IF;
END
$$;

-- Fails the script unless `statement` fails with an error whose message contains `fragment`.
-- The statement's effects are rolled back with its subtransaction.
CREATE FUNCTION check_helpers.expect_error(statement text, fragment text, what text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE statement;
  EXCEPTION WHEN others THEN
    IF position(fragment IN SQLERRM) = 0 THEN
      RAISE EXCEPTION 'check failed: %: the error was "%", not one containing "%"',
        what, SQLERRM, fragment;
    END IF;
    RETURN;
  END;
  RAISE EXCEPTION 'check failed: %: no error', what;
END
$$;

-- A window counter: allowed while the window's count plus cost stays within the maximum.
CREATE FUNCTION check_helpers.consume_window(p_limit text, p_owner text, p_cost bigint,
                                             p_now bigint)
RETURNS TABLE (allowed boolean, used bigint, denied bigint, window_key bigint)
LANGUAGE sql AS $$
INSERT INTO quota_windows AS w (limit_name, owner, maximum, period_ms, window_key, used,
                                previous_used, denied, seen_ms, cost, last_allowed,
                                last_reason, last_remaining)
SELECT p_limit, p_owner, l.maximum, l.period_ms, p_now / l.period_ms,
       CASE WHEN p_cost <= l.maximum THEN p_cost ELSE 0 END, 0,
       CASE WHEN p_cost <= l.maximum THEN 0 ELSE 1 END, p_now, p_cost, p_cost <= l.maximum,
       CASE WHEN p_cost <= l.maximum THEN 'ok' ELSE 'rate_limited' END,
       greatest(l.maximum - p_cost, 0)
FROM (SELECT 1) AS request
LEFT JOIN quota_limits AS l
  ON l.name = p_limit AND l.algorithm IN ('fixed_window', 'sliding_window')
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (maximum, period_ms, window_key, used, previous_used, denied, seen_ms, cost, last_allowed,
   last_reason, last_remaining) =
  (SELECT d.maximum, d.period_ms, d.k, d.before + CASE WHEN d.ok THEN excluded.cost ELSE 0 END,
          d.prev, w.denied + CASE WHEN d.ok THEN 0 ELSE 1 END, d.t, excluded.cost, d.ok,
          CASE WHEN d.ok THEN 'ok' ELSE 'rate_limited' END,
          greatest(d.maximum - d.before - CASE WHEN d.ok THEN excluded.cost ELSE 0 END, 0)
   FROM (SELECT i.*, i.before + excluded.cost <= i.maximum AS ok
         FROM (SELECT l.maximum, l.period_ms, x.t, x.t / l.period_ms AS k,
                      CASE WHEN w.window_key = x.t / l.period_ms THEN w.used ELSE 0 END
                        AS before,
                      CASE w.window_key WHEN x.t / l.period_ms THEN w.previous_used
                                        WHEN x.t / l.period_ms - 1 THEN w.used
                                        ELSE 0 END AS prev
               FROM (SELECT greatest(w.seen_ms, excluded.seen_ms) AS t) AS x
               LEFT JOIN quota_limits AS l ON l.name = excluded.limit_name
                AND l.algorithm IN ('fixed_window', 'sliding_window')) AS i) AS d)
RETURNING last_allowed, used, denied, window_key
$$;

-- A sliding log: usage is the running total minus the total before the first live event;
-- an allowed request records its cost at its time (the record trigger appends the event).
CREATE FUNCTION check_helpers.consume_log(p_limit text, p_owner text, p_cost bigint,
                                          p_now bigint)
RETURNS TABLE (allowed boolean, total bigint, recorded bigint)
LANGUAGE sql AS $$
INSERT INTO quota_log_owners AS o (limit_name, owner, maximum, period_ms, total, newest_at_ms,
                                   recorded, denied, seen_ms, cost, last_allowed)
SELECT p_limit, p_owner, l.maximum, l.period_ms,
       CASE WHEN p_cost <= l.maximum THEN p_cost ELSE 0 END,
       CASE WHEN p_cost <= l.maximum THEN p_now END,
       CASE WHEN p_cost <= l.maximum THEN p_cost ELSE 0 END,
       CASE WHEN p_cost <= l.maximum THEN 0 ELSE 1 END, p_now, p_cost, p_cost <= l.maximum
FROM (SELECT 1) AS request
LEFT JOIN quota_limits AS l ON l.name = p_limit AND l.algorithm = 'sliding_log'
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (maximum, period_ms, total, newest_at_ms, recorded, denied, seen_ms, cost, last_allowed) =
  (SELECT d.maximum, d.period_ms,
          CASE WHEN d.recorded = 0 THEN o.total WHEN d.used = 0 THEN d.recorded
               ELSE o.total + d.recorded END,
          CASE WHEN d.recorded > 0 THEN d.t ELSE o.newest_at_ms END, d.recorded,
          o.denied + CASE WHEN d.ok THEN 0 ELSE 1 END, d.t, excluded.cost, d.ok
   FROM (SELECT u.*, CASE WHEN u.ok THEN excluded.cost ELSE 0 END AS recorded
         FROM (SELECT v.*, v.used + excluded.cost <= v.maximum AS ok
               FROM (SELECT l.maximum, l.period_ms, x.t,
                            coalesce(o.total - (SELECT e.total - e.cost FROM quota_log AS e
                                                WHERE e.owner = excluded.owner
                                                  AND e.limit_name = excluded.limit_name
                                                  AND e.at_ms > x.t - l.period_ms
                                                ORDER BY e.at_ms LIMIT 1), 0) AS used
                     FROM (SELECT greatest(o.seen_ms, excluded.seen_ms) AS t) AS x
                     LEFT JOIN quota_limits AS l ON l.name = excluded.limit_name
                      AND l.algorithm = 'sliding_log') AS v) AS u) AS d)
RETURNING last_allowed, total, recorded
$$;

-- A sliding_log refund of p_cost units (the refund trigger trims the events).
CREATE FUNCTION check_helpers.refund_log(p_limit text, p_owner text, p_cost bigint,
                                         p_now bigint)
RETURNS TABLE (total bigint, refunded bigint)
LANGUAGE sql AS $$
INSERT INTO quota_log_owners AS o (limit_name, owner, maximum, period_ms, total, recorded,
                                   denied, seen_ms, cost, refunded)
SELECT p_limit, p_owner, l.maximum, l.period_ms, 0, 0, 0, p_now, p_cost, 0
FROM (SELECT 1) AS request
LEFT JOIN quota_limits AS l ON l.name = p_limit AND l.algorithm = 'sliding_log'
ON CONFLICT (limit_name, owner) DO UPDATE SET (total, recorded, refunded, seen_ms) =
  (SELECT o.total - least(excluded.cost, o.total), 0, least(excluded.cost, o.total),
          greatest(o.seen_ms, excluded.seen_ms))
RETURNING total, refunded
$$;

-- A token bucket of level = tokens * period_ms, refilled by maximum per millisecond.
CREATE FUNCTION check_helpers.consume_bucket(p_limit text, p_owner text, p_cost bigint,
                                             p_now bigint)
RETURNS TABLE (allowed boolean, level bigint)
LANGUAGE sql AS $$
INSERT INTO quota_buckets AS b (limit_name, owner, maximum, period_ms, burst, level, denied,
                                seen_ms, cost, last_allowed)
SELECT p_limit, p_owner, l.maximum, l.period_ms, l.burst,
       l.burst * l.period_ms - CASE WHEN p_cost <= l.burst THEN p_cost * l.period_ms ELSE 0 END,
       CASE WHEN p_cost <= l.burst THEN 0 ELSE 1 END, p_now, p_cost, p_cost <= l.burst
FROM (SELECT 1) AS request
LEFT JOIN quota_limits AS l ON l.name = p_limit AND l.algorithm = 'token_bucket'
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (maximum, period_ms, burst, level, denied, seen_ms, cost, last_allowed) =
  (SELECT d.maximum, d.period_ms, d.burst,
          d.level - CASE WHEN d.ok THEN excluded.cost * d.period_ms ELSE 0 END,
          b.denied + CASE WHEN d.ok THEN 0 ELSE 1 END, d.t, excluded.cost, d.ok
   FROM (SELECT v.*, v.level >= excluded.cost * v.period_ms AS ok
         FROM (SELECT l.maximum, l.period_ms, l.burst, x.t,
                      least(b.level + l.maximum * (x.t - b.seen_ms), l.burst * l.period_ms)
                        AS level
               FROM (SELECT greatest(b.seen_ms, excluded.seen_ms) AS t) AS x
               LEFT JOIN quota_limits AS l ON l.name = excluded.limit_name
                AND l.algorithm = 'token_bucket') AS v) AS d)
RETURNING last_allowed, level
$$;

-- reset: the request row whose trigger deletes the owner's state, answered by RETURNING.
CREATE FUNCTION check_helpers.reset(p_limit text, p_owner text, p_now bigint)
RETURNS TABLE (limit_name text, owner text, now_ms bigint, remaining bigint)
LANGUAGE sql AS $$
INSERT INTO quota_resets (limit_name, owner, now_ms, remaining)
VALUES (p_limit, p_owner, p_now,
        (SELECT coalesce(l.burst, l.maximum) FROM quota_limits AS l WHERE l.name = p_limit))
RETURNING limit_name, owner, now_ms, remaining
$$;

-- Every state row and log event of (limit, owner), counted over the four tables.
CREATE FUNCTION check_helpers.state_rows(p_limit text, p_owner text) RETURNS bigint
LANGUAGE sql AS $$
SELECT (SELECT count(*) FROM quota_windows WHERE limit_name = p_limit AND owner = p_owner)
     + (SELECT count(*) FROM quota_log_owners WHERE limit_name = p_limit AND owner = p_owner)
     + (SELECT count(*) FROM quota_log WHERE limit_name = p_limit AND owner = p_owner)
     + (SELECT count(*) FROM quota_buckets WHERE limit_name = p_limit AND owner = p_owner)
$$;

-- The owner's log as text: at_ms:cost:total, oldest first.
CREATE FUNCTION check_helpers.log_of(p_limit text, p_owner text) RETURNS text
LANGUAGE sql AS $$
SELECT coalesce(string_agg(at_ms || ':' || cost || ':' || total, ' ' ORDER BY at_ms), '')
FROM quota_log WHERE limit_name = p_limit AND owner = p_owner
$$;
