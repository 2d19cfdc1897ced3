#include "sql/usage_view.h"

#include <fmt/format.h>

#include "sql/fragments.h"
#include "sql/lease_statements.h"
#include "statements.h"

namespace quota::detail::sql {
namespace {

// Each kind's rows are a view of their own: one statement holding every kind's decision
// passes SQLite's parser depth (its "parser stack overflow").
constexpr const char* kView = R"(SELECT limit_name, owner, used, remaining, denied, reset_at_ms,
       {view.reset_at_text} AS reset_at,
       shadow_denied, blocked_until_ms
FROM (
  {rows}
) AS usage_rows
WHERE used > 0 OR denied > 0 OR shadow_denied > 0)";

// The kinds of limit, each with a helper view quota_usage_<kind name>.
constexpr StatementKind kViewKinds[] = {
    StatementKind::sliding_log,    StatementKind::fixed_window, StatementKind::calendar_window,
    StatementKind::sliding_window, StatementKind::token_bucket, StatementKind::concurrency};

}  // namespace

std::string usage_view(const Dialect& dialect) {
  const bool postgresql = dialect.name == kPostgresql.name;
  std::string parts;
  std::string rows;
  for (StatementKind kind : kViewKinds) {
    const std::string name = "quota_usage_" + std::string(kind_name(kind));
    // Concurrency limits: the lease check's answer (src/sql/lease_statements.cpp).
    const std::string view_rows = kind == StatementKind::concurrency
                                      ? lease_usage_rows(dialect)
                                      : finish(usage_rows(kind), dialect);
    parts += std::string(postgresql ? "CREATE OR REPLACE VIEW " : "CREATE VIEW ") + name +
             " AS\n" + view_rows + ";\n\n";
    if (!rows.empty()) rows += "\n  UNION ALL\n  ";
    rows += "SELECT * FROM " + name;
  }
  // SQLite drops (the views of an earlier generated migration too) and creates; PostgreSQL
  // replaces, so that the privileges granted stay.
  if (postgresql) {
    return parts + "CREATE OR REPLACE VIEW quota_usage AS\n" +
           finish(fill(kView, {{"rows", rows}}), dialect);
  }
  std::string drops = "DROP VIEW IF EXISTS quota_usage;\n";
  for (StatementKind kind : kViewKinds) {
    drops += fmt::format("DROP VIEW IF EXISTS quota_usage_{};\n", kind_name(kind));
  }
  return drops + "\n" + parts + "CREATE VIEW quota_usage AS\n" +
         finish(fill(kView, {{"rows", rows}}), dialect);
}

std::string usage_view_migration(const Dialect& dialect, int version) {
  return fmt::format(
      "{marker}\n"
      "-- quota schema{on}, migration {version:04}: the quota_usage view, generated from the\n"
      "-- fragments of each algorithm's arithmetic that the decision statements are made of.\n"
      "--\n"
      "--   {verb} quota_usage;  -- the check's answer over every owner's row\n"
      "--   CREATE VIEW quota_usage_<kind>;  -- its rows of each kind of limit\n"
      "--\n"
      "-- Each row is what a check of cost 1 answers at the database's clock (used, remaining,\n"
      "-- denied, reset_at_ms, shadow_denied, blocked_until_ms), for every owner with state\n"
      "-- that uses anything or was denied: the same figures as Engine::usage. An exempt owner\n"
      "-- uses no quota, so it shows 0 used (before, the view showed what it recorded before\n"
      "-- the exemption). After a change to a fragment, QUOTA_UPDATE_GOLDEN=1 quota_tests\n"
      "-- \"[golden]\" writes the next migration (tests/core/usage_view_test.cpp).\n"
      "\n"
      "{view};\n",
      fmt::arg("marker", kGeneratedViewMarker),
      fmt::arg("on", dialect.name == kPostgresql.name ? " on PostgreSQL" : ""),
      fmt::arg("version", version),
      fmt::arg("verb", dialect.name == kPostgresql.name ? "CREATE OR REPLACE VIEW" : "CREATE VIEW"),
      fmt::arg("view", usage_view(dialect)));
}

}  // namespace quota::detail::sql
