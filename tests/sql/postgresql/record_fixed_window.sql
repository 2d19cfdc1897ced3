INSERT INTO quota_windows (limit_name, owner, window_key, used, previous_used, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms)
SELECT $1, $2, window_key, used_after, previous_used, denied, t, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END, maximum, period_ms,
          allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE), reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END
FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms,
    used_after AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until,
      least(used + CASE WHEN policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + int4(FALSE) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, now, policy, shadow, block_ms, s_blocked_until,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, now, policy, shadow, block_ms, s_blocked_until,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, now, policy, shadow, block_ms, s_blocked_until,
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             excluded.cost AS cost, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_windows.blocked_until_ms AS s_blocked_until,
             quota_windows.window_key AS s_window_key, quota_windows.period_ms AS s_period,
             quota_windows.used AS s_used, quota_windows.previous_used AS s_previous,
             quota_windows.denied AS s_denied, quota_windows.seen_ms AS s_seen
      FROM (SELECT $1 AS limit_name, $2 AS owner, CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3 ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint) WHEN $4 >= 0 THEN $4 ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS seen_ms) AS excluded LEFT JOIN quota_windows ON FALSE
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'fixed_window' AND l.calendar IS NULL
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs
          ) AS clocked OFFSET 0
        ) AS keyed
      ) AS counted OFFSET 0
    ) AS decided
  ) AS written) AS decision
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (window_key, used, previous_used, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms) =
  (SELECT window_key, used_after, previous_used, denied, t, cost, maximum, period_ms,
          allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE), reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN greatest(s_blocked_until - t, retry_after_ms) + (t - now) WHEN retry_after_ms > 0 THEN retry_after_ms + (t - now) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until END
   FROM (
  SELECT *,
    greatest(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms,
    used_after AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, now, policy, shadow, block_ms, s_blocked_until,
      least(used + CASE WHEN policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + int4(FALSE) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, now, policy, shadow, block_ms, s_blocked_until,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, now, policy, shadow, block_ms, s_blocked_until,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, now, policy, shadow, block_ms, s_blocked_until,
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, greatest(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS maximum, CASE coalesce(o.policy, a.policy) WHEN 'maximum' THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END AS capacity, l.period_ms AS period_ms,
             excluded.cost AS cost, excluded.seen_ms AS now, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_windows.blocked_until_ms AS s_blocked_until,
             quota_windows.window_key AS s_window_key, quota_windows.period_ms AS s_period,
             quota_windows.used AS s_used, quota_windows.previous_used AS s_previous,
             quota_windows.denied AS s_denied, quota_windows.seen_ms AS s_seen
      FROM (SELECT 1) AS request
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = 'fixed_window' AND l.calendar IS NULL
      LEFT JOIN quota_overrides AS o ON o.limit_name = excluded.limit_name AND o.owner = excluded.owner
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = excluded.owner) AS inputs
          ) AS clocked OFFSET 0
        ) AS keyed
      ) AS counted OFFSET 0
    ) AS decided
  ) AS written) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
