// quota/admin.h, the public API that quotactl's migrate, status and sql stand on, on every
// backend; and its refusals of bad input.
#include "quota/admin.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "support.h"

namespace quota::test {
namespace {

ErrorCode code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.code();
  }
  FAIL("no error");
  return ErrorCode::io;  // not reached
}

TEST_CASE("admin: migrate, then schema_status and summarize read what it did",
          "[admin][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  const std::vector<admin::Migration> all = admin::migrations(database.location());
  REQUIRE_FALSE(all.empty());

  const admin::Migrated migrated = admin::migrate(database.location(), 1'700'000'000'000);
  CHECK(migrated.version == all.back().version);
  CHECK(migrated.applied.size() == all.size());
  CHECK(admin::migrate(database.location(), 1'700'000'000'000).applied.empty());

  const admin::SchemaStatus status = admin::schema_status(database.location());
  CHECK(status.version == all.back().version);
  CHECK(status.latest_version == all.back().version);
  CHECK(status.pending.empty());
  CHECK(status.problem.empty());
  CHECK_NOTHROW(admin::require_usable(status));

  Engine engine = Engine::open(database.location());
  engine.define(make_limit("send", Algorithm::fixed_window, 5, 60'000));
  engine.consume("send", "u");
  engine.consume("send", "v");
  const admin::Summary summary = admin::summarize(database.location());
  CHECK(summary.limits == 1);
  CHECK(summary.state_rows == 2);  // the two owners' windows
  CHECK(summary.journal_mode.has_value() == (database.backend() == Backend::sqlite));
}

TEST_CASE("admin: a schema newer than the build is reported, and refused by require_usable",
          "[admin][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  admin::migrate(database.location(), 1'700'000'000'000);
  database.exec(
      "INSERT INTO quota_migrations (version, name, checksum, applied_at_ms) "
      "VALUES (9999, 'future', 'x', 0)");
  const admin::SchemaStatus status = admin::schema_status(database.location());
  CHECK(status.too_new);
  CHECK(status.version == 9999);
  CHECK_FALSE(status.problem.empty());
  CHECK(code_of([&] { admin::require_usable(status); }) == ErrorCode::schema_too_new);
}

TEST_CASE("admin: the statement of each operation in each dialect", "[admin]") {
  for (const admin::Dialect dialect : {admin::Dialect::sqlite, admin::Dialect::postgresql}) {
    for (const std::string& operation : admin::statement_operations()) {
      CAPTURE(admin::to_string(dialect), operation);
      const std::string sql = admin::statement(dialect, operation, Algorithm::fixed_window);
      CHECK_THAT(sql, Catch::Contains(dialect == admin::Dialect::sqlite ? ":owner" : "$2"));
    }
  }
  CHECK(admin::statement_operations() ==
        std::vector<std::string>{"consume", "check", "record", "reset", "refund"});
  CHECK(admin::dialect_of("postgres://h/db") == admin::Dialect::postgresql);
  CHECK(admin::dialect_of("app.db") == admin::Dialect::sqlite);
  CHECK(std::string(admin::to_string(admin::Dialect::postgresql)) == "postgresql");
}

TEST_CASE("admin: bad input is refused with what to do, changing nothing", "[admin]") {
  TempDir dir;
  CHECK(code_of([] {
          admin::statement(admin::Dialect::sqlite, "consumed", Algorithm::sliding_log);
        }) == ErrorCode::invalid_argument);
  CHECK(code_of([] { admin::statement(admin::Dialect::sqlite, "", Algorithm::sliding_log); }) ==
        ErrorCode::invalid_argument);
  const std::string missing = dir.file("missing.db");
  CHECK(code_of([&] { admin::schema_status(missing); }) == ErrorCode::io);
  CHECK(code_of([&] { admin::summarize(missing); }) == ErrorCode::io);
  CHECK_FALSE(std::filesystem::exists(missing));
  CHECK(code_of([&] { admin::schema_status(dir.path().string()); }) == ErrorCode::io);
  CHECK(code_of([&] { admin::migrate(dir.path().string(), 0); }) == ErrorCode::io);
  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "not a database, but long enough to have a header of sorts............\n";
  CHECK(code_of([&] { admin::schema_status(text); }) == ErrorCode::not_a_database);
  CHECK(read_file(text) ==
        "not a database, but long enough to have a header of sorts............\n");
}

TEST_CASE("admin: shown masks a URI's password and leaves a path alone", "[admin]") {
  CHECK(admin::is_server("postgresql://u:secret@h/db"));
  CHECK_FALSE(admin::is_server("postgresql.db"));
  CHECK(admin::shown("postgresql://u:secret@h/db") == "postgresql://u:***@h/db");
  CHECK(admin::shown("app.db") == "app.db");
}

}  // namespace
}  // namespace quota::test
