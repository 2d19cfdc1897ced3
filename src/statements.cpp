// The engine's statements, built once from the templates below.
//
// Each algorithm family has one "decision": layered SELECTs that take the limit, the request
// and the owner's state row as columns (the "inputs") and compute the answer and the row to
// write. The operations use it in two ways:
//
//   check            SELECT answer FROM (decision over limit JOIN state row)  -- never writes
//   consume, record  INSERT INTO state (limit_name, owner, cost, seen_ms, maximum)
//                    VALUES (:limit, :owner, :cost, :now, 0)
//                    ON CONFLICT (limit_name, owner) DO UPDATE SET
//                      (every state and answer column) = (SELECT FROM decision over the
//                      row as it was, excluded.cost, excluded.seen_ms and the limit)
//                    RETURNING answer                                          -- one row
//
// The owner's row always exists when the conflict is checked (the table's "new owner"
// trigger creates it empty), so the decision is always the DO UPDATE's. VALUES carries only
// the request: a subquery there would run on every request, and an INSERT ... SELECT would
// be buffered in a temporary table (RETURNING is a trigger), each costing more than the
// bare upsert itself. The 0 in VALUES only satisfies the "unknown limit" check of the
// request row; it is never stored.
//
// The DO UPDATE runs after SQLite has taken the write lock, so the state it reads is the
// state it overwrites: check-and-record is atomic across connections and processes without
// an explicit transaction.
//
// Some layers end with "LIMIT -1 OFFSET 0", which stops SQLite from flattening them:
// flattening copies each expression into every place that uses it, while an unflattened
// layer costs a co-routine. Every family's barriers were placed by measurement, where they
// cost the fewest instructions (docs/performance-notes.md); the log's first-live-event
// subquery sits in a layer of its own behind one, so that it is never copied. The window
// layers also pass on only the columns that later layers use: a co-routine copies every
// column it yields.
//
// Examples (limit "send": sliding_log, maximum 2, period 1000 ms; owner "u"):
//   consume :now=5000  -> allowed 1, ok,           remaining 1, retry 0,    reset_at 6000
//   consume :now=5400  -> allowed 1, ok,           remaining 0, retry 0,    reset_at 6400
//   consume :now=5500  -> allowed 0, rate_limited, remaining 0, retry 500,  reset_at 6400
//   check   :now=6000  -> allowed 1, ok,           remaining 1, retry 0,    reset_at 6400
//   consume :now=4000  -> evaluated at 5500 (seen_ms): allowed 0, retry 500
// tests/engine_test.cpp and tests/sql_test.cpp run these examples.
#include "statements.h"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace quota::detail {
namespace {

// The database's current time in Unix milliseconds. julianday('now') has millisecond
// resolution and is fixed for the duration of one statement.
constexpr const char* kDatabaseNow =
    "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

constexpr const char* kBarrier = "LIMIT -1 OFFSET 0";

// :cost and :now as integers. A client may bind them as REAL (JavaScript's sql.js binds
// numbers above 2^31 as doubles): an integral value is taken as that integer, anything else
// (1.5, 0, a negative time, text that is not a whole number) fails the statement with a
// message that says what is accepted, as the library refuses a bad cost. SQLite has no way to
// raise an error of one's own outside a trigger, so the refusal is json_extract's error for a
// path that is not one, whose message quotes the path: "JSON path error near 'the cost must
// be ...'" (SQLite 3.40) or "bad JSON path: 'the cost must be ...'" (newer). CASE evaluates
// only the branch taken, so a valid request never reaches it. kNow is a template ({now}: the
// database's clock), kCost is used as it is.
constexpr const char* kCost =
    "CASE WHEN :cost IS NULL THEN 1"
    " WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000"
    " THEN CAST(:cost AS INTEGER)"
    " ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 "
    "(NULL: 1)') END";
constexpr const char* kNow =
    "CASE WHEN :now IS NULL THEN {now}"
    " WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0"
    " THEN CAST(:now AS INTEGER)"
    " ELSE json_extract('{{}}', 'the time must be a whole number of Unix milliseconds >= 0 "
    "(NULL: the database clock)') END";

// What each operation records and counts, given the decision's `allowed` (the verdict as if
// enforcing), the owner's override `policy` and the limit's `shadow` flag.
struct OperationParts {
  const char* recorded;  // does this operation record the cost?
  const char* denied;    // does it add one to the owner's denied counter?
  const char* granted;   // the answer's allowed
  const char* request;   // the inputs' request columns: cost (and refund)
};

constexpr const char* kRequest = "excluded.cost AS cost";

OperationParts parts_of(Operation operation) {
  switch (operation) {
    case Operation::check:
      return {"0", "0", "allowed", ""};
    case Operation::consume:
      // Shadow mode: never denied, and a would-be denial is counted in shadow_denied.
      return {"allowed AND policy IS NOT 'exempt'", "NOT allowed AND NOT shadow",
              "allowed OR shadow", kRequest};
    case Operation::record:
      return {"policy IS NOT 'exempt'", "0", "allowed", kRequest};
    case Operation::refund:
      // The refund itself is the decision's {take}; the answer is a check of cost 1.
      return {"0", "0", "allowed", "1 AS cost, excluded.cost AS refund"};
    case Operation::reset:
      break;
  }
  throw std::logic_error("reset has no decision");
}

// ---------------------------------------------------------------------------------------
// Overrides (quota_overrides, migrations/0003_policies.sql), read in the inputs of every
// decision: o is the owner's row for the limit, a its row for '*' (o wins). Both are primary
// key lookups; an owner without an override costs two misses and CASEs that fall through to
// the limit's own numbers. An override's maximum beyond what the limit's period permits is
// read as the largest permitted, as the quota_limits checks would require.
constexpr const char* kOverrideJoins = R"(
      LEFT JOIN quota_overrides AS o ON o.limit_name = {limit} AND o.owner = {owner}
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = {owner})";

constexpr const char* kPolicy = "coalesce(o.policy, a.policy)";

// The limit's maximum as the owner sees it; {bound} caps an override's.
constexpr const char* kMaximumForOwner =
    "CASE coalesce(o.policy, a.policy) WHEN 'maximum' "
    "THEN {bounded} ELSE l.maximum END";
constexpr const char* kOverrideMaximum =
    "CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END";
constexpr const char* kOverrideBurst =
    "CASE WHEN o.policy IS NULL THEN coalesce(a.burst, a.maximum) "
    "ELSE coalesce(o.burst, o.maximum) END";

std::string maximum_for_owner(Algorithm algorithm) {
  const bool bounded =
      algorithm == Algorithm::sliding_window || algorithm == Algorithm::token_bucket;
  const std::string value =
      bounded ? fmt::format("min({}, 4611686018427387904 / l.period_ms)", kOverrideMaximum)
              : std::string(kOverrideMaximum);
  return fmt::format(fmt::runtime(kMaximumForOwner), fmt::arg("bounded", value));
}

// A token bucket's capacity as the owner sees it (an override without a burst: its maximum).
std::string burst_for_owner() {
  return fmt::format(
      "CASE coalesce(o.policy, a.policy) WHEN 'maximum' "
      "THEN min({}, 2305843009213693952 / l.period_ms) ELSE l.burst END",
      kOverrideBurst);
}

// The verdict as if enforcing, the same for every algorithm: an exempt owner is always
// allowed, a denied one never, any other when the cost fits the capacity and {fits}, the
// family's test of whether `cost` may be taken now.
constexpr const char* kAllowed =
    "CASE policy WHEN 'exempt' THEN 1 WHEN 'deny' THEN 0 ELSE cost <= capacity AND {fits} END";

// The answer's remaining and retry_after_ms under the owner's policy: an exempt owner has the
// whole capacity, a denied one nothing and never a retry.
constexpr const char* kAnswerRemaining =
    "CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 ELSE remaining END";
constexpr const char* kAnswerRetry = "CASE WHEN policy IS 'deny' THEN -1 ELSE retry_after_ms END";

// ---------------------------------------------------------------------------------------
// fixed_window and sliding_window, on quota_windows.
//
// Inputs: maximum (= capacity), period_ms, cost, now; the row's s_window_key, s_period,
// s_used, s_previous, s_denied, s_seen (NULL for an owner without state).
// The row counts in window row_key: its window_key, or, when the period has changed since it
// was written, the window that holds its seen_ms. Its used counts if that is the current
// window k = floor(t / period_ms); it becomes the previous window's count if row_key = k - 1.
// `rest` = (k + 1) * period_ms - t is what remains of the current window (P - e in the
// docs). The algorithms differ only in the expressions of kFixedWindow and kSlidingWindow.
// Counts saturate at 2^62 (reached only after millions of records of the largest cost).
constexpr const char* kWindowDecision = R"(
  SELECT *,
    max({remaining}, 0) AS remaining,
    {reason} AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE {retry} END AS retry_after_ms,
    {reset_at} AS reset_at_ms,
    {shown_used} AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed{carry},
      min(used + CASE WHEN {recorded} THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + ({denied}) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before{carry},
        {allowed} AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before{carry},
          CASE WHEN row_key = window_key THEN s_used{take} ELSE 0 END AS used,
          CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                       ELSE 0 END AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous{carry},
            t / period_ms AS window_key, period_ms - t % period_ms AS rest,
            CASE WHEN s_period = period_ms THEN s_window_key
                 ELSE s_seen / period_ms END AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t
            FROM ({inputs})
          ) {barrier}
        )
      ) {barrier}
    )
  ))";

struct WindowExpressions {
  const char* allowed;     // given cost <= capacity: may `cost` be added to `used` now?
  const char* remaining;   // units left after the operation (clamped at 0 by the template)
  const char* retry;       // the wait of a denied request whose cost fits the capacity
  const char* reset_at;    // when usage is back to zero
  const char* shown_used;  // `used` as check and usage show it
};

// fixed_window: usage is the current window's count.
constexpr WindowExpressions kFixedWindow = {
    "used + cost <= maximum",
    "maximum - used_after",
    "(window_key + 1) * period_ms - t",
    "CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END",
    "used_after",
};

// ceil(r * rest / P) for r = previous_used % period_ms (< P) and rest (<= P), exact for every
// period up to 2^35 ms (kPeriodBound is below): rest is split at H = 2^18 into a * H + b, so
// r * rest = x * H + r * b with x = r * a < 2^52, and x = (x / P) * P + x % P leaves
// ceil(r * rest / P) = (x / P) * H + ceil(((x % P) * H + r * b) / P), every term below 2^54.
// migrations/0006_long_sliding_windows.sql computes quota_usage's `used` the same way.
constexpr const char* kWeightedRest =
    "((previous_used % period_ms) * (rest / 262144) / period_ms) * 262144"
    " + (((previous_used % period_ms) * (rest / 262144)) % period_ms * 262144"
    " + (previous_used % period_ms) * (rest % 262144) + period_ms - 1) / period_ms";

// sliding_window: usage is cur + prev * (P - e) / P, decided exactly in integers as
// prev * rest <= (maximum - cur - cost) * P, where the right side is at most maximum * P
// (<= 2^62 by the limit's definition) and the left side is compared by division, so that no
// product can overflow whatever prev is.
// A denied request waits inside the current window when the previous window's weight alone
// is in the way: until prev * (rest - d) <= (maximum - need) * P, need = used_after + cost.
// Otherwise it waits into the next window, where this window's count weighs as prev did:
// e'' = P - floor((maximum - cost) * P / used_after) into it, or the whole of it when that
// floor is 0.
// The usage shown, cur + ceil(prev * rest / P), is (prev / P) * rest plus the rounded-up
// weight of r = prev % P, computed by kWeightedRest without the product r * rest, which is
// beyond 64 bits for periods above 35 days.
constexpr WindowExpressions kSlidingWindow = {
    "CASE WHEN used + cost <= maximum"
    "     THEN previous_used <= ((maximum - used - cost) * period_ms) / rest ELSE 0 END",
    "CASE WHEN used_after >= maximum THEN 0"
    "     WHEN previous_used > ((maximum - used_after) * period_ms) / rest THEN 0"
    "     ELSE ((maximum - used_after) * period_ms - previous_used * rest) / period_ms END",
    "CASE WHEN used_after + cost <= maximum AND previous_used > 0"
    "          AND ((maximum - used_after - cost) * period_ms) / previous_used > 0"
    "     THEN rest - ((maximum - used_after - cost) * period_ms) / previous_used"
    "     ELSE rest + CASE WHEN used_after = 0 THEN 0"
    "                      ELSE max(0, period_ms - ((maximum - cost) * period_ms) / used_after)"
    "                 END END",
    "CASE WHEN used_after > 0 THEN (window_key + 2) * period_ms"
    "     WHEN previous_used > 0 THEN (window_key + 1) * period_ms ELSE t END",
    "used_after + (previous_used / period_ms) * rest + {weighted_rest}",
};

constexpr const char* kWindowCheckInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {cost} AS cost, {now_parameter} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_windows AS s ON s.limit_name = l.name AND s.owner = :owner{overrides}
      WHERE l.name = :limit AND l.algorithm = '{algorithm}')";

constexpr const char* kWindowUpdateInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {request}, excluded.seen_ms AS now, {policy} AS policy, l.shadow AS shadow,
             quota_windows.window_key AS s_window_key, quota_windows.period_ms AS s_period,
             quota_windows.used AS s_used, quota_windows.previous_used AS s_previous,
             quota_windows.denied AS s_denied, quota_windows.seen_ms AS s_seen
      FROM (SELECT 1)
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = '{algorithm}'{overrides})";

// ---------------------------------------------------------------------------------------
// token_bucket, on quota_buckets.
//
// Inputs: maximum, period_ms, capacity (the burst), cost, now; the row's s_level, s_period,
// s_denied, s_seen (NULL for an owner without state: a full bucket).
// level is tokens * period_ms, so a refill of maximum tokens per period adds exactly
// maximum units per millisecond. `start` is the row's level under the limit as it is now:
// clamped to the capacity, or re-scaled to whole tokens when the period has changed. The
// refill compares the elapsed time with the time to fill instead of multiplying, so no
// product exceeds capacity * period_ms (<= 2^61 by the limit's definition); a debt is
// floored at -2^62, two records of the whole capacity, so every sum of a level and a debt
// stays below 2^63.
constexpr const char* kBucketDecision = R"(
  SELECT *,
    max(level_after / period_ms, 0) AS remaining,
    {reason} AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1
         ELSE (cost * period_ms - level_after - 1) / maximum + 1 END AS retry_after_ms,
    CASE WHEN level_after >= full THEN t
         ELSE t + (full - level_after - 1) / maximum + 1 END AS reset_at_ms,
    capacity - CASE WHEN level_after >= 0 THEN level_after / period_ms
                    ELSE -((period_ms - 1 - level_after) / period_ms) END AS shown_used
  FROM (
    SELECT *,
      CASE WHEN NOT ({recorded}) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END AS level_after,
      denied_before + ({denied}) AS denied
    FROM (
      SELECT *,
        {allowed} AS allowed
      FROM (
        SELECT *, {level} AS level
        FROM (
          SELECT *,
            CASE WHEN s_level IS NULL THEN full ELSE {start} END AS start,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, max(now, coalesce(s_seen, 0)) AS t, capacity * period_ms AS full
            FROM ({inputs}) {barrier}
          ) {barrier}
        ) {barrier}
      )
    ) {barrier}
  ))";

// A stored level under the limit as it is now: clamped to the capacity, or re-scaled to
// whole tokens (rounded down, a debt floored) when the period has changed.
constexpr const char* kBucketStart = R"(CASE
                 WHEN {row_period} = {period} THEN min({level}, {capacity} * {period})
                 WHEN {level} / {row_period} >= {capacity} THEN {capacity} * {period}
                 ELSE max(CASE WHEN {level} >= 0 THEN {level} / {row_period}
                               ELSE -(({row_period} - 1 - {level}) / {row_period}) END,
                          -(4611686018427387904 / {period})) * {period} END)";

// The level refilled from s_seen to t, at most full.
constexpr const char* kBucketRefill = R"(CASE WHEN start >= full THEN full
               WHEN t - coalesce(s_seen, t) >= (full - start - 1) / maximum + 1 THEN full
               ELSE start + maximum * (t - coalesce(s_seen, t)) END)";

// A row that no request has written yet (seen_ms NULL, made by the "new owner" trigger with
// the limit's burst) reads as no row: a full bucket of the owner's own capacity.
constexpr const char* kBucketCheckInputs = R"(
      SELECT {maximum} AS maximum, {capacity} AS capacity, l.period_ms AS period_ms,
             {cost} AS cost, {now_parameter} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             s.level AS s_level, s.period_ms AS s_period, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_buckets AS s ON s.limit_name = l.name AND s.owner = :owner{overrides}
      WHERE l.name = :limit AND l.algorithm = '{algorithm}')";

constexpr const char* kBucketUpdateInputs = R"(
      SELECT {maximum} AS maximum, {capacity} AS capacity, l.period_ms AS period_ms,
             {request}, excluded.seen_ms AS now, {policy} AS policy, l.shadow AS shadow,
             CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
             quota_buckets.period_ms AS s_period,
             quota_buckets.denied AS s_denied, quota_buckets.seen_ms AS s_seen
      FROM (SELECT 1)
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = '{algorithm}'{overrides})";

// ---------------------------------------------------------------------------------------
// sliding_log, on quota_log_owners (one row per owner) and quota_log (its events).
//
// Inputs: maximum, period_ms, cost, now, the owner's key (key_limit, key_owner) and its
// row's s_total, s_newest_at, s_denied, s_seen (NULL for an owner without state).
// Usage at t is s_total minus live_base, the running total before the first event with
// at_ms > t - period_ms (NULL when none is live). After a denial, `excess` units must
// expire (computed outside the subquery that searches quota_log, whose own cost column
// would otherwise shadow the request's): the wait is until the first event whose running total
// covers them, or until the event this request records (at t) when a record overdraws past every
// older event.
constexpr const char* kLogDecision = R"(
  SELECT *,
    max(maximum - used_after, 0) AS remaining,
    {reason} AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         ELSE coalesce((SELECT e.at_ms FROM quota_log AS e
                        WHERE e.limit_name = key_limit AND e.owner = key_owner
                          AND e.at_ms > t - period_ms
                          AND e.total - live_base >= excess
                        ORDER BY e.at_ms LIMIT 1), t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE {newest} + period_ms END AS reset_at_ms,
    {total} AS total,
    CASE WHEN recorded > 0 THEN t ELSE {newest} END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + ({denied}) AS denied
    FROM (
      SELECT *, CASE WHEN {recorded} THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, {allowed} AS allowed
        FROM (
          SELECT *, {used} AS used
          FROM (
            SELECT *,
              (SELECT e.total - e.cost FROM quota_log AS e
               WHERE e.limit_name = key_limit AND e.owner = key_owner
                 AND e.at_ms > t - period_ms
               ORDER BY e.at_ms LIMIT 1) AS live_base,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, max(now, coalesce(s_seen, 0)) AS t
              FROM ({inputs}) {barrier}
            ) {barrier}
          )
        )
      ) {barrier}
    )
  ))";

constexpr const char* kLogCheckInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {cost} AS cost, {now_parameter} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.name AS key_limit, :owner AS key_owner,
             s.total AS s_total, s.newest_at_ms AS s_newest_at, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_log_owners AS s ON s.limit_name = l.name AND s.owner = :owner{overrides}
      WHERE l.name = :limit AND l.algorithm = '{algorithm}')";

constexpr const char* kLogUpdateInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {request}, excluded.seen_ms AS now, {policy} AS policy, l.shadow AS shadow,
             excluded.limit_name AS key_limit,
             excluded.owner AS key_owner, quota_log_owners.total AS s_total,
             quota_log_owners.newest_at_ms AS s_newest_at,
             quota_log_owners.denied AS s_denied, quota_log_owners.seen_ms AS s_seen
      FROM (SELECT 1)
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = '{algorithm}'{overrides})";

// The sliding log's parts that a refund changes: usage, the running total and the newest
// event's time. A refund gives back the newest events first, down to the running total
// live_base + used, and the newest event left is the first one that reaches that total.
struct LogParts {
  const char* used;
  const char* total;
  const char* newest;
};

constexpr LogParts kLogRecord = {
    "coalesce(s_total - live_base, 0)",
    "CASE WHEN recorded = 0 THEN s_total WHEN used = 0 THEN recorded "
    "ELSE s_total + recorded END",
    "s_newest_at",
};

constexpr LogParts kLogRefund = {
    "max(coalesce(s_total - live_base, 0) - refund, 0)",
    "coalesce(live_base + used, s_total)",
    "coalesce((SELECT e.at_ms FROM quota_log AS e"
    " WHERE e.limit_name = key_limit AND e.owner = key_owner"
    " AND e.total >= live_base + used ORDER BY e.at_ms LIMIT 1), s_newest_at)",
};

// ---------------------------------------------------------------------------------------

// The statement of a consume or record: the request in VALUES, the decision in DO UPDATE.
// {table} is the family's state table, {columns} its state columns and {values} the
// decision's columns written to them, in the same order.
constexpr const char* kWrite = R"(INSERT INTO {table} (limit_name, owner, cost, seen_ms, maximum)
VALUES (:limit, :owner, {cost}, {now_parameter}, 0)
ON CONFLICT (limit_name, owner) DO UPDATE SET
  ({columns}, seen_ms, cost, maximum, period_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms{more}) =
  (SELECT {values}, t, cost, maximum, period_ms,
          {granted}, reason, {remaining}, {retry}, reset_at_ms{more_values}
   FROM ({decision}))
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied)";

constexpr const char* kCheck = R"(SELECT allowed, reason, {remaining} AS remaining,
  {retry} AS retry_after_ms, reset_at_ms, denied, 0 AS shadow_denied, shown_used AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity
FROM ({decision}))";

// The answer's reason, the same for every algorithm.
constexpr const char* kReason =
    "CASE WHEN allowed THEN 'ok' WHEN policy IS 'deny' THEN 'owner_denied' "
    "WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END";

// reset: a request row whose trigger deletes the owner's state for the limit, then itself.
constexpr const char* kReset = R"(INSERT INTO quota_resets (limit_name, owner, now_ms, remaining)
VALUES (:limit, :owner, {now_parameter},
        (SELECT CASE l.algorithm WHEN 'token_bucket' THEN {burst}
                                 WHEN 'sliding_window' THEN {bounded_maximum}
                                 ELSE {maximum} END
         FROM quota_limits AS l{overrides}
         WHERE l.name = :limit))
RETURNING 1 AS allowed, 'ok' AS reason, remaining, 0 AS retry_after_ms,
  now_ms AS reset_at_ms, 0 AS denied, 0 AS shadow_denied)";

struct Family {
  const char* decision;
  const char* check_inputs;
  const char* update_inputs;
  const char* table;    // the state table a consume or record writes
  const char* columns;  // its algorithm-specific state columns...
  const char* values;   // ...and the decision's columns written to them
  const char* fits;     // given cost <= capacity, may `cost` be taken now? (kAllowed)
  const WindowExpressions* window = nullptr;  // the window algorithms' own expressions
};

constexpr const char* kLogColumns = "total, newest_at_ms, recorded, denied";
constexpr const char* kLogValues = "total, newest_at_ms, recorded, denied";
constexpr const char* kWindowColumns = "window_key, used, previous_used, denied";
constexpr const char* kWindowValues = "window_key, used_after, previous_used, denied";
constexpr const char* kBucketColumns = "level, denied, burst";
constexpr const char* kBucketValues = "level_after, denied, capacity";

Family family_of(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::sliding_log:
      return {kLogDecision, kLogCheckInputs, kLogUpdateInputs,        "quota_log_owners",
              kLogColumns,  kLogValues,      "used + cost <= maximum"};
    case Algorithm::fixed_window:
      return {kWindowDecision, kWindowCheckInputs, kWindowUpdateInputs,  "quota_windows",
              kWindowColumns,  kWindowValues,      kFixedWindow.allowed, &kFixedWindow};
    case Algorithm::sliding_window:
      return {kWindowDecision, kWindowCheckInputs, kWindowUpdateInputs,    "quota_windows",
              kWindowColumns,  kWindowValues,      kSlidingWindow.allowed, &kSlidingWindow};
    case Algorithm::token_bucket:
      return {kBucketDecision, kBucketCheckInputs, kBucketUpdateInputs,        "quota_buckets",
              kBucketColumns,  kBucketValues,      "level >= cost * period_ms"};
  }
  throw std::logic_error("unknown algorithm");
}

std::string now_parameter() {
  return fmt::format(fmt::runtime(kNow), fmt::arg("now", kDatabaseNow));
}

std::string override_joins(std::string_view limit, std::string_view owner) {
  return fmt::format(fmt::runtime(kOverrideJoins), fmt::arg("limit", limit),
                     fmt::arg("owner", owner));
}

std::string build_reset() {
  return fmt::format(fmt::runtime(kReset), fmt::arg("now_parameter", now_parameter()),
                     fmt::arg("burst", burst_for_owner()),
                     fmt::arg("bounded_maximum", maximum_for_owner(Algorithm::sliding_window)),
                     fmt::arg("maximum", maximum_for_owner(Algorithm::sliding_log)),
                     fmt::arg("overrides", override_joins(":limit", ":owner")));
}

// What a write adds to the SET list of kWrite beyond the family's columns: consume counts
// shadow denials, a sliding_log refund hands its trigger the units given back.
struct MoreColumns {
  std::string columns;
  std::string values;
};

MoreColumns more_columns(Operation operation, const Family& family) {
  if (operation == Operation::consume) {
    return {", shadow_denied",
            fmt::format(", {}.shadow_denied + (NOT allowed AND shadow)", family.table)};
  }
  if (operation == Operation::refund && family.decision == kLogDecision) {
    return {", refunded", ", s_total - total"};
  }
  return {};
}

std::string build(Operation operation, Algorithm algorithm) {
  if (operation == Operation::reset) return build_reset();
  const Family family = family_of(algorithm);
  const OperationParts parts = parts_of(operation);
  const bool check = operation == Operation::check;
  const bool refund = operation == Operation::refund;
  const std::string inputs = fmt::format(
      fmt::runtime(check ? family.check_inputs : family.update_inputs), fmt::arg("cost", kCost),
      fmt::arg("now_parameter", now_parameter()), fmt::arg("algorithm", to_string(algorithm)),
      fmt::arg("request", parts.request), fmt::arg("policy", kPolicy),
      fmt::arg("maximum", maximum_for_owner(algorithm)), fmt::arg("capacity", burst_for_owner()),
      fmt::arg("overrides", check ? override_joins(":limit", ":owner")
                                  : override_joins("excluded.limit_name", "excluded.owner")));
  const LogParts& log = refund ? kLogRefund : kLogRecord;
  const std::string level =
      refund ? fmt::format("min({} + min(refund, capacity) * period_ms, full)", kBucketRefill)
             : std::string(kBucketRefill);
  // What the window layers, which pass on only the columns later layers use, carry for the
  // policies: the owner's policy and the shadow flag, the refund, check's shadow count.
  const std::string carry = std::string(", policy, shadow") + (refund ? ", refund" : "") +
                            (check ? ", s_shadow_denied" : "");
  const WindowExpressions none{};
  const WindowExpressions& window = family.window ? *family.window : none;
  const std::string decision = fmt::format(
      fmt::runtime(family.decision), fmt::arg("inputs", inputs),
      fmt::arg("recorded", parts.recorded), fmt::arg("denied", parts.denied),
      fmt::arg("barrier", kBarrier), fmt::arg("reason", kReason),
      fmt::arg("allowed", fmt::format(fmt::runtime(kAllowed), fmt::arg("fits", family.fits))),
      fmt::arg("remaining", window.remaining ? window.remaining : ""),
      fmt::arg("retry", window.retry ? window.retry : ""),
      fmt::arg("reset_at", window.reset_at ? window.reset_at : ""),
      fmt::arg("shown_used", window.shown_used
                                 ? fmt::format(fmt::runtime(window.shown_used),
                                               fmt::arg("weighted_rest", kWeightedRest))
                                 : ""),
      fmt::arg("start", bucket_start("s_level", "s_period", "period_ms", "capacity")),
      fmt::arg("take", refund ? " - min(s_used, refund)" : ""), fmt::arg("level", level),
      fmt::arg("carry", carry), fmt::arg("used", log.used), fmt::arg("total", log.total),
      fmt::arg("newest", log.newest));
  if (check) {
    return fmt::format(fmt::runtime(kCheck), fmt::arg("decision", decision),
                       fmt::arg("remaining", kAnswerRemaining), fmt::arg("retry", kAnswerRetry));
  }
  const MoreColumns more = more_columns(operation, family);
  return fmt::format(fmt::runtime(kWrite), fmt::arg("table", family.table),
                     fmt::arg("columns", family.columns), fmt::arg("values", family.values),
                     fmt::arg("decision", decision), fmt::arg("cost", kCost),
                     fmt::arg("now_parameter", now_parameter()), fmt::arg("granted", parts.granted),
                     fmt::arg("remaining", kAnswerRemaining), fmt::arg("retry", kAnswerRetry),
                     fmt::arg("more", more.columns), fmt::arg("more_values", more.values));
}

}  // namespace

std::string bucket_start(std::string_view level, std::string_view row_period,
                         std::string_view period, std::string_view capacity) {
  return fmt::format(fmt::runtime(kBucketStart), fmt::arg("level", level),
                     fmt::arg("row_period", row_period), fmt::arg("period", period),
                     fmt::arg("capacity", capacity));
}

const std::string& statement(Operation operation, Algorithm algorithm) {
  static const auto table = [] {
    std::array<std::array<std::string, 4>, 5> built;
    for (Operation op : {Operation::check, Operation::consume, Operation::record, Operation::reset,
                         Operation::refund}) {
      for (Algorithm algo : {Algorithm::sliding_log, Algorithm::fixed_window,
                             Algorithm::sliding_window, Algorithm::token_bucket}) {
        built[static_cast<int>(op)][static_cast<int>(algo)] = build(op, algo);
      }
    }
    return built;
  }();
  const std::string& text = table[static_cast<int>(operation)][static_cast<int>(algorithm)];
  if (text.empty()) throw std::logic_error("no statement for this algorithm");
  return text;
}

const char* state_table(Algorithm algorithm) { return family_of(algorithm).table; }

const char* operation_name(Operation operation) {
  switch (operation) {
    case Operation::check:
      return "check";
    case Operation::consume:
      return "consume";
    case Operation::record:
      return "record";
    case Operation::reset:
      return "reset";
    case Operation::refund:
      return "refund";
  }
  return "?";
}

}  // namespace quota::detail
