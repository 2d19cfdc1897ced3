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
#include <utility>

#include "sql/families.h"
#include "sql/fragments.h"
#include "sql/lease_statements.h"

namespace quota::detail {
namespace {

// Every template is filled by the one mechanism of src/sql/fragments.h: `fill` replaces the
// names it is given (and the fragments of the table) and leaves the rest, so that the
// dialect's fragments and the decision's inputs pass unchanged through the layers of a
// statement; `finish` fills them in once the statement is whole. No SQL here uses braces.
using Arg = std::pair<std::string_view, std::string>;

Arg arg(std::string_view name, std::string_view value) { return {name, std::string(value)}; }
Arg arg(std::string_view name, std::string&& value) { return {name, std::move(value)}; }
Arg arg(std::string_view name, const char* value) { return {name, std::string(value)}; }

template <typename... Args>
std::string fill(std::string_view text, Args&&... args) {
  return sql::fill(text, sql::Bindings{std::forward<Args>(args)...});
}

using sql::finish;


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
  return fill(text, arg("blocked", kBlocked));
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
      bounded ? fill("{min}({value}, 4611686018427387904 / l.period_ms)", arg("value", kOverrideMaximum))
              : std::string(kOverrideMaximum);
  return fill(kMaximumForOwner, arg("bounded", value));
}

// A token bucket's capacity as the owner sees it (an override without a burst: its maximum).
std::string burst_for_owner() {
  return fill(
      "CASE coalesce(o.policy, a.policy) WHEN 'maximum' "
      "THEN {min}({value}, 2305843009213693952 / l.period_ms) ELSE l.burst END",
      arg("value", kOverrideBurst));
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
  return fill(kAnswerRetry,
                arg("started", fill(parts.started, arg("caller", kFromCaller))),
                arg("caller", kFromCaller));
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
// docs). The algorithms differ only in their fragments (src/sql/fragments.cpp).
constexpr const char* kWindowDecision = R"(
  SELECT *,
    {max}({remaining}, 0) AS remaining,
    {reason} AS reason,
    {answer_retry} AS retry_after_ms,
    {reset_at} AS reset_at_ms,
    {shown_used} AS shown_used
  FROM (
    SELECT maximum, capacity, period_ms, cost, t, window_key, rest, previous_used, allowed{carry},
      {used_after} AS used_after,
      denied_before + {as_integer}({denied}) AS denied
    FROM (
      SELECT maximum, capacity, period_ms, cost, t, window_key, rest, used, previous_used,
        denied_before{carry},
        {allowed} AS allowed
      FROM (
        SELECT maximum, capacity, period_ms, cost, t, window_key, rest, denied_before{carry},
          {used} AS used,
          {previous_used} AS previous_used
        FROM (
          SELECT maximum, capacity, period_ms, cost, t, s_used, s_previous{carry},
            {window_key} AS window_key, {rest} AS rest,
            {row_key} AS row_key,
            coalesce(s_denied, 0) AS denied_before
          FROM (
            SELECT *, {clock} AS t
            FROM ({inputs}) AS inputs
          ) AS clocked {barrier}
        ) AS keyed
      ) AS counted {barrier}
    ) AS decided
  ) AS written)";

// Where the window layers of kWindowDecision differ between windows of period_ms from the
// epoch and calendar windows (StatementKind::calendar_window): the inputs' extra column, and the prefix of
// the layout's fragments (window_key, row_key, window_end, row_counts).
struct WindowLayout {
  const char* input;      // the inputs' column(s) of the layout, each followed by ", "
  const char* fragments;  // "period" or "calendar"
};

constexpr WindowLayout kPeriodWindows = {"", "period"};

// Calendar windows: a window's key is its end (the inputs' calendar_end, kCalendarInput).
constexpr WindowLayout kCalendarWindows = {"{calendar} AS calendar_end, ", "calendar"};

// The fragment `name` of `prefix` ("fixed_window", "period"), filled with `bindings`.
std::string part(std::string_view prefix, std::string_view name, const sql::Bindings& bindings = {}) {
  return sql::fill(sql::ref(std::string(prefix) + "." + std::string(name)), bindings);
}

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
      fill(kCalendarEnd, arg("time", t), arg("anchor_owner", owner),
             arg("l_z", "((lt + 86400000) / 86400000 + 719467)"),
             arg("a_z", "((at + 86400000) / 86400000 + 719467)"),
             arg("fd0", first_day("b")), arg("fd1", first_day("b + 1")),
             arg("fdn", first_day("b + step")), arg("fdn1", first_day("b + step + 1")));
  return fill(kCalendarInput, arg("t", t), arg("row", row),
                arg("calendar_end", end));
}

// The FROM of a check's inputs: the limit, and the owner's row if it has one; and of the usage
// view's: every owner's row of a limit of the kind.
constexpr const char* kCheckFrom = R"(quota_limits AS l
      LEFT JOIN {table} AS s ON s.limit_name = l.name AND s.owner = {owner}{overrides}
      WHERE l.name = {limit} AND l.algorithm = '{algorithm}'{layout_test})";
constexpr const char* kViewFrom = R"({table} AS s
      JOIN quota_limits AS l ON l.name = s.limit_name{overrides}
      WHERE l.algorithm = '{algorithm}'{layout_test})";

constexpr const char* kWindowCheckInputs = R"(
      SELECT {usage_key}{maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {layout_input}{request_cost} AS cost, {request_now} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.window_key AS s_window_key, s.period_ms AS s_period, s.used AS s_used,
             s.previous_used AS s_previous, s.denied AS s_denied, s.seen_ms AS s_seen
      FROM {from})";

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
// s_denied, s_seen (NULL for an owner without state: a full bucket). The arithmetic (level
// as tokens * period_ms, the start, the refill, the level after) is the token_bucket
// fragments' (src/sql/fragments.cpp).
constexpr const char* kBucketDecision = R"(
  SELECT *,
    {remaining} AS remaining,
    {reason} AS reason,
    {answer_retry} AS retry_after_ms,
    {reset_at} AS reset_at_ms,
    {shown_used} AS shown_used
  FROM (
    SELECT *,
      {level_after} AS level_after,
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
            SELECT *, {clock} AS t, {full_level} AS full_level
            FROM ({inputs}) AS inputs {barrier}
          ) AS clocked {barrier}
        ) AS started {barrier}
      ) AS refilled
    ) AS decided {barrier}
  ) AS recorded)";

// A row that no request has written yet (seen_ms NULL, made by the "new owner" trigger with
// the limit's burst) reads as no row: a full bucket of the owner's own capacity.
constexpr const char* kBucketCheckInputs = R"(
      SELECT {usage_key}{maximum} AS maximum, {capacity} AS capacity, l.period_ms AS period_ms,
             {request_cost} AS cost, {request_now} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             s.level AS s_level, s.period_ms AS s_period, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM {from})";

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
    {remaining} AS remaining,
    {reason} AS reason,
    {shown_used} AS shown_used,
    {answer_retry} AS retry_after_ms,
    {reset_at} AS reset_at_ms,
    {total} AS total,
    {newest_after} AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + {as_integer}({denied}) AS denied
    FROM (
      SELECT *, {recorded} AS recorded
      FROM (
        SELECT *, {allowed} AS allowed
        FROM (
          SELECT *, {used} AS used
          FROM (
            SELECT *,
              {log_live_base} AS live_base,
              coalesce(s_denied, 0) AS denied_before
            FROM (
              SELECT *, {clock} AS t
              FROM ({inputs}) AS inputs {barrier}
            ) AS clocked {barrier}
          ) AS based
        ) AS counted
      ) AS decided {barrier}
    ) AS booked
  ) AS summed)";

constexpr const char* kLogCheckInputs = R"(
      SELECT {usage_key}{maximum} AS maximum, {maximum} AS capacity, l.period_ms AS period_ms,
             {request_cost} AS cost, {request_now} AS now,
             {policy} AS policy, l.shadow AS shadow, s.shadow_denied AS s_shadow_denied,
             l.block_ms AS block_ms, s.blocked_until_ms AS s_blocked_until,
             l.name AS key_limit, {owner} AS key_owner,
             s.total AS s_total, s.newest_at_ms AS s_newest_at, s.denied AS s_denied,
             s.seen_ms AS s_seen
      FROM {from})";

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

// ---------------------------------------------------------------------------------------

// The statement of a consume or record: the request in VALUES, the decision in DO UPDATE.
// {table} is the family's state table, {columns} its state columns and {values} the
// decision's columns written to them, in the same order.
constexpr const char* kWrite = R"(INSERT INTO {table} {proposed}
ON CONFLICT (limit_name, owner) DO UPDATE SET
  ({set_columns}) =
  (SELECT {set_values}
   FROM ({decision}) AS decision)
RETURNING {stored_answer})";

// The answer a write stored in the owner's row (its last_* columns), which the general
// statements return and a plain sliding log's answer reads.
constexpr const char* kStoredAnswer =
    R"(last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
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

constexpr const char* kCheck = R"(SELECT {usage_key}{granted} AS allowed, reason, {remaining} AS remaining,
  {retry} AS retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied, {used} AS used,
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
  const char* table;    // the state table a consume or record writes (its family's owners)
  const char* columns;  // its algorithm-specific state columns...
  const char* values;   // ...and the decision's columns written to them
  const char* algorithm;                // the prefix of its fragments (src/sql/fragments.cpp)
  const WindowLayout* layout = nullptr;  // the window algorithms' layout
  const char* layout_test = "";          // the limits the layout matches
};

constexpr const char* kLogColumns = "total, newest_at_ms, recorded, denied";
constexpr const char* kLogValues = "total, newest_at_ms, recorded, denied";
constexpr const char* kWindowColumns = "window_key, used, previous_used, denied";
constexpr const char* kWindowValues = "window_key, used_after, previous_used, denied";
constexpr const char* kBucketColumns = "level, denied, burst";
constexpr const char* kBucketValues = "level_after, denied, capacity";

Family decision_of(StatementKind kind) {
  if (kind == StatementKind::calendar_window) {
    return {kWindowDecision, kWindowCheckInputs, kWindowUpdateInputs, nullptr,
            kWindowColumns,  kWindowValues,      "fixed_window",      &kCalendarWindows,
            " AND l.calendar IS NOT NULL"};
  }
  switch (stored_algorithm(kind)) {
    case Algorithm::sliding_log:
      return {kLogDecision, kLogCheckInputs, kLogUpdateInputs, nullptr,
              kLogColumns,  kLogValues,      "sliding_log"};
    case Algorithm::fixed_window:
      return {kWindowDecision, kWindowCheckInputs, kWindowUpdateInputs, nullptr,
              kWindowColumns,  kWindowValues,      "fixed_window",      &kPeriodWindows,
              " AND l.calendar IS NULL"};
    case Algorithm::sliding_window:
      return {kWindowDecision, kWindowCheckInputs, kWindowUpdateInputs, nullptr,
              kWindowColumns,  kWindowValues,      "sliding_window",    &kPeriodWindows};
    case Algorithm::token_bucket:
      return {kBucketDecision, kBucketCheckInputs, kBucketUpdateInputs, nullptr,
              kBucketColumns,  kBucketValues,      "token_bucket"};
    case Algorithm::concurrency:
      break;  // src/sql/lease_statements.cpp
  }
  throw std::logic_error("unknown algorithm");
}

Family family_of(StatementKind kind) {
  Family family = decision_of(kind);
  family.table = sql::family_of(stored_algorithm(kind)).owners.name;
  return family;
}

std::string override_joins(std::string_view limit, std::string_view owner) {
  return fill(kOverrideJoins, arg("limit", limit), arg("owner", owner));
}

std::string build_reset() {
  return fill(kReset, arg("burst", burst_for_owner()),
                arg("bounded_maximum", maximum_for_owner(Algorithm::sliding_window)),
                arg("maximum", maximum_for_owner(Algorithm::sliding_log)),
                arg("overrides", override_joins("{limit}", "{owner}")));
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
                     : fill(", {table}.shadow_denied + {as_integer}(NOT allowed AND shadow)",
                            arg("table", family.table))};
  }
  if (operation == Operation::refund && family.decision == kLogDecision) {
    return {", refunded", ", s_total - total"};
  }
  return {};
}

// The value bound to `name` in `bindings`.
std::string bindings_value(const sql::Bindings& bindings, std::string_view name) {
  for (const auto& [key, value] : bindings) {
    if (key == name) return value;
  }
  throw std::logic_error("no binding named " + std::string(name));
}

// The algorithm's own columns of a decision (src/sql/fragments.cpp), for an operation that
// records when `records` and, for a refund, gives back. Each is a fragment filled with what
// the operation decides; its inputs stay the decision's columns.
sql::Bindings arithmetic(const Family& family, std::string_view records, bool refund) {
  const std::string_view name = family.algorithm;
  const sql::Bindings records_binding = {{"records", std::string(records)}};
  sql::Bindings bindings = {
      {"clock", sql::ref("clock.t")},
      {"remaining", part(name, "remaining")},
      {"shown_used", part(name, "shown_used")},
      {"fits", part(name, "fits")},
  };
  if (family.layout) {
    const std::string_view layout = family.layout->fragments;
    const std::string window_end = part(layout, "window_end");
    bindings.insert(bindings.end(),
                    {{"retry", part(name, "retry", {{"window_end", window_end}})},
                     {"reset_at", part(name, "reset_at", {{"window_end", window_end}})},
                     {"window_key", part(layout, "window_key")},
                     {"row_key", part(layout, "row_key")},
                     {"rest", sql::ref("window.rest")},
                     {"used", part("window", "used",
                                   {{"take", refund ? " - {min}(s_used, refund)" : ""}})},
                     {"previous_used", sql::ref("window.previous_used")},
                     {"used_after", part("window", "used_after", records_binding)}});
  } else if (name == "token_bucket") {
    const std::string refill = sql::ref("token_bucket.refill");
    bindings.insert(
        bindings.end(),
        {{"retry", part(name, "retry")},
         {"reset_at", part(name, "reset_at")},
         {"full_level", part(name, "full_level")},
         {"start", part(name, "start")},
         {"level", refund ? fill("{min}({refill} + {min}(refund, capacity) * period_ms, full_level)",
                                 arg("refill", refill))
                          : refill},
         {"level_after", part(name, "level_after", records_binding)}});
  } else {
    const std::string newest = part(name, refund ? "refund_newest" : "newest");
    bindings.insert(bindings.end(),
                    {{"retry", part(name, "retry")},
                     {"reset_at", part(name, "reset_at", {{"newest", newest}})},
                     {"used", part(name, refund ? "refund_used" : "used")},
                     {"recorded", part(name, "recorded", records_binding)},
                     {"total", part(name, refund ? "refund_total" : "total")},
                     {"newest_after", part(name, "newest_after", {{"newest", newest}})}});
  }
  bindings.push_back({"answer_retry", part("answer", "retry", {{"retry", bindings_value(bindings, "retry")}})});
  return bindings;
}

// The decision of `operation` over `family`'s inputs: the check's (the owner's row joined by
// the parameters), the update's, whose request comes from `request_row`, or the usage view's
// over every owner's row (`view`).
std::string decision_of(Operation operation, StatementKind kind, const Family& family,
                        const char* request_row, const char* view_from = nullptr) {
  const OperationParts parts = parts_of(operation);
  const bool check = operation == Operation::check;
  const bool refund = operation == Operation::refund;
  const WindowLayout none_layout{"", ""};
  const WindowLayout& layout = family.layout ? *family.layout : none_layout;
  const std::string layout_input = fill(
      layout.input,
      arg("calendar",
          view_from ? calendar_input("{max}({database_now}, coalesce(s.seen_ms, 0))", "s", "s.owner")
          : check
              ? calendar_input("{max}({request_now}, coalesce(s.seen_ms, 0))", "s", "{owner}")
              : calendar_input("{max}(excluded.seen_ms, coalesce(quota_windows.seen_ms, 0))",
                               "quota_windows", "excluded.owner")));
  std::string inputs = fill(
      check ? family.check_inputs : family.update_inputs,
      arg("algorithm", to_string(stored_algorithm(kind))),
      arg("layout_input", layout_input), arg("layout_test", family.layout_test),
      arg("request", parts.request), arg("policy", kPolicy),
      arg("maximum", maximum_for_owner(stored_algorithm(kind))), arg("capacity", burst_for_owner()),
      arg("request_row", fill(request_row, arg("table", family.table))),
      arg("overrides", view_from ? override_joins("s.limit_name", "s.owner")
                       : check   ? override_joins("{limit}", "{owner}")
                                 : override_joins("excluded.limit_name", "excluded.owner")));
  inputs = fill(inputs, arg("usage_key", view_from ? "s.limit_name AS usage_limit, s.owner AS usage_owner, " : ""));
  if (view_from) {
    // The usage view: the check's inputs over every row of the state table, at the
    // database's clock, for a cost of 1.
    inputs = fill(inputs, arg("from", fill(view_from, arg("table", family.table),
                                           arg("algorithm", to_string(stored_algorithm(kind))),
                                           arg("layout_test", family.layout_test),
                                           arg("overrides", override_joins("s.limit_name", "s.owner")))),
                  arg("request_cost", "1"), arg("request_now", "{database_now}"),
                  arg("owner", "s.owner"));
  } else if (check) {
    inputs = fill(inputs, arg("from", fill(kCheckFrom, arg("table", family.table),
                                           arg("algorithm", to_string(stored_algorithm(kind))),
                                           arg("layout_test", family.layout_test),
                                           arg("overrides", override_joins("{limit}", "{owner}")))));
  }
  // What the window layers, which pass on only the columns later layers use, carry for the
  // policies: the owner's policy and the shadow flag, the refund, check's shadow count.
  const std::string carry = std::string(", now, policy, shadow, block_ms, s_blocked_until") +
                            (refund ? ", refund" : "") + (check ? ", s_shadow_denied" : "") +
                            (view_from ? ", usage_limit, usage_owner" : "");
  sql::Bindings bindings = arithmetic(family, with_block(parts.recorded), refund);
  bindings.insert(bindings.end(),
                  {{"inputs", inputs},
                   {"denied", with_block(parts.denied)},
                   {"reason", with_block(kReason)},
                   {"allowed", fill(kAllowed, arg("fits", bindings_value(bindings, "fits")))},
                   {"carry", carry}});
  return sql::fill(family.decision, bindings);
}

// The SET list of a write (or a proposed row's columns): the family's state, then what every
// write stores. `cost` is what the row keeps as the request's cost: a proposed row keeps the
// parameter, which the DO UPDATE reads back as excluded.cost (a refund's units).
struct Assignments {
  std::string columns;
  std::string values;
};

// `blocked` is whether a block holds: kBlocked, or the flat decision's column of it.
Assignments assignments_of(Operation operation, const Family& family, bool proposed,
                           std::string_view blocked = kBlocked) {
  const OperationParts parts = parts_of(operation);
  const auto with_block = [&](std::string_view text) { return fill(text, arg("blocked", blocked)); };
  const MoreColumns more = more_columns(operation, family, proposed);
  return {fill("{columns}, seen_ms, cost, maximum, period_ms,\n"
                 "   last_allowed, last_reason, last_remaining, last_retry_after_ms, "
                 "last_reset_at_ms, blocked_until_ms{more}",
                 arg("columns", family.columns), arg("more", more.columns)),
          fill("{values}, t, {cost_kept}, maximum, period_ms,\n"
                 "          {granted}, reason, {remaining}, {retry}, reset_at_ms,\n"
                 "          {blocked_until}{more_values}",
                 arg("values", family.values),
                 arg("cost_kept", proposed ? "{request_cost}" : "cost"),
                 arg("granted", with_block(parts.granted)),
                 arg("remaining", kAnswerRemaining), arg("retry", answer_retry(parts)),
                 arg("blocked_until", with_block(parts.blocked_until)),
                 arg("more_values", more.values))};
}

std::string build(Operation operation, StatementKind kind, const Dialect& dialect) {
  if (operation == Operation::reset) return build_reset();
  const Family family = family_of(kind);
  if (operation == Operation::check) {
    return fill(
        kCheck, arg("decision", decision_of(operation, kind, family, kUpdateRequestRow)),
        arg("granted", with_block(parts_of(operation).granted)),
        arg("remaining", kAnswerRemaining),
        arg("retry", answer_retry(parts_of(operation))), arg("blocked", kBlocked),
        arg("used", sql::ref("answer.used")), arg("usage_key", ""));
  }
  const Assignments update = assignments_of(operation, family, false);
  std::string proposed;
  if (dialect.proposes_decided_row) {
    const Assignments row = assignments_of(operation, family, true);
    proposed = fill(
        kProposedDecision, arg("set_columns", row.columns), arg("set_values", row.values),
        arg("decision", decision_of(operation, kind, family, kProposedRequestRow)));
  } else {
    proposed = fill(kProposedRequest);
  }
  return fill(kWrite, arg("stored_answer", kStoredAnswer), arg("table", family.table),
              arg("proposed", proposed),
                arg("set_columns", update.columns), arg("set_values", update.values),
                arg("decision", decision_of(operation, kind, family, kUpdateRequestRow)));
}

// The quota_usage view's rows of the limits of statements' kind `kind` (src/sql/usage_view.h):
// the check's answer over every owner's row of them, at the database's clock.
constexpr const char* kUsageRows = R"(SELECT usage_limit AS limit_name, usage_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM ({check}) AS usage_{kind})";

std::string build_usage_rows(StatementKind kind) {
  const Family family = family_of(kind);
  const OperationParts parts = parts_of(Operation::check);
  const std::string check = fill(
      kCheck,
      arg("decision", decision_of(Operation::check, kind, family, kUpdateRequestRow, kViewFrom)),
      arg("granted", with_block(parts.granted)), arg("remaining", kAnswerRemaining),
      arg("retry", answer_retry(parts)), arg("blocked", kBlocked), arg("used", sql::ref("answer.used")),
      arg("usage_key", "usage_limit, usage_owner, "));
  return fill(kUsageRows, arg("check", check), arg("kind", std::string(kind_name(kind))));
}

// ---------------------------------------------------------------------------------------
// A plain limit's consume and record (issue 27): a limit without overrides, shadow mode, a
// block or a calendar, for an owner that already has state (a sliding log's: kPlainLogWrite
// below, which also writes the answer, since its wait reads the log's events). The statement is an UPDATE of
// the owner's row, so no new-owner trigger runs and nothing is proposed; its decision is one
// flat chain of the family's own fragments (the general statement's policy layers, even with
// every policy a constant, cost 15k instructions more: docs/performance-notes.md); it writes
// only the state (and the verdict, last_allowed), and RETURNING computes the answer from the
// new row by the same fragments, read over the row's columns (kNewRow).
//
// Its guard: the limit's row matches only while the limit is still of this algorithm and
// plain, read from its `plain` flag (migration 0010: no shadow mode, block, calendar, or
// override of the limit or of '*', kept by triggers whoever changes the configuration), in
// the statement itself, so a change by another process or host is seen. Otherwise the
// decision has no row,
// the SET writes NULLs, and the state table's "unknown limit" check refuses the statement,
// which changes nothing; the engine reads the limit again and runs the statement of what it
// finds. An owner without state matches no row and answers nothing: the engine then runs the
// general statement, which makes the row. Both are exact: each statement is atomic.
// The general statement (what `quotactl sql` prints) answers the same for a plain limit; the
// property tests (tests/sqlite/plain_statements_test.cpp) compare the two.
constexpr const char* kPlainGuard = "l.plain";

// The request's time: the engine binds a valid :now (src/engine.cpp refuses any other), or
// NULL for the database's clock; its cost is always bound and valid.
constexpr const char* kPlainNow = "coalesce({now_ms}, {database_now})";

constexpr const char* kPlainWrite = R"(UPDATE {table} SET
  ({columns}, seen_ms, cost, maximum, period_ms, blocked_until_ms, last_allowed) =
  (SELECT {values}, t, cost, maximum, period_ms, CAST(NULL AS bigint), allowed
   FROM ({decision}) AS decision)
{owners_row})";

// The answer, read from the row the UPDATE wrote: its RETURNING list, or, run apart
// (plain_parts), a SELECT of the same list from that row (kPlainAnswerRead).
constexpr const char* kPlainAnswer = R"(last_allowed AS allowed,
  {plain_reason} AS reason,
  {remaining} AS remaining,
  {answer_retry} AS retry_after_ms,
  {reset_at} AS reset_at_ms, denied, FALSE AS shadow_denied)";
// A plain limit's reason: no policy or block, so allowed, or the cost beyond the capacity, or
// the limit reached.
constexpr const char* kPlainReason =
    R"(CASE WHEN {allowed} THEN 'ok' WHEN cost > {capacity} THEN 'cost_exceeds_capacity'
       ELSE 'rate_limited' END)";
constexpr const char* kPlainReturning = "\nRETURNING ";
constexpr const char* kPlainAnswerRead = R"(SELECT {answer}
FROM {table}
{owners_row})";
// The owner's row, which both parts name.
constexpr const char* kPlainOwnersRow = "WHERE limit_name = {limit} AND owner = {owner}";

// A plain limit's check: the same decision as a SELECT, nothing recorded, over the owner's row
// joined to the limit (an owner without state reads as one: a full window or bucket), its
// answer computed from the decision's columns by the same fragments, with the columns of the
// general check (the usage read of Engine::usage and the watches). It answers no row when the
// limit is no longer plain or of this algorithm: the engine then runs the general check.
constexpr const char* kPlainCheck = R"(SELECT allowed,
  {plain_reason} AS reason,
  {remaining} AS remaining,
  {answer_retry} AS retry_after_ms,
  {reset_at} AS reset_at_ms, denied, FALSE AS shadow_denied, {shown_used} AS used,
  shadow_denials, {capacity} AS capacity, CAST(NULL AS bigint) AS blocked_until_ms
FROM ({decision}) AS decision)";

// What a check's decision reads besides an update's: the owner's row (the update's own row),
// and the shadow-mode denials counted while the limit was in shadow mode.
constexpr const char* kPlainCheckState =
    "\n          LEFT JOIN {table} ON {table}.limit_name = l.name AND {table}.owner = {owner}";
constexpr const char* kPlainCheckCarry = ", coalesce({table}.shadow_denied, 0) AS shadow_denials";

// fixed_window and sliding_window: the names of kWindowDecision's layers.
constexpr const char* kPlainWindowDecision = R"(
  SELECT *, {used_after} AS used_after,
         denied_before + {as_integer}({denied}) AS denied
  FROM (
    SELECT *, {allowed} AS allowed
    FROM (
      SELECT maximum, period_ms, cost, t, window_key, rest, denied_before{carry}{blocked_column},
        {used} AS used,
        {previous_used} AS previous_used
      FROM (
        SELECT *, {window_key} AS window_key, {rest} AS rest,
          {row_key} AS row_key
        FROM (
          SELECT {maximum} AS maximum, l.period_ms AS period_ms, {cost_param} AS cost,
            {clock} AS t,
            quota_windows.period_ms AS s_period, quota_windows.window_key AS s_window_key,
            quota_windows.seen_ms AS s_seen, quota_windows.used AS s_used,
            quota_windows.previous_used AS s_previous,
            coalesce(quota_windows.denied, 0) AS denied_before{carry_input}
          FROM quota_limits AS l{state}
          WHERE l.name = {limit} AND l.algorithm = '{algorithm}' AND {guard}
        ) AS inputs
      ) AS keyed {barrier}
    ) AS counted
  ) AS decided)";

// token_bucket: the names of kBucketDecision's layers.
constexpr const char* kPlainBucketDecision = R"(
  SELECT *, {level_after} AS level_after,
         denied_before + {as_integer}({denied}) AS denied
  FROM (
    SELECT *, {allowed} AS allowed
    FROM (
      SELECT *, {level} AS level
      FROM (
        SELECT *, CASE WHEN s_level IS NULL THEN full_level ELSE {start} END AS start{blocked_column}
        FROM (
          SELECT {maximum} AS maximum, {burst} AS capacity, l.period_ms AS period_ms,
            {cost_param} AS cost,
            {clock} AS t,
            {full_level} AS full_level,
            CASE WHEN quota_buckets.seen_ms IS NOT NULL THEN quota_buckets.level END AS s_level,
            quota_buckets.period_ms AS s_period, quota_buckets.seen_ms AS s_seen,
            coalesce(quota_buckets.denied, 0) AS denied_before{carry_input}
          FROM quota_limits AS l{state}
          WHERE l.name = {limit} AND l.algorithm = 'token_bucket' AND {guard}
        ) AS inputs {barrier}
      ) AS started
    ) AS refilled {barrier}
  ) AS decided)";

// sliding_log: the names of kLogDecision's layers. The log's wait searches its events
// (covering_event), so, unlike the other plain statements, the answer is computed here and
// written into the row's last_* columns, as the general statement does, and read from them.
constexpr const char* kPlainLogDecision = R"(
  SELECT *,
    {remaining} AS remaining,
    {plain_reason} AS reason,
    {answer_retry} AS retry_after_ms,
    {reset_at} AS reset_at_ms,
    {total} AS total,
    {newest_after} AS newest_at_ms
  FROM (
    SELECT *, used + recorded AS used_after, used + recorded + cost - maximum AS excess,
           denied_before + {as_integer}({denied}) AS denied
    FROM (
      SELECT *, {recorded} AS recorded
      FROM (
        SELECT *, {allowed} AS allowed
        FROM (
          SELECT *, {used} AS used
          FROM (
            SELECT *, {log_live_base} AS live_base{blocked_column}
            FROM (
              SELECT {maximum} AS maximum, l.period_ms AS period_ms, {cost_param} AS cost,
                {clock} AS t, l.name AS key_limit, {owner} AS key_owner,
                quota_log_owners.total AS s_total,
                quota_log_owners.newest_at_ms AS s_newest_at,
                coalesce(quota_log_owners.denied, 0) AS denied_before{carry_input}
              FROM quota_limits AS l{state}
              WHERE l.name = {limit} AND l.algorithm = 'sliding_log' AND {guard}
            ) AS inputs {barrier}
          ) AS based
        ) AS counted
      ) AS decided {barrier}
    ) AS booked
  ) AS summed)";

constexpr const char* kPlainLogWrite = R"(UPDATE quota_log_owners SET
  ({columns}, seen_ms, cost, maximum, period_ms, blocked_until_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms) =
  (SELECT {values}, t, cost, maximum, period_ms, CAST(NULL AS bigint),
          allowed, reason, remaining, retry_after_ms, reset_at_ms
   FROM ({decision}) AS decision)
{owners_row})";

// The answer's fragments read over the written row: `t` is its seen_ms, the usage or level
// after the operation its used or level, the request's cost its cost (the statement writes
// it), the capacity its own column (maximum, or a bucket's burst), and the rest of the window
// and the full level are computed from its columns. The wait is measured from the caller's
// time, as the general statement's (kFromCaller).
sql::Bindings new_row(std::string_view capacity) {
  const std::string full_level =
      fill("({level})", arg("level", part("token_bucket", "full_level",
                                          {{"capacity", std::string(capacity)}})));
  return {{"used_after", "used"},
          {"level_after", "level"},
          {"t", "seen_ms"},
          {"rest", fill("({rest})", arg("rest", part("window", "rest", {{"t", "seen_ms"}})))},
          {"full_level", full_level},
          {"capacity", std::string(capacity)},
          {"allowed", "last_allowed"}};
}

// The answer's fragments read over a check's decision: its own columns, by their names.
sql::Bindings decision_columns(std::string_view capacity) {
  return {{"used_after", "used_after"}, {"level_after", "level_after"}, {"t", "t"},
          {"rest", "rest"},             {"full_level", "full_level"},   {"capacity", std::string(capacity)},
          {"allowed", "allowed"}};
}

// ---------------------------------------------------------------------------------------
// A limit's own policies, the flat statements (issue 27): a limit that no override concerns
// and that has no calendar, with shadow mode, a block, or both (and, with overrides, one that
// an override concerns: Shape::overridden, below). Its consume and record are the plain
// statement's UPDATE of the owner's row with the plain decision's flat chain, plus what the
// general statement does for the limit's own policies: the
// decision's inputs add the limit's shadow flag and block_ms, the row's block end and a NULL
// policy (no override); it records, counts, answers and sets the block as the general
// statement does (parts_of, kReason, kAnswerRemaining, answer_retry: the same fragments);
// and, as the general statement, it writes the answer into the row's last_* columns and
// answers them (kStoredAnswer), since a blocked answer cannot be computed from the row it
// leaves. The answer is computed in a layer of its own behind a barrier, so that the reason
// is computed once (flattened into each column that reads it, it cost 7,000 instructions).
//
// Its guard: the limit's row matches only while no override names it or '*'
// (quota_limits.overridden, migration 0016, kept by triggers whoever changes the overrides),
// read in the statement itself, and, for fixed_window, while it has no calendar (the
// family's layout_test, as in every fixed_window statement). Otherwise the decision has no
// row and the statement is refused as the plain one is; the engine reads the limit again and
// runs the statement of what it finds. With overrides, only the algorithm and the calendar
// (kOverriddenGuard): it answers for every other configuration.
// A plain limit would answer the same through it (shadow 0, block_ms NULL); the engine runs
// the plain statement there, which costs less.
constexpr const char* kFlatGuard = "NOT l.overridden";
constexpr const char* kOverriddenGuard = "TRUE";

// The inputs a flat decision adds to the plain one: the window's capacity (a bucket's is its
// burst, already an input), the caller's time, the owner's policy (NULL without overrides)
// and the limit's own policies.
constexpr const char* kFlatInputs = R"(,
            {capacity}{plain_now} AS now, {policy} AS policy, l.shadow AS shadow,
            l.block_ms AS block_ms, {table}.blocked_until_ms AS s_blocked_until)";
constexpr const char* kFlatWindowCapacity = "{maximum} AS capacity, ";
constexpr const char* kNoPolicy = "CAST(NULL AS text)";
// Whether a block holds, computed once in the layer after the inputs.
constexpr const char* kFlatBlocked = ", {blocked} AS blocked";
// ...which the window layers, which name the columns they pass on, carry.
constexpr const char* kFlatCarry = ", capacity, now, policy, shadow, block_ms, s_blocked_until";

// The answer, in a layer of its own over the flat decision.
constexpr const char* kFlatAnswer = R"(
  SELECT *,
    {remaining} AS remaining,
    {reason} AS reason,
    {answer_retry} AS retry_after_ms,
    {reset_at} AS reset_at_ms
  FROM ({decision} {barrier}) AS answered)";

constexpr const char* kFlatWrite = R"(UPDATE {table} SET
  ({set_columns}) =
  (SELECT {set_values}
   FROM ({decision}) AS decision)
{owners_row})";

// A plain statement: a check's SELECT (`returning` empty), or a consume's or record's UPDATE
// and the list its RETURNING answers.
struct PlainText {
  std::string statement;
  std::string returning;

  std::string whole() const {
    return returning.empty() ? statement : statement + kPlainReturning + returning;
  }
};

// What a plain statement adds to a finite wait measured from `evaluated_at` (the time the
// state was evaluated at) to measure it from the caller's time, as kFromCaller does for the
// general statements.
std::string plain_from_caller(std::string_view evaluated_at) {
  return fill(" + ({at} - {plain_now})", arg("at", evaluated_at), arg("plain_now", kPlainNow));
}

// The flat statement's UPDATE of `family`'s owner row over `answered`, a flat decision that
// has the answer's columns (reason, remaining, retry_after_ms, reset_at_ms): the general
// statement's assignments, the block read from the decision's column, the stored answer
// returned.
PlainText flat_write(Operation operation, const Family& family, const std::string& answered) {
  const Assignments update = assignments_of(operation, family, false, "blocked");
  return {fill(kFlatWrite, arg("table", family.table), arg("set_columns", update.columns),
               arg("set_values", update.values), arg("decision", answered),
               arg("owners_row", kPlainOwnersRow)),
          kStoredAnswer};
}

// The flat statement of `operation` on a window or bucket `algorithm` over its flat
// `decision` (build_plain), which gains the answer in a layer of its own (kFlatAnswer).
PlainText build_flat(Operation operation, Algorithm algorithm, const std::string& decision) {
  const Family family = family_of(kind_of(algorithm));
  // The algorithm's own answer (its remaining, wait and reset), as the general decision's.
  sql::Bindings bindings = arithmetic(family, "", false);
  for (auto& [name, value] : bindings) {
    if (name == "remaining" && family.layout) value = "{max}(" + value + ", 0)";
  }
  bindings.insert(bindings.end(), {{"decision", decision},
                                   {"reason", fill(kReason, arg("blocked", "blocked"))}});
  return flat_write(operation, family, sql::fill(kFlatAnswer, bindings));
}

PlainText build_plain(Operation operation, Algorithm algorithm, Shape shape = Shape::plain) {
  // A plain limit has no policy, shadow mode or block: consume records what it allows and
  // counts what it denies; record records everything and counts nothing; check does neither.
  // A flat statement records and counts as the general statement does (parts_of), with no
  // override (its policy is NULL) or with the owner's (Shape::overridden: read by the
  // general statement's joins, kOverrideJoins, and its maximum and verdict, kAllowed).
  const bool check = operation == Operation::check;
  const bool flat = shape != Shape::plain;
  const bool overrides = shape == Shape::overridden;
  if (shape == Shape::general || (flat && check)) {
    throw std::logic_error("a flat statement is a consume or a record");
  }
  // A flat decision computes whether a block holds once, as its column `blocked`
  // (kFlatBlocked), which every later layer reads.
  const auto blocked_column = [](std::string_view text) {
    return fill(text, arg("blocked", "blocked"));
  };
  const auto blocked = arg("blocked_column", flat ? with_block(kFlatBlocked) : "");
  const std::string records = flat ? blocked_column(parts_of(operation).recorded)
                              : operation == Operation::record ? "TRUE"
                              : check                          ? "FALSE"
                                                               : "allowed";
  const std::string denied = flat ? blocked_column(parts_of(operation).denied)
                             : operation == Operation::consume ? "NOT allowed"
                                                               : "FALSE";
  const std::string guard =
      flat ? (overrides ? kOverriddenGuard : kFlatGuard) +
                 std::string(family_of(kind_of(algorithm)).layout_test)
           : kPlainGuard;
  const std::string maximum = overrides ? maximum_for_owner(algorithm) : "l.maximum";
  const std::string burst = overrides ? burst_for_owner() : "l.burst";
  const auto plain_now = arg("plain_now", kPlainNow);
  const std::string_view name = to_string(algorithm);
  // The owner's policy inputs and overrides of a flat statement (and whether a block holds,
  // blocked above), which the plain statements do without.
  const auto flat_inputs = [&](const char* table, bool with_capacity) {
    return fill(kFlatInputs, arg("table", table), plain_now,
                arg("capacity", with_capacity ? fill(kFlatWindowCapacity, arg("maximum", maximum))
                                              : std::string()),
                arg("policy", overrides ? kPolicy : kNoPolicy));
  };
  const auto overrides_state = [&] {
    return overrides ? override_joins("{limit}", "{owner}") : std::string();
  };
  const auto verdict = [&](std::string_view capacity) {
    const std::string fits = part(name, "fits");
    return arg("allowed", overrides ? fill(kAllowed, arg("fits", fits))
                                    : fill("cost <= {capacity} AND {fits}",
                                           arg("capacity", capacity), arg("fits", fits)));
  };
  if (algorithm == Algorithm::sliding_log) {
    if (check) throw std::logic_error("a sliding log's check is the general statement");
    const std::string newest = part(name, "newest");
    // A flat statement answers as the general one (the caller's time added by answer_retry
    // at the write); a plain one from its own columns.
    const std::string retry = part(name, "retry") + (flat ? "" : plain_from_caller("t"));
    const std::string decision = fill(
        kPlainLogDecision, arg("guard", guard), plain_now, blocked, verdict("maximum"),
        arg("maximum", maximum), arg("state", overrides_state()),
        arg("carry_input", flat ? flat_inputs("quota_log_owners", true) : std::string()),
        arg("plain_reason",
            flat ? fill(kReason, arg("blocked", "blocked"))
                 : fill(kPlainReason, arg("allowed", "allowed"), arg("capacity", "maximum"))),
        arg("clock", part("clock", "t", {{"now", kPlainNow}, {"s_seen", "quota_log_owners.seen_ms"}})),
        arg("remaining", part(name, "remaining")),
        arg("answer_retry",
            part("answer", "retry", {{"retry", retry}, {"capacity", flat ? "capacity" : "maximum"}})),
        arg("reset_at", part(name, "reset_at", {{"newest", newest}})),
        arg("total", part(name, "total")),
        arg("newest_after", part(name, "newest_after", {{"newest", newest}})),
        arg("denied", denied), arg("recorded", part(name, "recorded", {{"records", records}})),
        arg("used", part(name, "used")));
    // The log's decision computes its answer itself (its outer layer).
    if (flat) return flat_write(operation, family_of(StatementKind::sliding_log), decision);
    return {fill(kPlainLogWrite, arg("owners_row", kPlainOwnersRow), arg("columns", kLogColumns),
                 arg("values", kLogValues), arg("decision", decision)),
            kStoredAnswer};
  }
  const bool bucket = algorithm == Algorithm::token_bucket;
  const char* table = bucket ? "quota_buckets" : "quota_windows";
  // The capacity: the row's maximum, or a bucket's burst (the decision's `capacity`).
  const std::string_view capacity = bucket ? (check ? "capacity" : "burst") : "maximum";
  const sql::Bindings row = check ? decision_columns(capacity) : new_row(capacity);
  const std::string window_end = part(kPeriodWindows.fragments, "window_end");
  const auto answer = [&](std::string_view fragment) {
    sql::Bindings bindings = row;
    bindings.push_back({"window_end", sql::fill(window_end, row)});
    return part(name, fragment, bindings);
  };
  // A wait is measured from the caller's time (kFromCaller): the row's seen_ms, or the
  // check's t, is the time the state was evaluated at.
  const std::string retry = answer("retry") + plain_from_caller(check ? "t" : "seen_ms");
  sql::Bindings retry_bindings = row;
  retry_bindings.push_back({"retry", retry});
  const std::string answer_retry = part("answer", "retry", retry_bindings);
  const std::string remaining =
      bucket ? answer("remaining") : "{max}(" + answer("remaining") + ", 0)";
  const std::string clock =
      part("clock", "t", {{"now", kPlainNow}, {"s_seen", fill("{table}.seen_ms", arg("table", table))}});
  const auto state =
      arg("state", check ? fill(kPlainCheckState, arg("table", table)) : overrides_state());
  const auto carry_input = arg("carry_input", check  ? fill(kPlainCheckCarry, arg("table", table))
                                              : flat ? flat_inputs(table, !bucket)
                                                     : std::string());
  const auto allowed = verdict(bucket ? "capacity" : "maximum");
  const auto carry = arg("carry", check ? ", shadow_denials" : flat ? kFlatCarry : "");
  std::string decision;
  if (bucket) {
    decision = fill(
        kPlainBucketDecision, arg("guard", guard), plain_now, arg("clock", clock), state,
        carry_input, blocked, allowed, arg("maximum", maximum), arg("burst", burst),
        arg("full_level", part(name, "full_level", {{"capacity", burst}, {"period_ms", "l.period_ms"}})),
        arg("level_after", part(name, "level_after", {{"records", records}})),
        arg("denied", denied), arg("level", part(name, "refill")),
        arg("start", part(name, "start")));
  } else {
    const WindowLayout& layout = kPeriodWindows;
    decision = fill(
        kPlainWindowDecision, arg("guard", guard), plain_now, arg("clock", clock), state,
        carry_input, carry, blocked, allowed, arg("maximum", maximum), arg("algorithm", name),
        arg("used_after", part("window", "used_after", {{"records", records}})),
        arg("denied", denied), arg("window_key", part(layout.fragments, "window_key")),
        arg("row_key", part(layout.fragments, "row_key")), arg("rest", sql::ref("window.rest")),
        arg("used", part("window", "used", {{"take", ""}})),
        arg("previous_used", sql::ref("window.previous_used")));
  }
  if (flat) return build_flat(operation, algorithm, decision);
  if (check) {
    return {fill(kPlainCheck, arg("decision", decision), arg("capacity", capacity),
                 arg("plain_reason", fill(kPlainReason, arg("allowed", "allowed"), arg("capacity", capacity))),
                arg("remaining", remaining), arg("answer_retry", answer_retry),
                arg("reset_at", answer("reset_at")), arg("shown_used", answer("shown_used"))),
            {}};
  }
  return {fill(kPlainWrite, arg("table", table), arg("owners_row", kPlainOwnersRow),
               arg("columns", bucket ? kBucketColumns : kWindowColumns),
               arg("values", bucket ? kBucketValues : kWindowValues), arg("decision", decision)),
          fill(kPlainAnswer, arg("capacity", capacity), arg("remaining", remaining),
               arg("plain_reason",
                   fill(kPlainReason, arg("allowed", "last_allowed"), arg("capacity", capacity))),
               arg("answer_retry", answer_retry), arg("reset_at", answer("reset_at")))};
}

}  // namespace

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

// The two parts of a plain or flat consume or record of `kind` (plain_parts): its UPDATE, and
// the SELECT of its RETURNING list from the owner's row.
PlainParts parts_of_text(const PlainText& text, StatementKind kind, const Dialect& dialect) {
  return {finish(text.statement, dialect),
          finish(fill(kPlainAnswerRead, arg("answer", text.returning),
                      arg("table", state_table(kind)), arg("owners_row", kPlainOwnersRow)),
                 dialect)};
}

// consume, record and check of each plain kind (`whole`), and consume's and record's parts.
struct PlainStatements {
  std::array<std::array<std::string, 3>, 4> whole;
  std::array<std::array<PlainParts, 2>, 4> parts;
};

PlainStatements build_all_plain(const Dialect& dialect) {
  PlainStatements built;
  for (StatementKind kind : {StatementKind::plain_fixed_window, StatementKind::plain_sliding_window,
                             StatementKind::plain_token_bucket, StatementKind::plain_sliding_log}) {
    const auto index = static_cast<std::size_t>(static_cast<int>(kind) -
                                                static_cast<int>(StatementKind::plain_fixed_window));
    const Algorithm algorithm = stored_algorithm(kind);
    for (const Operation operation : {Operation::consume, Operation::record}) {
      const PlainText text = build_plain(operation, algorithm);
      const std::size_t at = operation == Operation::consume ? 0 : 1;
      built.whole[index][at] = finish(text.whole(), dialect);
      built.parts[index][at] = parts_of_text(text, kind, dialect);
    }
    if (kind != StatementKind::plain_sliding_log) {
      built.whole[index][2] = finish(build_plain(Operation::check, algorithm).whole(), dialect);
    }
  }
  return built;
}

const PlainStatements& plain_statements(const Dialect& dialect) {
  static const PlainStatements plain_sqlite = build_all_plain(kSqlite);
  static const PlainStatements plain_postgresql = build_all_plain(kPostgresql);
  return dialect.name == kPostgresql.name ? plain_postgresql : plain_sqlite;
}

std::size_t flat_index(StatementKind kind) {
  return static_cast<std::size_t>(static_cast<int>(kind) -
                                  static_cast<int>(StatementKind::flat_fixed_window));
}

// consume and record of each flat kind (with overrides and without), whole and in parts.
struct FlatStatements {
  std::array<std::array<std::string, 2>, 8> whole;
  std::array<std::array<PlainParts, 2>, 8> parts;
};

FlatStatements build_all_flat(const Dialect& dialect) {
  FlatStatements built;
  for (StatementKind kind :
       {StatementKind::flat_fixed_window, StatementKind::flat_sliding_window,
        StatementKind::flat_token_bucket, StatementKind::flat_sliding_log,
        StatementKind::overridden_fixed_window, StatementKind::overridden_sliding_window,
        StatementKind::overridden_token_bucket, StatementKind::overridden_sliding_log}) {
    const std::size_t index = flat_index(kind);
    const Shape shape = kind >= StatementKind::overridden_fixed_window ? Shape::overridden : Shape::flat;
    for (const Operation operation : {Operation::consume, Operation::record}) {
      const PlainText text = build_plain(operation, stored_algorithm(kind), shape);
      const std::size_t at = operation == Operation::consume ? 0 : 1;
      built.whole[index][at] = finish(text.whole(), dialect);
      built.parts[index][at] = parts_of_text(text, kind, dialect);
    }
  }
  return built;
}

const FlatStatements& flat_statements(const Dialect& dialect) {
  static const FlatStatements flat_sqlite = build_all_flat(kSqlite);
  static const FlatStatements flat_postgresql = build_all_flat(kPostgresql);
  return dialect.name == kPostgresql.name ? flat_postgresql : flat_sqlite;
}

}  // namespace

std::optional<StatementKind> plain_kind(Operation operation, StatementKind kind) {
  if (operation == Operation::check) {
    // A concurrency limit's and a sliding log's check are their general statements.
    if (kind == StatementKind::concurrency || kind == StatementKind::sliding_log) {
      return std::nullopt;
    }
  } else if (operation != Operation::consume && operation != Operation::record) {
    return std::nullopt;
  }
  switch (kind) {
    case StatementKind::fixed_window:
      return StatementKind::plain_fixed_window;
    case StatementKind::sliding_window:
      return StatementKind::plain_sliding_window;
    case StatementKind::token_bucket:
      return StatementKind::plain_token_bucket;
    case StatementKind::sliding_log:
      return StatementKind::plain_sliding_log;
    case StatementKind::concurrency:
      return StatementKind::plain_concurrency;
    default:
      return std::nullopt;
  }
}

std::optional<StatementKind> flat_kind(Operation operation, StatementKind kind, bool overrides) {
  // The flat kinds are the plain kinds' consume and record (a concurrency limit's aside), in
  // the same order (src/statements.h), and then the same with overrides.
  const auto plain = operation == Operation::check ? std::nullopt : plain_kind(operation, kind);
  if (!plain || *plain > StatementKind::plain_sliding_log) return std::nullopt;
  const StatementKind first =
      overrides ? StatementKind::overridden_fixed_window : StatementKind::flat_fixed_window;
  return static_cast<StatementKind>(static_cast<int>(first) + static_cast<int>(*plain) -
                                    static_cast<int>(StatementKind::plain_fixed_window));
}

std::optional<StatementKind> specialised_kind(Operation operation, StatementKind kind, Shape shape) {
  switch (shape) {
    case Shape::plain:
      return plain_kind(operation, kind);
    case Shape::flat:
      return flat_kind(operation, kind);
    case Shape::overridden:
      return flat_kind(operation, kind, true);
    case Shape::general:
      break;
  }
  return std::nullopt;
}

StatementKind general_kind(StatementKind kind) {
  return is_specialised(kind) ? kind_of(stored_algorithm(kind)) : kind;
}

Algorithm stored_algorithm(StatementKind kind) {
  switch (kind) {
    case StatementKind::sliding_log:
    case StatementKind::plain_sliding_log:
    case StatementKind::flat_sliding_log:
    case StatementKind::overridden_sliding_log:
      return Algorithm::sliding_log;
    case StatementKind::fixed_window:
    case StatementKind::calendar_window:
    case StatementKind::plain_fixed_window:
    case StatementKind::flat_fixed_window:
    case StatementKind::overridden_fixed_window:
      return Algorithm::fixed_window;
    case StatementKind::sliding_window:
    case StatementKind::plain_sliding_window:
    case StatementKind::flat_sliding_window:
    case StatementKind::overridden_sliding_window:
      return Algorithm::sliding_window;
    case StatementKind::token_bucket:
    case StatementKind::plain_token_bucket:
    case StatementKind::flat_token_bucket:
    case StatementKind::overridden_token_bucket:
      return Algorithm::token_bucket;
    case StatementKind::concurrency:
    case StatementKind::plain_concurrency:
      return Algorithm::concurrency;
  }
  throw std::logic_error("unknown statement kind");
}

const std::string& statement(Operation operation, StatementKind kind) {
  return statement(kSqlite, operation, kind);
}

const std::string& statement(const Dialect& dialect, Operation operation, StatementKind kind) {
  if (kind == StatementKind::plain_concurrency) return sql::plain_lease_statement(dialect, operation);
  if (kind == StatementKind::concurrency && operation != Operation::reset) {
    return sql::lease_statement(dialect, operation);
  }
  if (kind == StatementKind::concurrency) kind = StatementKind::sliding_log;  // one reset
  if (is_flat(kind)) {
    if (operation != Operation::consume && operation != Operation::record) {
      throw std::logic_error("no flat statement for this operation");
    }
    return flat_statements(dialect).whole[flat_index(kind)][operation == Operation::consume ? 0 : 1];
  }
  if (is_plain(kind)) {
    const auto index = static_cast<std::size_t>(static_cast<int>(kind) -
                                                static_cast<int>(StatementKind::plain_fixed_window));
    if (operation != Operation::consume && operation != Operation::record &&
        operation != Operation::check) {
      throw std::logic_error("no plain statement for this operation");
    }
    const auto& whole = plain_statements(dialect).whole[index];
    const std::string& text = operation == Operation::consume  ? whole[0]
                              : operation == Operation::record ? whole[1]
                                                               : whole[2];
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

const PlainParts* plain_parts(const Dialect& dialect, Operation operation, StatementKind kind) {
  if (!is_specialised(kind) || kind == StatementKind::plain_concurrency) return nullptr;
  if (operation != Operation::consume && operation != Operation::record) return nullptr;
  if (is_flat(kind)) {
    return &flat_statements(dialect).parts[flat_index(kind)][operation == Operation::consume ? 0 : 1];
  }
  const auto index = static_cast<std::size_t>(static_cast<int>(kind) -
                                              static_cast<int>(StatementKind::plain_fixed_window));
  return &plain_statements(dialect).parts[index][operation == Operation::consume ? 0 : 1];
}

const char* state_table(StatementKind kind) {
  return sql::family_of(stored_algorithm(kind)).owners.name;
}

std::string usage_rows(StatementKind kind) { return build_usage_rows(kind); }

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
    case StatementKind::plain_sliding_log:
      return "plain_sliding_log";
    case StatementKind::plain_concurrency:
      return "plain_concurrency";
    case StatementKind::flat_fixed_window:
      return "flat_fixed_window";
    case StatementKind::flat_sliding_window:
      return "flat_sliding_window";
    case StatementKind::flat_token_bucket:
      return "flat_token_bucket";
    case StatementKind::overridden_fixed_window:
      return "overridden_fixed_window";
    case StatementKind::overridden_sliding_window:
      return "overridden_sliding_window";
    case StatementKind::overridden_token_bucket:
      return "overridden_token_bucket";
    case StatementKind::flat_sliding_log:
      return "flat_sliding_log";
    case StatementKind::overridden_sliding_log:
      return "overridden_sliding_log";
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
