// The engine's statements, built once from the templates below.
//
// Each algorithm family has one "decision" SELECT that reads the owner's state row(s) and
// computes, for the request (:limit, :owner, :cost, :now), the answer and the state row to
// write. The operations differ only in which of its output they use:
//
//   check            SELECT answer FROM (decision)                      -- never writes
//   consume, record  INSERT INTO state SELECT row FROM (decision) WHERE true
//                    ON CONFLICT (key) DO UPDATE SET every column = excluded.column
//                    RETURNING answer                                   -- one row written
//
// The decision SELECT runs inside the INSERT, after SQLite has taken the write lock, so the
// state it read is the state it overwrites: check-and-record is atomic across connections
// and processes without any explicit transaction.
//
// How a decision is laid out (innermost first):
//   q  the request: :owner, the cost (NULL -> 1), the time (NULL -> the database's clock);
//   l  the limit by name (LEFT JOIN for writes, so that an unknown limit reaches the table's
//      "unknown limit" guard trigger; JOIN for check, so that it returns no row);
//   n  the owner's newest state row, which carries denied and seen_ms;
//   t  the evaluation time: max(request time, seen_ms), the clock rule of the SPEC.
//
// Examples (limit "send": sliding_log, maximum 2, period 1000 ms; owner "u"):
//   consume :now=5000  -> allowed 1, ok,           remaining 1, retry 0,    reset_at 6000
//   consume :now=5400  -> allowed 1, ok,           remaining 0, retry 0,    reset_at 6400
//   consume :now=5500  -> allowed 0, rate_limited, remaining 0, retry 500,  reset_at 6400
//   check   :now=6000  -> allowed 1, ok,           remaining 1, retry 0,    reset_at 6400
//   consume :now=4000  -> evaluated at 5500 (seen_ms): allowed 0, retry 500
// tests/engine_test.cpp runs these examples through the Engine, tests/sql_test.cpp in plain SQL.
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

// The request row, joined to its limit (`{join}` is "LEFT JOIN" or "JOIN"). A statement
// matches only limits of its own algorithm (`{algorithm}`): run against a limit of another
// algorithm, it behaves as for an unknown limit.
constexpr const char* kRequest = R"(
      (SELECT :owner AS owner, coalesce(:cost, 1) AS cost,
              coalesce(:now, {now}) AS now) AS q
      {join} quota_limits AS l ON l.name = :limit{algorithm})";

// What each operation records and counts, given the decision's `allowed`.
struct OperationParts {
  const char* recorded;  // does this operation record the cost?
  const char* denied;    // does it add one to the owner's denied counter?
  const char* join;
};

OperationParts parts_of(Operation operation) {
  switch (operation) {
    case Operation::check:
      return {"0", "0", "JOIN"};
    case Operation::consume:
      return {"allowed", "NOT allowed", "LEFT JOIN"};
    case Operation::record:
      return {"1", "0", "LEFT JOIN"};
    case Operation::reset:
      break;
  }
  throw std::logic_error("reset has no decision");
}

// sliding_log. Usage at t is the cost of the rows with at_ms > t - period_ms: the newest
// row's running total minus the total before the first such row (f). To be allowed after a
// denial, `excess` units must expire: the wait is until the first row whose running total
// covers them (the row recorded by this very statement, at t, when a record overdraws).
constexpr const char* kSlidingLogDecision = R"(
  SELECT *,
    CASE WHEN allowed THEN 0
         WHEN cost > maximum THEN -1
         ELSE coalesce((SELECT e.at_ms FROM quota_log AS e
                        WHERE e.limit_id = decided.limit_id AND e.owner = decided.owner
                          AND e.at_ms > t - period_ms AND e.total - live_base >= excess
                        ORDER BY e.at_ms LIMIT 1), t) + period_ms - t
    END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (CASE WHEN recorded THEN t ELSE newest_at END) + period_ms
         ELSE t END AS reset_at_ms
  FROM (
    SELECT *,
      max(maximum - used_after, 0) AS remaining,
      CASE WHEN allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
           ELSE 'rate_limited' END AS reason,
      used_after + cost - maximum AS excess
    FROM (
      SELECT *, used + CASE WHEN recorded THEN cost ELSE 0 END AS used_after
      FROM (
        SELECT *, {recorded} AS recorded, denied_before + ({denied}) AS denied
        FROM (
          SELECT *, cost <= maximum AND used + cost <= maximum AS allowed
          FROM (
            SELECT l.id AS limit_id, l.maximum AS maximum, l.period_ms AS period_ms,
                   q.owner AS owner, q.cost AS cost, max(q.now, coalesce(n.seen_ms, 0)) AS t,
                   n.at_ms AS newest_at, n.cost AS newest_cost, n.total AS newest_total,
                   coalesce(n.denied, 0) AS denied_before, f.total - f.cost AS live_base,
                   coalesce(n.total - (f.total - f.cost), 0) AS used
            FROM {request}
            LEFT JOIN quota_log AS n
              ON n.limit_id = l.id AND n.owner = q.owner
             AND n.at_ms = (SELECT max(at_ms) FROM quota_log
                            WHERE limit_id = l.id AND owner = q.owner)
            LEFT JOIN quota_log AS f
              ON f.limit_id = l.id AND f.owner = q.owner
             AND f.at_ms = (SELECT min(at_ms) FROM quota_log
                            WHERE limit_id = l.id AND owner = q.owner
                              AND at_ms > max(q.now, n.seen_ms) - l.period_ms)
          )
        )
      )
    )
  ) AS decided)";

// The row a consume or record writes to quota_log: a new row at t when it records (merged
// into the newest row when that is at the same millisecond), else the newest row with its
// counters updated (a first, denied request creates a row of cost 0). When nothing is live
// the running total starts again from zero.
constexpr const char* kSlidingLogWrite = R"(INSERT INTO quota_log
  (limit_id, owner, at_ms, cost, total, denied, seen_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms)
SELECT limit_id, owner,
  CASE WHEN recorded THEN t ELSE coalesce(newest_at, t) END,
  CASE WHEN recorded THEN (CASE WHEN newest_at = t THEN newest_cost ELSE 0 END) + cost
       ELSE coalesce(newest_cost, 0) END,
  CASE WHEN recorded THEN (CASE WHEN used = 0 THEN 0 ELSE newest_total END) + cost
       ELSE coalesce(newest_total, 0) END,
  denied, t, allowed, reason, remaining, retry_after_ms, reset_at_ms
FROM ({decision}) WHERE true
ON CONFLICT (limit_id, owner, at_ms) DO UPDATE SET
  cost = excluded.cost, total = excluded.total, denied = excluded.denied,
  seen_ms = excluded.seen_ms, last_allowed = excluded.last_allowed,
  last_reason = excluded.last_reason, last_remaining = excluded.last_remaining,
  last_retry_after_ms = excluded.last_retry_after_ms,
  last_reset_at_ms = excluded.last_reset_at_ms
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied)";

// fixed_window. The owner's newest row is its current window (window_key = k) or an older
// one, which then counts nothing; the wait after a denial is to the next window.
constexpr const char* kFixedWindowDecision = R"(
  SELECT *,
    CASE WHEN allowed THEN 0 WHEN cost > maximum THEN -1
         ELSE (window_key + 1) * period_ms - t END AS retry_after_ms,
    CASE WHEN used_after > 0 THEN (window_key + 1) * period_ms ELSE t END AS reset_at_ms
  FROM (
    SELECT *,
      max(maximum - used_after, 0) AS remaining,
      CASE WHEN allowed THEN 'ok' WHEN cost > maximum THEN 'cost_exceeds_capacity'
           ELSE 'rate_limited' END AS reason
    FROM (
      SELECT *, used + CASE WHEN recorded THEN cost ELSE 0 END AS used_after
      FROM (
        SELECT *, {recorded} AS recorded, denied_before + ({denied}) AS denied
        FROM (
          SELECT *, cost <= maximum AND used + cost <= maximum AS allowed
          FROM (
            SELECT *,
              CASE WHEN newest_key = window_key THEN newest_used ELSE 0 END AS used,
              CASE newest_key WHEN window_key THEN newest_previous
                              WHEN window_key - 1 THEN newest_used ELSE 0 END AS previous_used
            FROM (
              SELECT *, t / period_ms AS window_key
              FROM (
                SELECT l.id AS limit_id, l.maximum AS maximum, l.period_ms AS period_ms,
                       q.owner AS owner, q.cost AS cost,
                       max(q.now, coalesce(n.seen_ms, 0)) AS t,
                       n.window_key AS newest_key, n.used AS newest_used,
                       n.previous_used AS newest_previous,
                       coalesce(n.denied, 0) AS denied_before
                FROM {request}
                LEFT JOIN quota_windows AS n
                  ON n.limit_id = l.id AND n.owner = q.owner
                 AND n.window_key = (SELECT max(window_key) FROM quota_windows
                                     WHERE limit_id = l.id AND owner = q.owner)
              )
            )
          )
        )
      )
    )
  ))";

// The row a consume or record writes to quota_windows: the current window's.
constexpr const char* kWindowWrite = R"(INSERT INTO quota_windows
  (limit_id, owner, window_key, used, previous_used, denied, seen_ms,
   last_allowed, last_reason, last_remaining, last_retry_after_ms, last_reset_at_ms)
SELECT limit_id, owner, window_key, used_after, previous_used, denied, t,
  allowed, reason, remaining, retry_after_ms, reset_at_ms
FROM ({decision}) WHERE true
ON CONFLICT (limit_id, owner, window_key) DO UPDATE SET
  used = excluded.used, previous_used = excluded.previous_used, denied = excluded.denied,
  seen_ms = excluded.seen_ms, last_allowed = excluded.last_allowed,
  last_reason = excluded.last_reason, last_remaining = excluded.last_remaining,
  last_retry_after_ms = excluded.last_retry_after_ms,
  last_reset_at_ms = excluded.last_reset_at_ms
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied)";

constexpr const char* kCheck = R"(SELECT allowed, reason, remaining, retry_after_ms, reset_at_ms,
  denied, used_after AS used
FROM ({decision}))";

// reset: a request row whose trigger deletes the owner's state for the limit, then itself.
constexpr const char* kReset = R"(INSERT INTO quota_resets (limit_id, owner, now_ms, remaining)
SELECT l.id, q.owner, q.now, coalesce(l.burst, l.maximum)
FROM {request}
RETURNING 1 AS allowed, 'ok' AS reason, remaining, 0 AS retry_after_ms,
  now_ms AS reset_at_ms, 0 AS denied)";

std::string request(const char* join, const std::string& algorithm_filter) {
  return fmt::format(fmt::runtime(kRequest), fmt::arg("now", kDatabaseNow),
                     fmt::arg("join", join), fmt::arg("algorithm", algorithm_filter));
}

std::string build(Operation operation, Algorithm algorithm) {
  if (operation == Operation::reset) {
    return fmt::format(fmt::runtime(kReset), fmt::arg("request", request("LEFT JOIN", "")));
  }
  const OperationParts parts = parts_of(operation);
  const std::string filter = fmt::format(" AND l.algorithm = '{}'", to_string(algorithm));
  const char* decision_template = nullptr;
  const char* write_template = nullptr;
  switch (algorithm) {
    case Algorithm::sliding_log:
      decision_template = kSlidingLogDecision;
      write_template = kSlidingLogWrite;
      break;
    case Algorithm::fixed_window:
      decision_template = kFixedWindowDecision;
      write_template = kWindowWrite;
      break;
    case Algorithm::sliding_window:
    case Algorithm::token_bucket:
      throw std::logic_error("algorithm not implemented");
  }
  const std::string decision =
      fmt::format(fmt::runtime(decision_template), fmt::arg("request", request(parts.join, filter)),
                  fmt::arg("recorded", parts.recorded), fmt::arg("denied", parts.denied));
  const char* outer = operation == Operation::check ? kCheck : write_template;
  return fmt::format(fmt::runtime(outer), fmt::arg("decision", decision));
}

}  // namespace

const std::string& statement(Operation operation, Algorithm algorithm) {
  static const auto table = [] {
    std::array<std::array<std::string, 4>, 4> built;
    for (Operation op : {Operation::check, Operation::consume, Operation::record,
                         Operation::reset}) {
      for (Algorithm algo : {Algorithm::sliding_log, Algorithm::fixed_window}) {
        built[static_cast<int>(op)][static_cast<int>(algo)] = build(op, algo);
      }
    }
    return built;
  }();
  const std::string& text = table[static_cast<int>(operation)][static_cast<int>(algorithm)];
  if (text.empty()) throw std::logic_error("no statement for this algorithm");
  return text;
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
  }
  return "?";
}

}  // namespace quota::detail
