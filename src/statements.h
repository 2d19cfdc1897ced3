// The SQL the engine runs: one statement per operation and algorithm.
//
// These texts are the product's SQL interface. The engine prepares exactly these strings
// (and, for a plain limit's consume and record, the plain kinds below), `quotactl sql`
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

// Which statements a limit's requests run: those of its algorithm, and for fixed_window,
// those of its layout of windows: a calendar limit (Limit::calendar) has statements of its
// own, so that the calendar's arithmetic costs nothing to the other limits. A kind is
// internal: the engine caches it and passes it to the statements, it is never stored, printed
// or returned to a caller (stored_algorithm() gives the limit's algorithm). The statements of
// each kind match only limits of that kind, as those of each algorithm only limits of that
// algorithm: the fixed_window statements answer "unknown limit" for a calendar limit, and the
// calendar_window statements for a fixed_window limit without a calendar.
//
// A plain limit's statements (quota_limits.plain, migration 0010: no override of the limit or
// of '*', no shadow mode, no block, no calendar) for an owner that has state: consume and record of fixed_window, sliding_window,
// token_bucket and sliding_log (and check of the first three), each an UPDATE of the owner's row that costs what the limit uses
// (src/statements.cpp, "A plain limit's consume and record"). The engine runs one for a
// limit that it read as plain; one answers no row for an owner without state and fails with
// "unknown limit" when the limit is no longer plain, and the engine then runs
// the general statement of the limit's kind. `quotactl sql` prints only the general
// statements, which answer the same.
enum class StatementKind {
  // The general statements of each algorithm, in Algorithm's order.
  sliding_log,
  fixed_window,
  sliding_window,
  token_bucket,
  calendar_window,  // fixed_window with a calendar period
  // The plain statements (consume and record only).
  plain_fixed_window,
  plain_sliding_window,
  plain_token_bucket,
  plain_sliding_log,  // consume and record only: a sliding log's check is the general one
  // A concurrency limit's leases (src/sql/lease_statements.h): check, consume (acquire),
  // record and reset.
  concurrency,
  // A plain concurrency limit's consume (acquire) and record.
  plain_concurrency,
  // The flat statements (consume and record only), in the plain kinds' order: a limit that no
  // override concerns (quota_limits.overridden, migration 0016) and without a calendar, with
  // shadow mode or a block read from the limit's row inside the statement.
  flat_fixed_window,
  flat_sliding_window,
  flat_token_bucket,
  flat_sliding_log,
  // The flat statements with overrides (consume and record only): the same with the owner's
  // override read as the general statement reads it, for a limit that an override concerns
  // (overridden 1) and without a calendar.
  overridden_fixed_window,
  overridden_sliding_window,
  overridden_token_bucket,
  overridden_sliding_log,
};

// Which specialised statements a limit's consume and record run first, from its flags as the
// engine read them: plain (quota_limits.plain), flat (not plain, but not overridden and
// without a calendar: shadow mode or a block), overridden (an override concerns it, and it has
// no calendar: the flat statements with overrides), or none (the general statement).
enum class Shape { general, plain, flat, overridden };

// The statements' kind of a limit of `algorithm`, with a calendar period or not.
inline StatementKind kind_of(Algorithm algorithm, bool calendar = false) {
  if (calendar && algorithm == Algorithm::fixed_window) return StatementKind::calendar_window;
  if (algorithm == Algorithm::concurrency) return StatementKind::concurrency;
  return static_cast<StatementKind>(algorithm);
}

inline bool is_plain(StatementKind kind) {
  return kind == StatementKind::plain_fixed_window ||
         kind == StatementKind::plain_sliding_window || kind == StatementKind::plain_token_bucket ||
         kind == StatementKind::plain_sliding_log || kind == StatementKind::plain_concurrency;
}

// A flat statement, with overrides or without.
inline bool is_flat(StatementKind kind) {
  return kind >= StatementKind::flat_fixed_window && kind <= StatementKind::overridden_sliding_log;
}

// A statement specialised to its limit's configuration (plain or flat): an UPDATE of the
// owner's row that answers no row for an owner without state and fails with "unknown limit"
// when the limit no longer has that configuration; the engine then runs the general one.
inline bool is_specialised(StatementKind kind) { return is_plain(kind) || is_flat(kind); }

// The plain statements' kind of `operation` on a limit of statements' kind `kind`, or
// nullopt when there is none (refund, reset; a concurrency limit's and a sliding log's
// check; calendar windows).
std::optional<StatementKind> plain_kind(Operation operation, StatementKind kind);

// The flat statements' kind of `operation` on a limit of statements' kind `kind` (with
// overrides, or without), or nullopt when there is none (only consume and record of
// fixed_window, sliding_window, token_bucket and sliding_log have one).
std::optional<StatementKind> flat_kind(Operation operation, StatementKind kind, bool overrides = false);

// The specialised kind that a limit of `shape` runs first for `operation`, or nullopt.
std::optional<StatementKind> specialised_kind(Operation operation, StatementKind kind, Shape shape);

// The general kind of a plain or flat kind (any other kind: itself).
StatementKind general_kind(StatementKind kind);

// The algorithm of the limits that a kind's statements match.
Algorithm stored_algorithm(StatementKind kind);

// "sliding_log", ..., "calendar_window", "plain_fixed_window", ...: a name for the
// statements of a kind (PostgreSQL's prepared statements are named after it).
std::string_view kind_name(StatementKind kind);

// The statement for `operation` on a limit of statements' kind `kind` (reset is the same for
// all).
// Every statement returns one row with allowed, reason, remaining, retry_after_ms,
// reset_at_ms, denied and shadow_denied (1 when a shadow-mode consume would have been
// denied); check also returns used, shadow_denials (the owner's count) and capacity (the
// owner's: the limit's maximum or burst, or its override's). check returns no
// row for an unknown limit, the others fail with "unknown limit". refund gives back up to
// :cost units and answers like a check of cost 1.
const std::string& statement(Operation operation, StatementKind kind);
// The same statement in `dialect`'s spelling (src/sql/dialect.h): PostgreSQL's takes $1..$4
// for :limit, :owner, :cost and :now.
const std::string& statement(const Dialect& dialect, Operation operation, StatementKind kind);

// A plain limit's consume or record in two parts (docs/sql.md, "Where SQLite runs the answer
// apart"): the plain statement's UPDATE without its RETURNING, and a SELECT of the same
// RETURNING list from the owner's row, keyed by :limit and :owner. SQLite runs them one
// after the other in one transaction, the second only when the first changed a row: the write
// lock, held from the UPDATE to the transaction's end, keeps the row as the UPDATE left it,
// so the SELECT answers exactly what RETURNING would. SQLite's RETURNING buffers its row in
// a temporary b-tree that it opens and closes per statement; that costs more than the
// SELECT (docs/performance-notes.md).
struct PlainParts {
  std::string write;
  std::string answer;
};
// The parts of (operation, kind) in `dialect`'s spelling, or nullptr when it has none (any
// statement but a plain or flat consume and record; a concurrency limit's run whole).
const PlainParts* plain_parts(const Dialect& dialect, Operation operation, StatementKind kind);

// The table that holds the per-owner state of the limits of statements' kind `kind`:
// quota_windows, quota_log_owners or quota_buckets.
const char* state_table(StatementKind kind);

// "check", "consume", "record", "reset" or "refund".
const char* operation_name(Operation operation);

// The quota_usage view's rows of the limits of statements' kind `kind`, unfinished (the
// dialect's fragments left for sql::finish): src/sql/usage_view.cpp assembles the view.
std::string usage_rows(StatementKind kind);

}  // namespace quota::detail
