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
//   consume :now=4000  -> evaluated at 5500 (seen_ms): allowed 0, retry 2000 (from 4000)
// tests/common/engine_test.cpp and tests/sqlite/sqlite_sql_test.cpp run these examples.
#include "statements.h"

#include <fmt/format.h>

#include <array>
#include <regex>
#include <stdexcept>

namespace quota::detail {
namespace {

// Every template is formatted with the names of the dialect's fragments (src/sql/dialect.h)
// standing for themselves, so that the fragments pass unchanged through the layers of a
// statement; `finish` fills them in once the statement is whole. No SQL here uses braces.
template <typename... Args>
std::string expand(std::string_view text, Args&&... args) {
  return fmt::format(
      fmt::runtime(text), std::forward<Args>(args)..., fmt::arg("max", "{max}"),
      fmt::arg("min", "{min}"), fmt::arg("barrier", "{barrier}"),
      fmt::arg("database_now", "{database_now}"), fmt::arg("as_integer", "{as_integer}"),
      fmt::arg("limit", "{limit}"), fmt::arg("owner", "{owner}"),
      fmt::arg("cost", "{cost}"), fmt::arg("now_ms", "{now_ms}"),
      fmt::arg("live_base", "{live_base}"), fmt::arg("covering_event", "{covering_event}"),
      fmt::arg("newest_kept", "{newest_kept}"), fmt::arg("request_cost", "{request_cost}"),
      fmt::arg("request_now", "{request_now}"));
}

std::string finish(std::string_view text, const Dialect& dialect) {
  return fmt::format(
      fmt::runtime(text), fmt::arg("max", dialect.max), fmt::arg("min", dialect.min),
      fmt::arg("barrier", dialect.barrier), fmt::arg("database_now", dialect.database_now),
      fmt::arg("as_integer", dialect.as_integer), fmt::arg("limit", dialect.limit),
      fmt::arg("owner", dialect.owner), fmt::arg("cost", dialect.cost),
      fmt::arg("now_ms", dialect.now_ms), fmt::arg("live_base", dialect.live_base),
      fmt::arg("covering_event", dialect.covering_event),
      fmt::arg("newest_kept", dialect.newest_kept),
      fmt::arg("request_cost", dialect.request_cost), fmt::arg("request_now", dialect.request_now));
}

// What each operation records and counts, given the decision's `allowed` (the verdict as if
// enforcing), the owner's override `policy` and the limit's `shadow` flag.
// Each may name {blocked}, whether a block holds (kBlocked).
struct OperationParts {
  const char* recorded;       // does this operation record the cost?
  const char* denied;         // does it add one to the owner's denied counter?
  const char* granted;        // the answer's allowed
  const char* request;        // the inputs' request columns: cost (and refund)
  const char* blocked_until;  // the end of the owner's block after it (NULL: none)
  const char* started;        // a WHEN of the answer's wait, for a denial that starts a block
};

constexpr const char* kRequest = "excluded.cost AS cost";

// A block (Limit::block) holds while t is before its end, on a limit that has a block and is
// not in shadow mode, for an owner that is not exempt. `allowed` stays the algorithm's (and
// the override's) verdict, so that a blocked answer's wait is the longer of the block's and
// the algorithm's own: the exact smallest wait, as always. A consume denied as rate_limited
// starts a block (never in shadow mode) and answers a wait of at least the block; a blocked
// operation keeps the end it found; any other write clears an end that has passed.
constexpr const char* kBlocked =
    "coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow "
    "AND policy IS DISTINCT FROM 'exempt', FALSE)";
constexpr const char* kBlockKept = "CASE WHEN {blocked} THEN s_blocked_until END";
constexpr const char* kBlockStarted =
    "CASE WHEN {blocked} THEN s_blocked_until "
    "WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END";

// `text` with {blocked} written out.
std::string with_block(std::string_view text) {
  return expand(text, fmt::arg("blocked", kBlocked));
}

OperationParts parts_of(Operation operation) {
  switch (operation) {
    case Operation::check:
      return {"FALSE", "FALSE", "allowed AND NOT {blocked}", "", kBlockKept, ""};
    case Operation::consume:
      // Shadow mode: never denied, and a would-be denial is counted in shadow_denied.
      return {"allowed AND NOT {blocked} AND policy IS DISTINCT FROM 'exempt'",
              "(NOT allowed OR {blocked}) AND NOT shadow",
              "(allowed AND NOT {blocked}) OR shadow",
              kRequest,
              kBlockStarted,
              "WHEN reason = 'rate_limited' AND NOT shadow "
              "THEN {max}(retry_after_ms, coalesce(block_ms, 0)){caller} "};
    case Operation::record:
      return {"policy IS DISTINCT FROM 'exempt'",
              "FALSE",
              "allowed AND NOT {blocked}",
              kRequest,
              kBlockKept,
              ""};
    case Operation::refund:
      // The refund itself is the decision's {take}; the answer is a check of cost 1.
      return {
          "FALSE",    "FALSE", "allowed AND NOT {blocked}", "1 AS cost, excluded.cost AS refund",
          kBlockKept, ""};
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
      bounded ? expand("{min}({}, 4611686018427387904 / l.period_ms)", kOverrideMaximum)
              : std::string(kOverrideMaximum);
  return expand(kMaximumForOwner, fmt::arg("bounded", value));
}

// A token bucket's capacity as the owner sees it (an override without a burst: its maximum).
std::string burst_for_owner() {
  return expand(
      "CASE coalesce(o.policy, a.policy) WHEN 'maximum' "
      "THEN {min}({}, 2305843009213693952 / l.period_ms) ELSE l.burst END",
      kOverrideBurst);
}

// The verdict as if enforcing, the same for every algorithm: an exempt owner is always
// allowed, a denied one never, any other when the cost fits the capacity and {fits}, the
// family's test of whether `cost` may be taken now. A block (kBlocked) comes on top.
constexpr const char* kAllowed =
    "CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE ELSE cost <= capacity AND {fits} "
    "END";

// The answer's remaining and retry_after_ms under the owner's policy and block: an exempt
// owner has the whole capacity, a denied one nothing and never a retry, a blocked one nothing
// until its block ends.
// Every wait above is measured from t, the time the owner's state was evaluated at; the
// answer measures a finite wait from the caller's own time `now` (docs/concepts.md, "Time"),
// which is t - now earlier when the caller's clock is behind the owner's remembered time:
// {caller} adds that to each branch whose wait is finite and positive. 0 and -1 stay.
constexpr const char* kAnswerRemaining =
    "CASE policy WHEN 'exempt' THEN capacity WHEN 'deny' THEN 0 "
    "ELSE CASE reason WHEN 'blocked' THEN 0 ELSE remaining END END";
constexpr const char* kAnswerRetry =
    "CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 "
    "WHEN reason = 'blocked' AND retry_after_ms >= 0 "
    "THEN {max}(s_blocked_until - t, retry_after_ms){caller} {started}"
    "WHEN retry_after_ms > 0 THEN retry_after_ms{caller} ELSE retry_after_ms END";
constexpr const char* kFromCaller = " + (t - now)";

// kAnswerRetry for `parts`' operation.
std::string answer_retry(const OperationParts& parts) {
  return expand(kAnswerRetry,
                fmt::arg("started", expand(parts.started, fmt::arg("caller", kFromCaller))),
                fmt::arg("caller", kFromCaller));
}

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
    {max}({remaining}, 0) AS remaining,
    {reason} AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1 ELSE {retry} END AS retry_after_ms,
    {reset_at} AS reset_at_ms,
    {shown_used} AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed{carry},
      {min}(used + CASE WHEN {recorded} THEN cost ELSE 0 END, 4611686018427387904) AS used_after,
      denied_before + {as_integer}({denied}) AS denied
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
            {window_key} AS window_key, period_ms - t % period_ms AS rest,
            {row_key} AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, {max}(now, coalesce(s_seen, 0)) AS t
            FROM ({inputs}) AS inputs
          ) AS clocked {barrier}
        ) AS keyed
      ) AS counted {barrier}
    ) AS decided
  ) AS written)";

struct WindowExpressions {
  const char* allowed;     // given cost <= capacity: may `cost` be added to `used` now?
  const char* remaining;   // units left after the operation (clamped at 0 by the template)
  const char* retry;       // the wait of a denied request whose cost fits the capacity
  const char* reset_at;    // when usage is back to zero
  const char* shown_used;  // `used` as check and usage show it
};

// fixed_window: usage is the current window's count; the window ends at {window_end}.
constexpr WindowExpressions kFixedWindow = {
    "used + cost <= maximum",
    "maximum - used_after",
    "{window_end} - t",
    "CASE WHEN used_after > 0 THEN {window_end} ELSE t END",
    "used_after",
};

// Where the window layers of kWindowDecision differ between windows of period_ms from the
// epoch and calendar windows (StatementKind::calendar_window): the inputs' extra column, the
// current window's key, the owner row's, and the current window's end.
struct WindowLayout {
  const char* input;       // the inputs' column(s) of the layout, each followed by ", "
  const char* window_key;  // the key of the window that holds t
  const char* row_key;     // the key of the window the row's counts belong to
  const char* window_end;  // the end of the window that holds t (given window_key)
};

// Windows of period_ms: window k = floor(t / period_ms); a row written under another period
// counts in the window that holds its seen_ms.
constexpr WindowLayout kPeriodWindows = {
    "",
    "t / period_ms",
    "CASE WHEN s_period = period_ms THEN s_window_key ELSE s_seen / period_ms END",
    "(window_key + 1) * period_ms",
};

// Calendar windows: a window's key is its end (the inputs' calendar_end, kCalendarInput).
constexpr WindowLayout kCalendarWindows = {
    "{calendar} AS calendar_end, ",
    "calendar_end",
    "s_window_key",
    "window_key",
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
    "     THEN previous_used <= ((maximum - used - cost) * period_ms) / rest ELSE FALSE END",
    "CASE WHEN used_after >= maximum THEN 0"
    "     WHEN previous_used > ((maximum - used_after) * period_ms) / rest THEN 0"
    "     ELSE ((maximum - used_after) * period_ms - previous_used * rest) / period_ms END",
    "CASE WHEN used_after + cost <= maximum AND previous_used > 0"
    "          AND ((maximum - used_after - cost) * period_ms) / previous_used > 0"
    "     THEN rest - ((maximum - used_after - cost) * period_ms) / previous_used"
    "     ELSE rest + CASE WHEN used_after = 0 THEN 0"
    "                      ELSE {max}(0, period_ms - ((maximum - cost) * period_ms) / used_after)"
    "                 END END",
    "CASE WHEN used_after > 0 THEN (window_key + 2) * period_ms"
    "     WHEN previous_used > 0 THEN (window_key + 1) * period_ms ELSE t END",
    "used_after + (previous_used / period_ms) * rest + {weighted_rest}",
};

// ---------------------------------------------------------------------------------------
// Calendar windows (Limit::calendar, migrations/0008_calendar_periods.sql).
//
// A calendar limit's owner row keeps in window_key the end of the window it counts (Unix ms).
// The inputs' calendar_end is NULL for a limit without a calendar; for a calendar limit it is
// the row's window_key while t is before it, by no more than the unit's longest window
// (period_ms) (the row's window still holds: no arithmetic), else the end of the window that
// holds t, computed by kCalendarEnd from the configuration. So a change of the limit's
// anchor or offset applies to each owner from the end of the window it counts, and so does a
// change to a longer unit; a change to a shorter unit (a year to a day) ends windows longer
// than the new unit at once.
// The window decision then takes calendar_end as the window's key and end.
constexpr const char* kCalendarInput =
    "CASE WHEN l.calendar IS NULL THEN NULL "
    "WHEN {t} < {row}.window_key AND {row}.window_key <= {t} + l.period_ms "
    "THEN {row}.window_key ELSE {calendar_end} END";

// The end of the window that holds t (in `t`), from the limit `l`'s calendar, utc_offset_ms
// and anchor (the owner's for the limit, else its '*' one, else the limit's), at local time
// lt = t + offset and local anchor at = anchor + offset (default: 1970-01-01 00:00, a
// Thursday and the 1st of January; a week's default is Monday 1970-01-05 00:00).
//   day, week: the window starts at lt - ((lt - at) mod U), U = 1 or 7 days.
//   month, year: both days, floor(lt / day) and floor(at / day), are turned into a month
//     index (year * 12 + month - 1) and a day of the month by Howard Hinnant's
//     civil_from_days (integer arithmetic, exact for every date: z is the day counted from
//     0000-03-01, era its 400-year cycle, yoe the year in it, doy the day of its March-based
//     year, mp the month from March). A window starts in month b, at the anchor's day of the
//     month (at most b's last day, which is how the 29th-31st and 29 February fall) and time
//     of day; b is lt's month (month) or the anchor's month of lt's year (year). The window
//     holding lt ends at b's start when lt is before it, else at the start in b + 1 (month)
//     or b + 12 (year). {first_day} is days_from_civil of a month's 1st.
// Each step is a common table expression behind a barrier, so that it is computed once; a
// chain of them, unlike nested subqueries, keeps the statement within SQLite's parser depth.
constexpr const char* kCalendarEnd = R"((WITH
  calendar_request AS (
    SELECT l.calendar AS unit, l.utc_offset_ms AS off, {time} + l.utc_offset_ms AS lt,
      coalesce(
        (SELECT n.anchor_ms FROM quota_anchors AS n
         WHERE n.limit_name = l.name AND n.owner = {anchor_owner}),
        (SELECT n.anchor_ms FROM quota_anchors AS n
         WHERE n.limit_name = '*' AND n.owner = {anchor_owner}),
        l.anchor_ms, CASE l.calendar WHEN 'week' THEN 345600000 ELSE 0 END - l.utc_offset_ms)
      + l.utc_offset_ms AS at {barrier}),
  calendar_years AS (
    SELECT unit, off, lt, at, (at % 86400000 + 86400000) % 86400000 AS atod,
      {l_z} AS l_z, {a_z} AS a_z,
      ({l_z} % 146097 - ({l_z} % 146097) / 1460 + ({l_z} % 146097) / 36524
       - ({l_z} % 146097) / 146096) / 365 AS l_yoe,
      ({a_z} % 146097 - ({a_z} % 146097) / 1460 + ({a_z} % 146097) / 36524
       - ({a_z} % 146097) / 146096) / 365 AS a_yoe
    FROM calendar_request {barrier}),
  calendar_dates AS (
    SELECT unit, off, lt, at, atod, l_z, l_yoe,
      l_z % 146097 - (365 * l_yoe + l_yoe / 4 - l_yoe / 100) AS l_doy,
      a_z % 146097 - (365 * a_yoe + a_yoe / 4 - a_yoe / 100) AS a_doy
    FROM calendar_years {barrier}),
  calendar_bases AS (
    SELECT unit, off, lt, at, atod,
      a_doy - (153 * ((5 * a_doy + 2) / 153) + 2) / 5 + 1 AS dom,
      CASE unit WHEN 'year'
        THEN (((l_yoe + (l_z / 146097) * 400) * 12 + (5 * l_doy + 2) / 153 + 2) / 12) * 12
             + ((5 * a_doy + 2) / 153 + 2) % 12
        ELSE (l_yoe + (l_z / 146097) * 400) * 12 + (5 * l_doy + 2) / 153 + 2 END AS b,
      CASE unit WHEN 'year' THEN 12 ELSE 1 END AS step
    FROM calendar_dates {barrier}),
  calendar_firsts AS (
    SELECT unit, off, lt, at, atod, dom, {fd0} AS fd0, {fd1} AS fd1, {fdn} AS fdn,
      {fdn1} AS fdn1
    FROM calendar_bases {barrier})
  SELECT CASE
      WHEN unit = 'day' THEN lt - ((lt - at) % 86400000 + 86400000) % 86400000 + 86400000
      WHEN unit = 'week' THEN lt - ((lt - at) % 604800000 + 604800000) % 604800000 + 604800000
      WHEN lt >= (fd0 + {min}(dom, fd1 - fd0) - 1) * 86400000 + atod
      THEN (fdn + {min}(dom, fdn1 - fdn) - 1) * 86400000 + atod
      ELSE (fd0 + {min}(dom, fd1 - fd0) - 1) * 86400000 + atod
    END - off
  FROM calendar_firsts))";

// days_from_civil of the 1st of month index m (year * 12 + month - 1, March-based inside:
// q = m - 2 counts months from 0000-03-01), for a month index >= 2.
std::string first_day(std::string_view month) {
  return fmt::format(
      "((({0}) - 2) / 12 / 400) * 146097 + ((({0}) - 2) / 12 % 400) * 365"
      " + ((({0}) - 2) / 12 % 400) / 4 - ((({0}) - 2) / 12 % 400) / 100"
      " + (153 * ((({0}) - 2) % 12) + 2) / 5 - 719468",
      month);
}

// The inputs' calendar_end (kCalendarInput) over the owner's row `row` at time `t`.
std::string calendar_input(std::string_view t, std::string_view row, std::string_view owner) {
  const std::string end =
      expand(kCalendarEnd, fmt::arg("time", t), fmt::arg("anchor_owner", owner),
             fmt::arg("l_z", "((lt + 86400000) / 86400000 + 719467)"),
             fmt::arg("a_z", "((at + 86400000) / 86400000 + 719467)"),
             fmt::arg("fd0", first_day("b")), fmt::arg("fd1", first_day("b + 1")),
             fmt::arg("fdn", first_day("b + step")), fmt::arg("fdn1", first_day("b + step + 1")));
  return expand(kCalendarInput, fmt::arg("t", t), fmt::arg("row", row),
                fmt::arg("calendar_end", end));
}

constexpr const char* kWindowCheckInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {layout_input}{request_cost} AS cost, {request_now} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_windows AS s ON s.limit_name = l.name AND s.owner = {owner}{overrides}
      WHERE l.name = {limit} AND l.algorithm = '{algorithm}'{layout_test})";

constexpr const char* kWindowUpdateInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {layout_input}{request}, excluded.seen_ms AS now, {policy} AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_windows.blocked_until_ms AS s_blocked_until,
             quota_windows.window_key AS s_window_key, quota_windows.period_ms AS s_period,
             quota_windows.used AS s_used, quota_windows.previous_used AS s_previous,
             quota_windows.denied AS s_denied, quota_windows.seen_ms AS s_seen
      FROM {request_row}
      LEFT JOIN quota_limits AS l
        ON l.name = excluded.limit_name AND l.algorithm = '{algorithm}'{layout_test}{overrides})";

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
// A token bucket's level after the operation (a debt floored at -2^62), the wait of a denied
// request whose cost fits the capacity, and when the bucket is full again.
constexpr const char* kBucketTaken = R"(CASE WHEN NOT ({recorded}) THEN level
           WHEN cost > (level + 4611686018427387904) / period_ms THEN -4611686018427387904
           ELSE level - cost * period_ms END)";
constexpr const char* kBucketRetry = "(cost * period_ms - level_after - 1) / maximum + 1";
constexpr const char* kBucketResetAt = R"(CASE WHEN level_after >= full_level THEN t
         ELSE t + (full_level - level_after - 1) / maximum + 1 END)";

constexpr const char* kBucketDecision = R"(
  SELECT *,
    {max}(level_after / period_ms, 0) AS remaining,
    {reason} AS reason,
    CASE WHEN allowed THEN 0 WHEN cost > capacity THEN -1
         ELSE {bucket_retry} END AS retry_after_ms,
    {bucket_reset_at} AS reset_at_ms,
    capacity - CASE WHEN level_after >= 0 THEN level_after / period_ms
                    ELSE -((period_ms - 1 - level_after) / period_ms) END AS shown_used
  FROM (
    SELECT *,
      {bucket_taken} AS level_after,
      denied_before + {as_integer}({denied}) AS denied
    FROM (
      SELECT *,
        {allowed} AS allowed
      FROM (
        SELECT *, {level} AS level
        FROM (
          SELECT *,
            CASE WHEN s_level IS NULL THEN full_level ELSE {start} END AS start,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, {max}(now, coalesce(s_seen, 0)) AS t, capacity * period_ms AS full_level
            FROM ({inputs}) AS inputs {barrier}
          ) AS clocked {barrier}
        ) AS started {barrier}
      ) AS refilled
    ) AS decided {barrier}
  ) AS recorded)";

// A stored level under the limit as it is now: clamped to the capacity, or re-scaled to
// whole tokens (rounded down, a debt floored) when the period has changed.
constexpr const char* kBucketStart = R"(CASE
                 WHEN {row_period} = {period} THEN {min}({level}, {capacity} * {period})
                 WHEN {level} / {row_period} >= {capacity} THEN {capacity} * {period}
                 ELSE {max}(CASE WHEN {level} >= 0 THEN {level} / {row_period}
                               ELSE -(({row_period} - 1 - {level}) / {row_period}) END,
                          -(4611686018427387904 / {period})) * {period} END)";

// The level refilled from s_seen to t, at most full.
constexpr const char* kBucketRefill = R"(CASE WHEN start >= full_level THEN full_level
               WHEN t - coalesce(s_seen, t) >= (full_level - start - 1) / maximum + 1 THEN full_level
               ELSE start + maximum * (t - coalesce(s_seen, t)) END)";

// A row that no request has written yet (seen_ms NULL, made by the "new owner" trigger with
// the limit's burst) reads as no row: a full bucket of the owner's own capacity.
constexpr const char* kBucketCheckInputs = R"(
      SELECT {maximum} AS maximum, {capacity} AS capacity, l.period_ms AS period_ms,
             {request_cost} AS cost, {request_now} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.level AS s_level, s.period_ms AS s_period, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_buckets AS s ON s.limit_name = l.name AND s.owner = {owner}{overrides}
      WHERE l.name = {limit} AND l.algorithm = '{algorithm}')";

constexpr const char* kBucketUpdateInputs = R"(
      SELECT {maximum} AS maximum, {capacity} AS capacity, l.period_ms AS period_ms,
             {request}, excluded.seen_ms AS now, {policy} AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_buckets.blocked_until_ms AS s_blocked_until,
             CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
             quota_buckets.period_ms AS s_period,
             quota_buckets.denied AS s_denied, quota_buckets.seen_ms AS s_seen
      FROM {request_row}
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
    {max}(maximum - used_after, 0) AS remaining,
    {reason} AS reason,
    used_after AS shown_used,
    CASE WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         ELSE coalesce({covering_event}, t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after = 0 THEN t
         WHEN recorded > 0 THEN t + period_ms
         ELSE {newest} + period_ms END AS reset_at_ms,
    {total} AS total,
    CASE WHEN recorded > 0 THEN t ELSE {newest} END AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + {as_integer}({denied}) AS denied
    FROM (
      SELECT *, CASE WHEN {recorded} THEN cost ELSE 0 END AS recorded
      FROM (
        SELECT *, {allowed} AS allowed
        FROM (
          SELECT *, {used} AS used
          FROM (
            SELECT *,
              {live_base} AS live_base,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, {max}(now, coalesce(s_seen, 0)) AS t
              FROM ({inputs}) AS inputs {barrier}
            ) AS clocked {barrier}
          ) AS based
        ) AS counted
      ) AS decided {barrier}
    ) AS booked
  ) AS summed)";

constexpr const char* kLogCheckInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {request_cost} AS cost, {request_now} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             l.name AS key_limit, {owner} AS key_owner,
             s.total AS s_total, s.newest_at_ms AS s_newest_at, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM quota_limits AS l
      LEFT JOIN quota_log_owners AS s ON s.limit_name = l.name AND s.owner = {owner}{overrides}
      WHERE l.name = {limit} AND l.algorithm = '{algorithm}')";

constexpr const char* kLogUpdateInputs = R"(
      SELECT {maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {request}, excluded.seen_ms AS now, {policy} AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, quota_log_owners.blocked_until_ms AS s_blocked_until,
             excluded.limit_name AS key_limit,
             excluded.owner AS key_owner, quota_log_owners.total AS s_total,
             quota_log_owners.newest_at_ms AS s_newest_at,
             quota_log_owners.denied AS s_denied, quota_log_owners.seen_ms AS s_seen
      FROM {request_row}
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
    "{max}(coalesce(s_total - live_base, 0) - refund, 0)",
    "coalesce(live_base + used, s_total)",
    "coalesce({newest_kept}, s_newest_at)",
};

// ---------------------------------------------------------------------------------------

// The statement of a consume or record: the request in VALUES, the decision in DO UPDATE.
// {table} is the family's state table, {columns} its state columns and {values} the
// decision's columns written to them, in the same order.
constexpr const char* kWrite = R"(INSERT INTO {table} {proposed}
ON CONFLICT (limit_name, owner) DO UPDATE SET
  ({set_columns}) =
  (SELECT {set_values}
   FROM ({decision}) AS decision)
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied)";

// The proposed row of a write (src/sql/dialect.h): SQLite's is the bare request, whose
// "new owner" trigger makes the row that the DO UPDATE then decides over; PostgreSQL's is
// the decision over an owner without state, in the same columns as the SET list.
constexpr const char* kProposedRequest = R"((limit_name, owner, cost, seen_ms, maximum)
VALUES ({limit}, {owner}, {request_cost}, {request_now}, 0))";

constexpr const char* kProposedDecision = R"((limit_name, owner, {set_columns})
SELECT {limit}, {owner}, {set_values}
FROM ({decision}) AS decision)";

// The update inputs' request row: none (the DO UPDATE reads `excluded` and the row itself),
// or, for PostgreSQL's proposed row, `excluded` made from the parameters and the state table
// joined to nothing, so that every column of the row reads as NULL with its own type.
constexpr const char* kUpdateRequestRow = "(SELECT 1) AS request";
constexpr const char* kProposedRequestRow =
    "(SELECT {limit} AS limit_name, {owner} AS owner, {request_cost} AS cost,"
    " {request_now} AS seen_ms) AS excluded LEFT JOIN {table} ON FALSE";

constexpr const char* kCheck = R"(SELECT {granted} AS allowed, reason, {remaining} AS remaining,
  {retry} AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, shown_used AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN {blocked} THEN s_blocked_until END AS blocked_until_ms
FROM ({decision}) AS decision)";

// The answer's reason, the same for every algorithm.
constexpr const char* kReason =
    "CASE WHEN allowed AND NOT {blocked} THEN 'ok' "
    "WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN {blocked} THEN 'blocked' "
    "WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END";

// reset: a request row whose trigger deletes the owner's state for the limit, then itself.
constexpr const char* kReset = R"(INSERT INTO quota_resets (limit_name, owner, now_ms, remaining)
VALUES ({limit}, {owner}, {request_now},
        (SELECT CASE l.algorithm WHEN 'token_bucket' THEN {burst}
                                 WHEN 'sliding_window' THEN {bounded_maximum}
                                 ELSE {maximum} END
         FROM quota_limits AS l{overrides}
         WHERE l.name = {limit}))
RETURNING TRUE AS allowed, 'ok' AS reason, remaining, 0 AS retry_after_ms,
  now_ms AS reset_at_ms, 0 AS denied, FALSE AS shadow_denied)";

struct Family {
  const char* decision;
  const char* check_inputs;
  const char* update_inputs;
  const char* table;    // the state table a consume or record writes
  const char* columns;  // its algorithm-specific state columns...
  const char* values;   // ...and the decision's columns written to them
  const char* fits;     // given cost <= capacity, may `cost` be taken now? (kAllowed)
  const WindowExpressions* window = nullptr;  // the window algorithms' own expressions
  const WindowLayout* layout = nullptr;       // ...and their windows' layout
  const char* layout_test = "";               // the limits the layout matches
};

constexpr const char* kLogColumns = "total, newest_at_ms, recorded, denied";
constexpr const char* kLogValues = "total, newest_at_ms, recorded, denied";
constexpr const char* kWindowColumns = "window_key, used, previous_used, denied";
constexpr const char* kWindowValues = "window_key, used_after, previous_used, denied";
constexpr const char* kBucketColumns = "level, denied, burst";
constexpr const char* kBucketValues = "level_after, denied, capacity";

Family family_of(StatementKind kind) {
  if (kind == StatementKind::calendar_window) {
    return {kWindowDecision,      kWindowCheckInputs,
            kWindowUpdateInputs,  "quota_windows",
            kWindowColumns,       kWindowValues,
            kFixedWindow.allowed, &kFixedWindow,
            &kCalendarWindows,    " AND l.calendar IS NOT NULL"};
  }
  switch (stored_algorithm(kind)) {
    case Algorithm::sliding_log:
      return {kLogDecision, kLogCheckInputs, kLogUpdateInputs,        "quota_log_owners",
              kLogColumns,  kLogValues,      "used + cost <= maximum"};
    case Algorithm::fixed_window:
      return {kWindowDecision,          kWindowCheckInputs, kWindowUpdateInputs,
              "quota_windows",          kWindowColumns,     kWindowValues,
              kFixedWindow.allowed,     &kFixedWindow,      &kPeriodWindows,
              " AND l.calendar IS NULL"};
    case Algorithm::sliding_window:
      return {kWindowDecision,        kWindowCheckInputs, kWindowUpdateInputs,
              "quota_windows",        kWindowColumns,     kWindowValues,
              kSlidingWindow.allowed, &kSlidingWindow,    &kPeriodWindows};
    case Algorithm::token_bucket:
      return {kBucketDecision, kBucketCheckInputs, kBucketUpdateInputs,        "quota_buckets",
              kBucketColumns,  kBucketValues,      "level >= cost * period_ms"};
  }
  throw std::logic_error("unknown algorithm");
}

std::string override_joins(std::string_view limit, std::string_view owner) {
  return fmt::format(fmt::runtime(kOverrideJoins), fmt::arg("limit", limit),
                     fmt::arg("owner", owner));
}

std::string build_reset() {
  return expand(kReset, fmt::arg("burst", burst_for_owner()),
                fmt::arg("bounded_maximum", maximum_for_owner(Algorithm::sliding_window)),
                fmt::arg("maximum", maximum_for_owner(Algorithm::sliding_log)),
                fmt::arg("overrides", override_joins("{limit}", "{owner}")));
}

struct MoreColumns {
  std::string columns;
  std::string values;
};

// What a write adds to the SET list of kWrite beyond the family's columns: consume counts
// shadow denials (on the owner's row, or from none in a proposed row), a sliding_log refund
// hands its trigger the units given back.
MoreColumns more_columns(Operation operation, const Family& family, bool proposed) {
  if (operation == Operation::consume) {
    return {", shadow_denied",
            proposed ? std::string(", {as_integer}(NOT allowed AND shadow)")
                     : fmt::format(", {}.shadow_denied + {{as_integer}}(NOT allowed AND shadow)",
                                   family.table)};
  }
  if (operation == Operation::refund && family.decision == kLogDecision) {
    return {", refunded", ", s_total - total"};
  }
  return {};
}

// The decision of `operation` over `family`'s inputs: the check's (the owner's row joined by
// the parameters), or the update's, whose request comes from `request_row`.
std::string decision_of(Operation operation, StatementKind kind, const Family& family,
                        const char* request_row) {
  const OperationParts parts = parts_of(operation);
  const bool check = operation == Operation::check;
  const bool refund = operation == Operation::refund;
  const WindowLayout none_layout{"", "", "", ""};
  const WindowLayout& layout = family.layout ? *family.layout : none_layout;
  const std::string layout_input = expand(
      layout.input,
      fmt::arg("calendar",
               check
                   ? calendar_input("{max}({request_now}, coalesce(s.seen_ms, 0))", "s", "{owner}")
                   : calendar_input("{max}(excluded.seen_ms, coalesce(quota_windows.seen_ms, 0))",
                                    "quota_windows", "excluded.owner")));
  const std::string inputs = expand(
      check ? family.check_inputs : family.update_inputs,
      fmt::arg("algorithm", to_string(stored_algorithm(kind))),
      fmt::arg("layout_input", layout_input), fmt::arg("layout_test", family.layout_test),
      fmt::arg("request", parts.request), fmt::arg("policy", kPolicy),
      fmt::arg("maximum", maximum_for_owner(stored_algorithm(kind))),
      fmt::arg("capacity", burst_for_owner()),
      fmt::arg("request_row", expand(request_row, fmt::arg("table", family.table))),
      fmt::arg("overrides", check ? override_joins("{limit}", "{owner}")
                                  : override_joins("excluded.limit_name", "excluded.owner")));
  const LogParts& log = refund ? kLogRefund : kLogRecord;
  const std::string level =
      refund ? expand("{min}({} + {min}(refund, capacity) * period_ms, full_level)", kBucketRefill)
             : std::string(kBucketRefill);
  // What the window layers, which pass on only the columns later layers use, carry for the
  // policies: the owner's policy and the shadow flag, the refund, check's shadow count.
  const std::string carry = std::string(", now, policy, shadow, block_ms, s_blocked_until") +
                            (refund ? ", refund" : "") + (check ? ", s_shadow_denied" : "");
  const WindowExpressions none{};
  const WindowExpressions& window = family.window ? *family.window : none;
  return expand(
      family.decision, fmt::arg("inputs", inputs), fmt::arg("recorded", with_block(parts.recorded)),
      fmt::arg("denied", with_block(parts.denied)), fmt::arg("reason", with_block(kReason)),
      fmt::arg("allowed", expand(kAllowed, fmt::arg("fits", family.fits))),
      fmt::arg("remaining", window.remaining ? window.remaining : ""),
      fmt::arg("retry",
               window.retry ? expand(window.retry, fmt::arg("window_end", layout.window_end)) : ""),
      fmt::arg("reset_at", window.reset_at
                               ? expand(window.reset_at, fmt::arg("window_end", layout.window_end))
                               : ""),
      fmt::arg("window_key", layout.window_key), fmt::arg("row_key", layout.row_key),
      fmt::arg("shown_used", window.shown_used ? expand(window.shown_used,
                                                        fmt::arg("weighted_rest", kWeightedRest))
                                               : ""),
      fmt::arg("start", expand(kBucketStart, fmt::arg("level", "s_level"),
                               fmt::arg("row_period", "s_period"), fmt::arg("period", "period_ms"),
                               fmt::arg("capacity", "capacity"))),
      fmt::arg("take", refund ? " - {min}(s_used, refund)" : ""), fmt::arg("level", level),
      fmt::arg("carry", carry), fmt::arg("used", log.used), fmt::arg("total", log.total),
      fmt::arg("newest", log.newest),
      fmt::arg("bucket_taken", expand(kBucketTaken, fmt::arg("recorded", with_block(parts.recorded)))),
      fmt::arg("bucket_retry", kBucketRetry), fmt::arg("bucket_reset_at", kBucketResetAt));
}

// The SET list of a write (or a proposed row's columns): the family's state, then what every
// write stores. `cost` is what the row keeps as the request's cost: a proposed row keeps the
// parameter, which the DO UPDATE reads back as excluded.cost (a refund's units).
struct Assignments {
  std::string columns;
  std::string values;
};

Assignments assignments_of(Operation operation, const Family& family, bool proposed) {
  const OperationParts parts = parts_of(operation);
  const MoreColumns more = more_columns(operation, family, proposed);
  return {expand("{columns}, seen_ms, cost, maximum, period_ms,\n"
                 "   last_allowed, last_reason, last_remaining, last_retry_after_ms, "
                 "last_reset_at_ms, blocked_until_ms{more}",
                 fmt::arg("columns", family.columns), fmt::arg("more", more.columns)),
          expand("{values}, t, {cost_kept}, maximum, period_ms,\n"
                 "          {granted}, reason, {remaining}, {retry}, reset_at_ms,\n"
                 "          {blocked_until}{more_values}",
                 fmt::arg("values", family.values),
                 fmt::arg("cost_kept", proposed ? "{request_cost}" : "cost"),
                 fmt::arg("granted", with_block(parts.granted)),
                 fmt::arg("remaining", kAnswerRemaining), fmt::arg("retry", answer_retry(parts)),
                 fmt::arg("blocked_until", with_block(parts.blocked_until)),
                 fmt::arg("more_values", more.values))};
}

std::string build(Operation operation, StatementKind kind, const Dialect& dialect) {
  if (operation == Operation::reset) return build_reset();
  const Family family = family_of(kind);
  if (operation == Operation::check) {
    return expand(
        kCheck, fmt::arg("decision", decision_of(operation, kind, family, kUpdateRequestRow)),
        fmt::arg("granted", with_block(parts_of(operation).granted)),
        fmt::arg("remaining", kAnswerRemaining),
        fmt::arg("retry", answer_retry(parts_of(operation))), fmt::arg("blocked", kBlocked));
  }
  const Assignments update = assignments_of(operation, family, false);
  std::string proposed;
  if (dialect.proposes_decided_row) {
    const Assignments row = assignments_of(operation, family, true);
    proposed = expand(
        kProposedDecision, fmt::arg("set_columns", row.columns), fmt::arg("set_values", row.values),
        fmt::arg("decision", decision_of(operation, kind, family, kProposedRequestRow)));
  } else {
    proposed = expand(kProposedRequest);
  }
  return expand(kWrite, fmt::arg("table", family.table), fmt::arg("proposed", proposed),
                fmt::arg("set_columns", update.columns), fmt::arg("set_values", update.values),
                fmt::arg("decision", decision_of(operation, kind, family, kUpdateRequestRow)));
}


// ---------------------------------------------------------------------------------------
// A plain limit's consume and record (issue 27): a limit without overrides, shadow mode, a
// block or a calendar, for an owner that already has state. The statement is an UPDATE of
// the owner's row, so no new-owner trigger runs and nothing is proposed; its decision is one
// flat chain of the family's own fragments (the general statement's policy layers, even with
// every policy a constant, cost 15k instructions more: docs/performance-notes.md); it writes
// only the state (and the verdict, last_allowed), and RETURNING computes the answer from the
// new row by the same fragments, read over the row's columns (kNewRow).
//
// Its guard: the limit's row matches only while the limit is still of this algorithm and
// plain, and the owner has no override for it or for '*'. Otherwise the decision has no row,
// the SET writes NULLs, and the state table's "unknown limit" check refuses the statement,
// which changes nothing; the engine reads the limit again and runs the statement of what it
// finds. An owner without state matches no row and answers nothing: the engine then runs the
// general statement, which makes the row. Both are exact: each statement is atomic.
// The general statement (what `quotactl sql` prints) answers the same for a plain limit; the
// property tests (tests/plain_statements_test.cpp) compare the two.
constexpr const char* kPlainGuard = R"(l.calendar IS NULL AND NOT l.shadow AND l.block_ms IS NULL
        AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                        WHERE o.limit_name = {limit} AND o.owner = {owner})
        AND NOT EXISTS (SELECT 1 FROM quota_overrides AS a
                        WHERE a.limit_name = '*' AND a.owner = {owner}))";

// The request's time: the engine binds a valid :now (src/engine/ refuses any other), or
// NULL for the database's clock; its cost is always bound and valid.
constexpr const char* kPlainNow = "coalesce({now_ms}, {database_now})";

constexpr const char* kPlainWrite = R"(UPDATE {table} SET
  ({columns}, seen_ms, cost, maximum, period_ms, blocked_until_ms, last_allowed) =
  (SELECT {values}, t, cost, maximum, period_ms, CAST(NULL AS bigint), allowed
   FROM ({decision}) AS decision)
WHERE limit_name = {limit} AND owner = {owner}
RETURNING last_allowed AS allowed,
  CASE WHEN last_allowed THEN 'ok' WHEN cost > {capacity} THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END AS reason,
  {remaining} AS remaining,
  CASE WHEN last_allowed THEN 0 WHEN cost > {capacity} THEN -1
       ELSE {retry} + (seen_ms - {plain_now}) END AS retry_after_ms,
  {reset_at} AS reset_at_ms, denied, FALSE AS shadow_denied)";

// fixed_window and sliding_window: the names of kWindowDecision's layers.
constexpr const char* kPlainWindowDecision = R"(
  SELECT *, {min}(used + CASE WHEN {recorded} THEN cost ELSE 0 END, 4611686018427387904)
              AS used_after,
         denied_before + {as_integer}({denied}) AS denied
  FROM (
    SELECT *, cost <= maximum AND {fits} AS allowed
    FROM (
      SELECT maximum, period_ms, cost, t, window_key, rest, denied_before,
        CASE WHEN row_key = window_key THEN s_used ELSE 0 END AS used,
        CASE row_key WHEN window_key THEN s_previous WHEN window_key - 1 THEN s_used
                     ELSE 0 END AS previous_used
      FROM (
        SELECT *, {window_key} AS window_key, period_ms - t % period_ms AS rest,
          {row_key} AS row_key
        FROM (
          SELECT l.maximum AS maximum, l.period_ms AS period_ms, {cost} AS cost,
            {max}({plain_now}, coalesce(quota_windows.seen_ms, 0)) AS t,
            quota_windows.period_ms AS s_period, quota_windows.window_key AS s_window_key,
            quota_windows.seen_ms AS s_seen, quota_windows.used AS s_used,
            quota_windows.previous_used AS s_previous,
            coalesce(quota_windows.denied, 0) AS denied_before
          FROM quota_limits AS l
          WHERE l.name = {limit} AND l.algorithm = '{algorithm}' AND {guard}
        ) AS inputs
      ) AS keyed {barrier}
    ) AS counted
  ) AS decided)";

// token_bucket: the names of kBucketDecision's layers.
constexpr const char* kPlainBucketDecision = R"(
  SELECT *, {bucket_taken} AS level_after,
         denied_before + {as_integer}({denied}) AS denied
  FROM (
    SELECT *, cost <= capacity AND {fits} AS allowed
    FROM (
      SELECT *, {level} AS level
      FROM (
        SELECT *, CASE WHEN s_level IS NULL THEN full_level ELSE {start} END AS start
        FROM (
          SELECT l.maximum AS maximum, l.burst AS capacity, l.period_ms AS period_ms,
            {cost} AS cost,
            {max}({plain_now}, coalesce(quota_buckets.seen_ms, 0)) AS t,
            l.burst * l.period_ms AS full_level,
            CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
            quota_buckets.period_ms AS s_period, quota_buckets.seen_ms AS s_seen,
            coalesce(quota_buckets.denied, 0) AS denied_before
          FROM quota_limits AS l
          WHERE l.name = {limit} AND l.algorithm = 'token_bucket' AND {guard}
        ) AS inputs {barrier}
      ) AS started
    ) AS refilled {barrier}
  ) AS decided)";

// A fragment of a decision's last layers read over the written row instead: `t` is its
// seen_ms, the usage or level after the operation its used or level, the request's cost
// its cost (the statement writes it), and the rest of the window and the full level are
// computed from its columns.
std::string on_new_row(std::string_view fragment, std::string_view capacity) {
  const std::string full_level = fmt::format("({} * period_ms)", capacity);
  const std::pair<const char*, std::string> names[] = {
      {"used_after", "used"},
      {"level_after", "level"},
      {"t", "seen_ms"},
      {"rest", "(period_ms - seen_ms % period_ms)"},
      {"full_level", full_level},
      {"capacity", std::string(capacity)},
  };
  std::string text(fragment);
  for (const auto& [name, value] : names) {
    text = std::regex_replace(text, std::regex(std::string("\\b") + name + "\\b"), value);
  }
  return text;
}

std::string build_plain(Operation operation, Algorithm algorithm) {
  // A plain limit has no policy, shadow mode or block: consume records what it allows and
  // counts what it denies; record records everything and counts nothing.
  const char* recorded = operation == Operation::record ? "TRUE" : "allowed";
  const char* denied = operation == Operation::record ? "FALSE" : "NOT allowed";
  const std::string guard = kPlainGuard;
  const auto plain_now = fmt::arg("plain_now", kPlainNow);
  if (algorithm == Algorithm::token_bucket) {
    const std::string decision = expand(
        kPlainBucketDecision, fmt::arg("guard", guard), plain_now,
        fmt::arg("bucket_taken", expand(kBucketTaken, fmt::arg("recorded", recorded))),
        fmt::arg("denied", denied), fmt::arg("fits", "level >= cost * period_ms"),
        fmt::arg("level", kBucketRefill),
        fmt::arg("start", expand(kBucketStart, fmt::arg("level", "s_level"),
                                 fmt::arg("row_period", "s_period"),
                                 fmt::arg("period", "period_ms"), fmt::arg("capacity", "capacity"))));
    return expand(kPlainWrite, plain_now, fmt::arg("table", "quota_buckets"),
                  fmt::arg("columns", kBucketColumns), fmt::arg("values", kBucketValues),
                  fmt::arg("decision", decision), fmt::arg("capacity", "burst"),
                  fmt::arg("remaining", on_new_row("{max}(level_after / period_ms, 0)", "burst")),
                  fmt::arg("retry", on_new_row(kBucketRetry, "burst")),
                  fmt::arg("reset_at", on_new_row(kBucketResetAt, "burst")));
  }
  const WindowExpressions& window =
      algorithm == Algorithm::fixed_window ? kFixedWindow : kSlidingWindow;
  const WindowLayout& layout = kPeriodWindows;
  const std::string decision =
      expand(kPlainWindowDecision, fmt::arg("guard", guard), plain_now,
             fmt::arg("algorithm", to_string(algorithm)), fmt::arg("recorded", recorded),
             fmt::arg("denied", denied), fmt::arg("fits", window.allowed),
             fmt::arg("window_key", layout.window_key), fmt::arg("row_key", layout.row_key));
  const auto answer = [&](const char* fragment) {
    return on_new_row(expand(fragment, fmt::arg("window_end", layout.window_end)), "maximum");
  };
  return expand(kPlainWrite, plain_now, fmt::arg("table", "quota_windows"),
                fmt::arg("columns", kWindowColumns), fmt::arg("values", kWindowValues),
                fmt::arg("decision", decision), fmt::arg("capacity", "maximum"),
                fmt::arg("remaining", "{max}(" + answer(window.remaining) + ", 0)"),
                fmt::arg("retry", answer(window.retry)),
                fmt::arg("reset_at", answer(window.reset_at)));
}

}  // namespace

std::string bucket_start(std::string_view level, std::string_view row_period,
                         std::string_view period, std::string_view capacity,
                         const Dialect& dialect) {
  return finish(expand(kBucketStart, fmt::arg("level", level), fmt::arg("row_period", row_period),
                       fmt::arg("period", period), fmt::arg("capacity", capacity)),
                dialect);
}

namespace {

using Statements = std::array<std::array<std::string, 5>, 5>;

Statements build_all(const Dialect& dialect) {
  Statements built;
  for (Operation op : {Operation::check, Operation::consume, Operation::record, Operation::reset,
                       Operation::refund}) {
    for (StatementKind kind :
         {StatementKind::sliding_log, StatementKind::fixed_window, StatementKind::sliding_window,
          StatementKind::token_bucket, StatementKind::calendar_window}) {
      built[static_cast<int>(op)][static_cast<int>(kind)] =
          finish(build(op, kind, dialect), dialect);
    }
  }
  return built;
}

// consume and record of each plain kind (check is the general statement's).
using PlainStatements = std::array<std::array<std::string, 3>, 3>;

PlainStatements build_all_plain(const Dialect& dialect) {
  PlainStatements built;
  for (StatementKind kind : {StatementKind::plain_fixed_window, StatementKind::plain_sliding_window,
                             StatementKind::plain_token_bucket}) {
    const int index =
        static_cast<int>(kind) - static_cast<int>(StatementKind::plain_fixed_window);
    built[index][0] = finish(build_plain(Operation::consume, stored_algorithm(kind)), dialect);
    built[index][1] = finish(build_plain(Operation::record, stored_algorithm(kind)), dialect);
  }
  return built;
}

}  // namespace

std::optional<StatementKind> plain_kind(Operation operation, StatementKind kind) {
  if (operation != Operation::consume && operation != Operation::record) return std::nullopt;
  switch (kind) {
    case StatementKind::fixed_window:
      return StatementKind::plain_fixed_window;
    case StatementKind::sliding_window:
      return StatementKind::plain_sliding_window;
    case StatementKind::token_bucket:
      return StatementKind::plain_token_bucket;
    default:
      return std::nullopt;
  }
}

StatementKind general_kind(StatementKind kind) {
  return is_plain(kind) ? kind_of(stored_algorithm(kind)) : kind;
}

Algorithm stored_algorithm(StatementKind kind) {
  switch (kind) {
    case StatementKind::sliding_log:
      return Algorithm::sliding_log;
    case StatementKind::fixed_window:
    case StatementKind::calendar_window:
    case StatementKind::plain_fixed_window:
      return Algorithm::fixed_window;
    case StatementKind::sliding_window:
    case StatementKind::plain_sliding_window:
      return Algorithm::sliding_window;
    case StatementKind::token_bucket:
    case StatementKind::plain_token_bucket:
      return Algorithm::token_bucket;
  }
  throw std::logic_error("unknown statement kind");
}

const std::string& statement(Operation operation, StatementKind kind) {
  return statement(kSqlite, operation, kind);
}

const std::string& statement(const Dialect& dialect, Operation operation, StatementKind kind) {
  if (is_plain(kind)) {
    static const PlainStatements plain_sqlite = build_all_plain(kSqlite);
    static const PlainStatements plain_postgresql = build_all_plain(kPostgresql);
    const PlainStatements& plain =
        dialect.name == kPostgresql.name ? plain_postgresql : plain_sqlite;
    const int index =
        static_cast<int>(kind) - static_cast<int>(StatementKind::plain_fixed_window);
    const std::string& text = operation == Operation::consume ? plain[index][0]
                              : operation == Operation::record ? plain[index][1]
                                                               : plain[index][2];
    if (text.empty()) throw std::logic_error("no plain statement for this operation");
    return text;
  }
  static const Statements sqlite = build_all(kSqlite);
  static const Statements postgresql = build_all(kPostgresql);
  const Statements& table = dialect.name == kPostgresql.name ? postgresql : sqlite;
  const std::string& text = table[static_cast<int>(operation)][static_cast<int>(kind)];
  if (text.empty()) throw std::logic_error("no statement for this algorithm");
  return text;
}

const char* state_table(StatementKind kind) { return family_of(general_kind(kind)).table; }

std::string_view kind_name(StatementKind kind) {
  switch (kind) {
    case StatementKind::calendar_window:
      return "calendar_window";
    case StatementKind::plain_fixed_window:
      return "plain_fixed_window";
    case StatementKind::plain_sliding_window:
      return "plain_sliding_window";
    case StatementKind::plain_token_bucket:
      return "plain_token_bucket";
    default:
      return to_string(stored_algorithm(kind));
  }
}

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
