// What differs between the SQL of SQLite and of PostgreSQL, and nothing else.
//
// The statement templates (src/statements.cpp) are written once; where the two databases
// spell a thing differently, a template names a fragment of the Dialect in braces and the
// builder fills it in. Everything else (the arithmetic of every algorithm, the layers, the
// upsert) is the same text on both, written in what both accept: IS [NOT] DISTINCT FROM,
// TRUE and FALSE, an alias on every derived table, no reserved word as a column name. Each
// SQLite fragment is the text that stood in its place before PostgreSQL existed.
//
//   fragment    SQLite                                 PostgreSQL
//   {max}       max(a, b), the two-argument scalar     greatest(a, b)
//   {min}       min(a, b)                              least(a, b)
//   {barrier}   LIMIT -1 OFFSET 0                      OFFSET 0
//   {now}       julianday('now') in ms                 statement_timestamp() in ms
//   {int}       nothing: a truth value is 0 or 1       int4, a function-style cast of a boolean
//   {live_base} {covering_event} {newest_kept}
//               the sliding log's reads of its         the same reads as VOLATILE functions
//               events: subqueries of quota_log        of the schema (see below)
//   {limit} {owner} {cost} {now_ms}
//               :limit :owner :cost :now               $1 $2 $3 $4 (typed text, text,
//                                                      bigint, bigint when prepared)
//
// {barrier} stops the planner from merging a layer into the one above it (SQLite's
// flattening copies each expression into every place that uses it; PostgreSQL's OFFSET 0 is
// its documented fence against pulling a subquery up). Both databases truncate integer
// division towards zero and take IS DISTINCT FROM, TRUE and FALSE, so those need no fragment.
//
// The sliding log's event reads: a subquery in PostgreSQL's ON CONFLICT DO UPDATE reads
// other tables at the statement's snapshot, taken before the owner's row lock was waited for,
// so it would miss the events that the transaction holding the lock has just committed, and
// admit too much. A VOLATILE function takes a fresh snapshot for each query it runs, and the
// DO UPDATE runs it after the lock is held: migrations/postgresql/ defines the three reads so,
// with the same WHERE and ORDER BY as SQLite's subqueries here.
//
// The proposed row: SQLite's statements insert a bare request row, and the table's "new owner"
// trigger creates the owner's empty row first, so that the DO UPDATE always decides. A row
// that a trigger inserts is one PostgreSQL's ON CONFLICT may not update in the same statement,
// so there the proposed row is the decision itself, made over an owner without state (the
// update's inputs with `excluded` made from the parameters and the state table joined ON
// FALSE); an existing owner's conflict then decides again over its locked row.
#pragma once

#include <string_view>

namespace quota::detail {

struct Dialect {
  std::string_view name;  // "sqlite" or "postgresql"
  std::string_view greatest;
  std::string_view least;
  std::string_view barrier;
  std::string_view database_now;
  std::string_view as_integer;
  std::string_view limit;
  std::string_view owner;
  std::string_view cost;
  std::string_view now;
  std::string_view log_live_base;       // the running total before the first live event
  std::string_view log_covering_event;  // the first live event that covers `excess`
  std::string_view log_newest_kept;     // a refund's newest event left
  bool proposes_decided_row;            // the proposed row of a write (see above)
};

inline constexpr Dialect kSqlite = {
    "sqlite",
    "max",
    "min",
    "LIMIT -1 OFFSET 0",
    // julianday('now') has millisecond resolution and is fixed for the duration of one
    // statement.
    "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
    "",
    ":limit",
    ":owner",
    ":cost",
    ":now",
    "(SELECT e.total - e.cost FROM quota_log AS e"
    " WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms"
    " ORDER BY e.at_ms LIMIT 1)",
    "(SELECT e.at_ms FROM quota_log AS e"
    " WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.at_ms > t - period_ms"
    " AND e.total - live_base >= excess ORDER BY e.at_ms LIMIT 1)",
    "(SELECT e.at_ms FROM quota_log AS e"
    " WHERE e.limit_name = key_limit AND e.owner = key_owner AND e.total >= live_base + used"
    " ORDER BY e.at_ms LIMIT 1)",
    false,
};

inline constexpr Dialect kPostgresql = {
    "postgresql",
    "greatest",
    "least",
    "OFFSET 0",
    // statement_timestamp() is fixed for the duration of one statement, like SQLite's.
    "CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS bigint)",
    "int4",
    "$1",
    "$2",
    "$3",
    "$4",
    "quota_log_live_base(key_limit, key_owner, t - period_ms)",
    "quota_log_covering_event(key_limit, key_owner, t - period_ms, live_base + excess)",
    "quota_log_newest_kept(key_limit, key_owner, live_base + used)",
    true,
};

}  // namespace quota::detail
