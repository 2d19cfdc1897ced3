UPDATE quota_windows SET
  (window_key, used, previous_used, denied, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms, blocked_until_ms, shadow_denied) =
  (SELECT window_key, used_after, previous_used, denied, t, cost, maximum, period_ms,
          (allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) OR shadow, reason, CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END, CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN reason = 'blocked' AND retry_after_ms >= 0 THEN max(s_blocked_until - t, retry_after_ms) WHEN reason = 'rate_limited' AND NOT shadow THEN max(retry_after_ms, coalesce(block_ms, 0)) ELSE retry_after_ms END, reset_at_ms,
          CASE WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN s_blocked_until WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END, quota_windows.shadow_denied + (NOT allowed AND shadow)
   FROM (
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'ok' WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) THEN 'blocked' WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms,
    used_after AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed, policy, shadow, block_ms, s_blocked_until,
      min(used + CASE WHEN allowed AND NOT coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE) AND policy IS DISTINCT FROM 'exempt' THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + ((NOT allowed OR coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow AND policy IS DISTINCT FROM 'exempt', FALSE)) AND NOT shadow) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before, policy, shadow, block_ms, s_blocked_until,
        CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND used + cost <= maximum END AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before, policy, shadow, block_ms, s_blocked_until,
          CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous, policy, shadow, block_ms, s_blocked_until,
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM (
      SELECT l.maximum AS maximum, l.maximum AS capacity, l.period_ms AS period_ms,
             CASE WHEN :cost IS NULL THEN 1 WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000 THEN CAST(:cost AS INTEGER) ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END AS cost, CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0 THEN CAST(:now AS INTEGER) ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 (NULL: the database clock)') END AS now, NULL AS policy, FALSE AS shadow,
             NULL AS block_ms, quota_windows.blocked_until_ms AS s_blocked_until,
             quota_windows.window_key AS s_window_key, quota_windows.period_ms AS s_period,
             quota_windows.used AS s_used, quota_windows.previous_used AS s_previous,
             quota_windows.denied AS s_denied, quota_windows.seen_ms AS s_seen
      FROM quota_limits AS l
      WHERE l.name = :limit AND l.algorithm = 'fixed_window' AND l.calendar IS NULL
        AND NOT l.shadow AND l.block_ms IS NULL) AS inputs
          ) AS clocked LIMIT -1 OFFSET 0
        ) AS keyed
      ) AS counted LIMIT -1 OFFSET 0
    ) AS decided
  ) AS written) AS decision)
WHERE limit_name = :limit AND owner = :owner
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
