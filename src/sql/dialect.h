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
//   {database_now}
//               julianday('now') in ms                 statement_timestamp() in ms
//   {as_integer}
//               nothing: a truth value is 0 or 1       int4, a function-style cast of a boolean
//   {live_base} {covering_event} {newest_kept}
//               the sliding log's reads of its         the same reads as VOLATILE functions
//               events: subqueries of quota_log        of the schema (see below)
//   {request_cost} {request_now}
//               :cost and :now as whole numbers        $3 and $4 (bigint already), checked
//               (a REAL with a whole value is taken    alike; a bad value raises through
//               as that integer), else an error        quota_refuse() of the schema
//   change_marker (a whole statement, Engine::watch's: a value that changes whenever another
//               connection may have committed a change)
//               PRAGMA data_version                    the current snapshot as text
//   {limit} {owner} {cost} {now_ms}
//               :limit :owner :cost :now               $1 $2 $3 $4 (typed text, text,
//                                                      bigint, bigint when prepared)
//
// Each fragment is the field of Dialect of the same name ({max} is Dialect::max, ...).
// {database_now} is the database's clock; {now_ms} is the request's time, the :now
// parameter, NULL when the caller leaves the time to the database.
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
// The request's cost and time: a client may bind them as REAL (JavaScript's sql.js binds
// numbers above 2^31 as doubles): an integral value is taken as that integer, anything else
// (1.5, 0, a negative time, text that is not a whole number) fails the statement with a
// message that says what is accepted, as the library refuses a bad cost. SQLite has no way to
// raise an error of one's own outside a trigger, so the refusal is json_extract's error for a
// path that is not one, whose message quotes the path: "JSON path error near 'the cost must
// be ...'" (SQLite 3.40) or "bad JSON path: 'the cost must be ...'" (newer). CASE evaluates
// only the branch taken, so a valid request never reaches it. PostgreSQL's parameters are
// typed bigint, so a fractional value is refused when it is bound; the range is checked the
// same way, raising through quota_refuse(message).
//
// The proposed row: SQLite's statements insert a bare request row, and the table's "new owner"
// trigger creates the owner's empty row first, so that the DO UPDATE always decides. A row
// that a trigger inserts is one PostgreSQL's ON CONFLICT may not update in the same statement,
// so there the proposed row is the decision itself, made over an owner without state (the
// update's inputs with `excluded` made from the parameters and the state table joined ON
// FALSE); an existing owner's conflict then decides again over its locked row.
#pragma once

#include <string>
#include <string_view>

namespace quota::detail {

struct Dialect {
  std::string_view name;  // "sqlite" or "postgresql"
  std::string_view max;
  std::string_view min;
  std::string_view barrier;
  std::string_view database_now;  // the database's clock, in Unix ms
  std::string_view as_integer;
  std::string_view limit;
  std::string_view owner;
  std::string_view cost;
  std::string_view now_ms;          // the :now parameter (NULL: the database's clock)
  std::string_view live_base;       // the sliding log's running total before its first live event
  std::string_view covering_event;  // the first live event that covers `excess`
  std::string_view newest_kept;     // a refund's newest event left
  bool proposes_decided_row;            // the proposed row of a write (see above)
  std::string_view request_cost;        // :cost, checked (see above)
  std::string_view request_now;         // :now, checked, or the database's clock
  std::string_view change_marker;       // Engine::watch's (see above)
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
    "CASE WHEN :cost IS NULL THEN 1"
    " WHEN :cost = CAST(:cost AS INTEGER) AND CAST(:cost AS INTEGER) BETWEEN 1 AND 1000000000000"
    " THEN CAST(:cost AS INTEGER)"
    " ELSE json_extract('{}', 'the cost must be a whole number from 1 to 1000000000000 "
    "(NULL: 1)') END",
    "CASE WHEN :now IS NULL THEN CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS "
    "INTEGER)"
    " WHEN :now = CAST(:now AS INTEGER) AND CAST(:now AS INTEGER) >= 0"
    " THEN CAST(:now AS INTEGER)"
    " ELSE json_extract('{}', 'the time must be a whole number of Unix milliseconds >= 0 "
    "(NULL: the database clock)') END",
    // Changes whenever another connection commits to the file, on this connection only.
    "PRAGMA data_version",
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
    "CASE WHEN $3 IS NULL THEN 1 WHEN $3 BETWEEN 1 AND 1000000000000 THEN $3"
    " ELSE quota_refuse('the cost must be a whole number from 1 to 1000000000000 (NULL: 1)') END",
    "CASE WHEN $4 IS NULL THEN CAST(floor(extract(epoch FROM statement_timestamp()) * 1000) AS "
    "bigint) WHEN $4 >= 0 THEN $4"
    " ELSE quota_refuse('the time must be a whole number of Unix milliseconds >= 0"
    " (NULL: the database clock)') END",
    // xmin:xmax:in-progress ids: a transaction that wrote had an id, which is either in the
    // list of one reading and gone from the next, or at or past the first reading's xmax and
    // so moves it. Any write on the server moves it; an idle server keeps it.
    "SELECT CAST(pg_current_snapshot() AS text)",
};

// ?1, ?2, ... -> $1, $2, ...: a statement written once in SQLite's numbered marks
// (src/store.h) in PostgreSQL's.
inline std::string dollar_parameters(std::string sql) {
  for (std::size_t i = 0; i + 1 < sql.size(); ++i) {
    if (sql[i] == '?' && sql[i + 1] >= '1' && sql[i + 1] <= '9') sql[i] = '$';
  }
  return sql;
}

}  // namespace quota::detail
