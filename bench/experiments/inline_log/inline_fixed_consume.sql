-- The prototype's consume with fixed-width events (SQLite): no JSON. events is text, one
-- record of 30 characters per event, oldest first: its at_ms in 15 digits, then the owner's
-- running total up to and including it in 15 digits (quota_log's total), zero-padded, so that
-- the k-th record is a substr at k * 30 and needs no parse of the others. The row keeps, as
-- quota_log_owners does, total (the running total) and newest_at_ms, and base, the running
-- total before its first record.
--   `based` walks the records from the first while they have expired (at_ms <= t - period_ms),
--     a recursive step per record: `expired` of them, usually 0 or 1 for an owner at capacity,
--     and no walk at all when the newest has expired (then all have). Usage is total minus the
--     running total before the first live record: one substr.
--   retry_after_ms (a denial only) walks on from the first live record to the first whose
--     running total covers `excess` (the engine's {covering_event}).
--   events drops the expired records (one substr of the rest) and appends the recorded one; the
--     running total restarts from zero when nothing is live, as the engine's does.
INSERT INTO quota_log_inline (limit_name, owner, cost, seen_ms, maximum)
VALUES (:limit, :owner, CASE WHEN :cost IS NULL THEN 1 WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000 THEN CAST(:cost AS INTEGER) ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END, CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END, 0)
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (events, total, base, newest_at_ms, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied) =
  (SELECT events, total_after, base_after, newest_after, denied, t, cost, maximum, period_ms,
          (allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) WHEN reason = 'rate_limited' AND NOT shadow THEN max(retry_after_ms, coalesce(block_ms, 0)) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, quota_log_inline.shadow_denied + (NOT allowed AND shadow)
   FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         ELSE coalesce((WITH RECURSIVE covering(j) AS (SELECT expired UNION ALL SELECT j + 1 FROM covering WHERE j + 1 < records AND CAST(substr(s_events, j * 30 + 16, 15) AS INTEGER) - live_base < excess) SELECT CASE WHEN CAST(substr(s_events, j * 30 + 16, 15) AS INTEGER) - live_base >= excess THEN CAST(substr(s_events, j * 30 + 1, 15) AS INTEGER) END FROM covering ORDER BY j DESC LIMIT 1), t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE s_newest_at + period_ms END AS reset_at_ms,
    coalesce(substr(s_events, expired * 30 + 1), '')
      || CASE WHEN recorded > 0 THEN printf('%015d%015d', t, total_after) ELSE '' END AS events,
    CASE WHEN recorded > 0 THEN t ELSE s_newest_at END AS newest_after
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           CASE WHEN expired = records THEN recorded ELSE s_total + recorded END AS total_after,
           CASE WHEN expired = records THEN 0 ELSE live_base END AS base_after,
           denied_before + ((NOT allowed OR coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) AND NOT shadow) AS denied
    FROM (
      SELECT *, CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
        FROM (
          SELECT *, CASE WHEN expired = records THEN 0 ELSE s_total - live_base END AS used
          FROM (
          SELECT *, CASE WHEN expired = 0 THEN s_base WHEN expired = records THEN 0
                         ELSE CAST(substr(s_events, expired * 30 - 14, 15) AS INTEGER) END AS live_base
          FROM (
          SELECT *,
            CASE WHEN records = 0 OR s_newest_at <= t - period_ms THEN records
                 ELSE (WITH RECURSIVE walk(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM walk WHERE CAST(substr(s_events, k * 30 + 1, 15) AS INTEGER) <= t - period_ms) SELECT max(k) FROM walk) END AS expired,
            coalesce(s_denied, 0) AS denied_before
          FROM (
              SELECT *, max(now, coalesce(s_seen, 0)) AS t, coalesce(length(s_events), 0) / 30 AS records
              FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             excluded.cost AS cost, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_log_inline.blocked_until_ms AS s_blocked_until,
             quota_log_inline.events AS s_events, quota_log_inline.total AS s_total,
             quota_log_inline.base AS s_base, quota_log_inline.newest_at_ms AS s_newest_at,
             quota_log_inline.denied AS s_denied, quota_log_inline.seen_ms AS s_seen
      FROM (SELECT 1) AS request
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'sliding_log'
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs LIMIT -1 OFFSET 0
            ) AS clocked LIMIT -1 OFFSET 0
          ) AS walked
          ) AS based
        ) AS counted
      ) AS decided LIMIT -1 OFFSET 0
    ) AS booked
  ) AS summed) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied;
