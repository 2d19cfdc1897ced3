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
//   {limit} {owner} {cost} {now_ms}
//               :limit :owner :cost :now               $1 $2 $3 $4 (typed text, text,
//                                                      bigint, bigint when prepared)
//
// {barrier} stops the planner from merging a layer into the one above it (SQLite's
// flattening copies each expression into every place that uses it; PostgreSQL's OFFSET 0 is
// its documented fence against pulling a subquery up). Both databases truncate integer
// division towards zero and take IS DISTINCT FROM, TRUE and FALSE, so those need no fragment.
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
};

}  // namespace quota::detail
