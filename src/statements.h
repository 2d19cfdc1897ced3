// The SQL the engine runs: one statement per operation and algorithm.
//
// These texts are the product's SQL interface. The engine prepares exactly these strings
// (and, for a plain limit's consume and record, kPlainFixedWindow ... below), `quotactl sql`
// prints them, and any SQLite client may run them with the named parameters
// :limit, :owner, :cost (NULL means 1) and :now (NULL means the database's current time).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "quota/limit.h"
#include "sql/dialect.h"

namespace quota::detail {

enum class Operation { check, consume, record, reset, refund };

// The statements are kept per algorithm and, for fixed_window, per layout of its windows: a
// calendar limit (Limit::calendar) has statements of its own, so that the calendar's
// arithmetic costs nothing to the other limits. kCalendarWindow is their index: an internal
// value of Algorithm that the engine caches and passes to the statements, never stored,
// printed or returned to a caller (stored_algorithm() turns it back into fixed_window). The
// statements of each kind match only limits of that kind, as those of each algorithm only
// limits of that algorithm: the fixed_window statements answer "unknown limit" for a
// calendar limit, and the calendar statements for a fixed_window limit without a calendar.
inline constexpr Algorithm kCalendarWindow = static_cast<Algorithm>(4);

// The statements' kind of a limit of `algorithm`, with a calendar period or not.
inline Algorithm statement_algorithm(Algorithm algorithm, bool calendar) {
  return calendar && algorithm == Algorithm::fixed_window ? kCalendarWindow : algorithm;
}

// A plain limit's statements (no override for the owner, no shadow mode, no block, no
// calendar) for an owner that has state: consume and record of fixed_window, sliding_window
// and token_bucket, each an UPDATE of the owner's row that costs what the limit uses
// (src/statements.cpp, "A plain limit's consume and record"). Internal kinds, like
// kCalendarWindow: the engine runs one for a limit that it read as plain; one answers no
// row for an owner without state and fails with "unknown limit" when the limit or the
// owner is no longer plain, and the engine then runs the general statement of the limit's
// kind. `quotactl sql` prints only the general statements, which answer the same.
inline constexpr Algorithm kPlainFixedWindow = static_cast<Algorithm>(5);
inline constexpr Algorithm kPlainSlidingWindow = static_cast<Algorithm>(6);
inline constexpr Algorithm kPlainTokenBucket = static_cast<Algorithm>(7);

inline bool is_plain(Algorithm kind) {
  return kind == kPlainFixedWindow || kind == kPlainSlidingWindow || kind == kPlainTokenBucket;
}

// The plain statements' kind of `operation` on a limit of statements' kind `kind`, or
// nullopt when there is none (check, refund, reset; sliding_log; calendar windows).
std::optional<Algorithm> plain_kind(Operation operation, Algorithm kind);

// The general kind of a plain kind (any other kind: itself).
Algorithm general_kind(Algorithm kind);

// The algorithm of a statements' kind.
inline Algorithm stored_algorithm(Algorithm kind) {
  return kind == kCalendarWindow ? Algorithm::fixed_window : kind;
}

// "sliding_log", ..., or "calendar_window" for kCalendarWindow: a name for the statements
// of a kind (PostgreSQL's prepared statements are named after it).
std::string_view kind_name(Algorithm kind);

// The statement for `operation` on a limit of `algorithm` (reset is the same for all).
// Every statement returns one row with allowed, reason, remaining, retry_after_ms,
// reset_at_ms, denied and shadow_denied (1 when a shadow-mode consume would have been
// denied); check also returns used, shadow_denials (the owner's count) and capacity (the
// owner's: the limit's maximum or burst, or its override's). check returns no
// row for an unknown limit, the others fail with "unknown limit". refund gives back up to
// :cost units and answers like a check of cost 1.
const std::string& statement(Operation operation, Algorithm algorithm);
// The same statement in `dialect`'s spelling (src/sql/dialect.h): PostgreSQL's takes $1..$4
// for :limit, :owner, :cost and :now.
const std::string& statement(const Dialect& dialect, Operation operation, Algorithm algorithm);

// The table that holds the per-owner state of `algorithm`'s limits: quota_windows,
// quota_log_owners or quota_buckets.
const char* state_table(Algorithm algorithm);

// "check", "consume", "record", "reset" or "refund".
const char* operation_name(Operation operation);

// The quota_usage view's rows of the limits of statements' kind `kind`, unfinished (the
// dialect's fragments left for sql::finish): src/sql/usage_view.cpp assembles the view.
std::string usage_rows(Algorithm kind);

}  // namespace quota::detail
