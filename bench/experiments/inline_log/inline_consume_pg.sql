-- The prototype's consume on PostgreSQL (jsonb): the engine's sliding_log consume as
-- `quotactl sql consume` prints it for PostgreSQL, with the same changes as inline_consume.sql:
-- the live events are summed and kept by one jsonb_array_elements in `based` (a LATERAL
-- aggregate), the covering event of a denial by a running sum over them, the newest event is
-- the array's last, and events is the live ones with [t, recorded] appended. The reads of
-- quota_log through the VOLATILE functions are gone: the row holds the events, and the DO
-- UPDATE reads the row it has locked. Parameters: $1 limit, $2 owner, $3 cost, $4 now.
INSERT INTO quota_log_inline (limit_name, owner, events, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied)
SELECT $1, $2, events, denied, t, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END, maximum, period_ms,
          (allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) WHEN reason = 'rate_limited' AND NOT shadow THEN greatest(retry_after_ms, coalesce(block_ms, 0)) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, int4(NOT allowed AND shadow)
FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         ELSE coalesce((SELECT at FROM (SELECT (e.value ->> 0)::bigint AS at, sum((e.value ->> 1)::bigint) OVER (ORDER BY e.n) AS run FROM jsonb_array_elements(s_events) WITH ORDINALITY AS e(value, n) WHERE (e.value ->> 0)::bigint > t - period_ms) AS running WHERE run >= excess ORDER BY at LIMIT 1), t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE (s_events -> -1 ->> 0)::bigint + period_ms END AS reset_at_ms,
    CASE WHEN recorded > 0 THEN coalesce(live, '[]'::jsonb) || jsonb_build_array(jsonb_build_array(t, recorded))
         ELSE coalesce(live, '[]'::jsonb) END AS events
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + int4((NOT allowed OR coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) AND NOT shadow) AS denied
    FROM (
      SELECT *, CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *
          FROM (
            SELECT clocked.*, coalesce(live_events.used, 0) AS used, live_events.events AS live,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
              FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             excluded.cost AS cost, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_log_inline.blocked_until_ms AS s_blocked_until,
             excluded.limit_name AS key_limit,
             excluded.owner AS key_owner, quota_log_inline.events AS s_events,
             quota_log_inline.denied AS s_denied, quota_log_inline.seen_ms AS s_seen
      FROM (SELECT $1 AS limit_name, $2 AS owner, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS seen_ms) AS excluded LEFT JOIN quota_log_inline ON FALSE
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'sliding_log'
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs OFFSET 0
            ) AS clocked CROSS JOIN LATERAL (
              SELECT sum((e.value ->> 1)::bigint) AS used, jsonb_agg(e.value ORDER BY e.n) AS events
              FROM jsonb_array_elements(clocked.s_events) WITH ORDINALITY AS e(value, n)
              WHERE (e.value ->> 0)::bigint > clocked.t - clocked.period_ms) AS live_events OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS summed) AS decision
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (events, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied) =
  (SELECT events, denied, t, cost, maximum, period_ms,
          (allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) WHEN reason = 'rate_limited' AND NOT shadow THEN greatest(retry_after_ms, coalesce(block_ms, 0)) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, quota_log_inline.shadow_denied + int4(NOT allowed AND shadow)
   FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         ELSE coalesce((SELECT at FROM (SELECT (e.value ->> 0)::bigint AS at, sum((e.value ->> 1)::bigint) OVER (ORDER BY e.n) AS run FROM jsonb_array_elements(s_events) WITH ORDINALITY AS e(value, n) WHERE (e.value ->> 0)::bigint > t - period_ms) AS running WHERE run >= excess ORDER BY at LIMIT 1), t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE (s_events -> -1 ->> 0)::bigint + period_ms END AS reset_at_ms,
    CASE WHEN recorded > 0 THEN coalesce(live, '[]'::jsonb) || jsonb_build_array(jsonb_build_array(t, recorded))
         ELSE coalesce(live, '[]'::jsonb) END AS events
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + int4((NOT allowed OR coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) AND NOT shadow) AS denied
    FROM (
      SELECT *, CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *
          FROM (
            SELECT clocked.*, coalesce(live_events.used, 0) AS used, live_events.events AS live,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
              FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             excluded.cost AS cost, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_log_inline.blocked_until_ms AS s_blocked_until,
             excluded.limit_name AS key_limit,
             excluded.owner AS key_owner, quota_log_inline.events AS s_events,
             quota_log_inline.denied AS s_denied, quota_log_inline.seen_ms AS s_seen
      FROM (SELECT 1) AS request
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'sliding_log'
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs OFFSET 0
            ) AS clocked CROSS JOIN LATERAL (
              SELECT sum((e.value ->> 1)::bigint) AS used, jsonb_agg(e.value ORDER BY e.n) AS events
              FROM jsonb_array_elements(clocked.s_events) WITH ORDINALITY AS e(value, n)
              WHERE (e.value ->> 0)::bigint > clocked.t - clocked.period_ms) AS live_events OFFSET 0
          ) AS based
        ) AS counted
      ) AS decided OFFSET 0
    ) AS booked
  ) AS summed) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
