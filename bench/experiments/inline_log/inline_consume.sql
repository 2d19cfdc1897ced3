-- The prototype's consume (SQLite), one statement: the engine's sliding_log consume as
-- `quotactl sql consume` prints it (src/statements.cpp, kLogDecision with kLogRecord), with
-- every part kept (the limit, both overrides, policy, shadow mode, blocks, the answer columns)
-- except where the events are read and written:
--   `based` joins the row's array to json_each once and sums the live events (at_ms > t -
--     period_ms) into `used`, and concatenates their JSON text into `live`;
--   retry_after_ms (a denial only) runs the array again with a running sum over the live
--     events, oldest first: the first event whose running sum covers `excess` is the one
--     whose expiry frees enough (the engine's {covering_event});
--   reset_at_ms takes the array's last event as the newest (the engine's newest_at_ms);
--   events is the live events and, when the request records, [t, recorded] appended.
INSERT INTO quota_log_inline (limit_name, owner, cost, seen_ms, maximum)
VALUES (:limit, :owner, CASE WHEN :cost IS NULL THEN 1 WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000 THEN CAST(:cost AS INTEGER) ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END, CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END, 0)
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (events, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied) =
  (SELECT events, denied, t, cost, maximum, period_ms,
          (allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) WHEN reason = 'rate_limited' AND NOT shadow THEN max(retry_after_ms, coalesce(block_ms, 0)) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, quota_log_inline.shadow_denied + (NOT allowed AND shadow)
   FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         ELSE coalesce((SELECT at FROM (SELECT e.value ->> 0 AS at, sum(e.value ->> 1) OVER (ORDER BY e.key) AS run FROM json_each(s_events) AS e WHERE e.value ->> 0 > t - period_ms) AS running WHERE run >= excess ORDER BY at LIMIT 1), t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE (s_events ->> '$[#-1][0]') + period_ms END AS reset_at_ms,
    '[' || CASE WHEN recorded > 0 THEN coalesce(live || ',', '') || '[' || t || ',' || recorded || ']'
                ELSE coalesce(live, '') END || ']' AS events
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + ((NOT allowed OR coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) AND NOT shadow) AS denied
    FROM (
      SELECT *, CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT clocked.*,
            coalesce(sum(e.value ->> 1), 0) AS used,
            group_concat(e.value, ',') AS live,
            coalesce(s_denied, 0) AS denied_before
          FROM (
              SELECT *, max(now, coalesce(s_seen, 0)) AS t
              FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             excluded.cost AS cost, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_log_inline.blocked_until_ms AS s_blocked_until,
             quota_log_inline.events AS s_events,
             quota_log_inline.denied AS s_denied, quota_log_inline.seen_ms AS s_seen
      FROM (SELECT 1) AS request
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'sliding_log'
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs LIMIT -1 OFFSET 0
            ) AS clocked
          LEFT JOIN json_each(clocked.s_events) AS e ON e.value ->> 0 > clocked.t - clocked.period_ms
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS summed) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied;
