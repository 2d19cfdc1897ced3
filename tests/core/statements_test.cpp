// The golden files of tests/sql/: every statement of src/statements.cpp, in each dialect, as
// it is checked in, so that a change to a statement shows in review as a change to a file.
// After a deliberate change, rewrite them with
//   QUOTA_UPDATE_GOLDEN=1 build/debug/tests/quota_tests "[golden]"
// and review the diff.
#include "statements.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

using detail::Operation;
using detail::StatementKind;

std::filesystem::path golden_path(const detail::Dialect& dialect, Operation operation,
                                  StatementKind kind) {
  const std::string name = operation == Operation::reset
                               ? std::string("reset.sql")
                               : std::string(detail::operation_name(operation)) + "_" +
                                     std::string(detail::kind_name(kind)) + ".sql";
  return std::filesystem::path(QUOTA_SOURCE_DIR) / "tests" / "sql" / std::string(dialect.name) /
         name;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `text` against its golden file at `path`, which QUOTA_UPDATE_GOLDEN=1 writes first.
void expect_golden(const std::filesystem::path& path, const std::string& text) {
  CAPTURE(path.string());
  if (std::getenv("QUOTA_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  REQUIRE(std::filesystem::exists(path));
  CHECK(read_file(path) == text);
}

TEST_CASE("every statement matches its golden file in tests/sql/", "[golden]") {
  for (const detail::Dialect* dialect : {&detail::kSqlite, &detail::kPostgresql}) {
    for (Operation operation : {Operation::check, Operation::consume, Operation::record,
                                Operation::refund, Operation::reset}) {
      // Every algorithm's, and the calendar windows' (src/statements.h).
      for (StatementKind kind :
           {StatementKind::sliding_log, StatementKind::fixed_window, StatementKind::sliding_window,
            StatementKind::token_bucket, StatementKind::calendar_window}) {
        if (operation == Operation::reset && kind != StatementKind::sliding_log) continue;
        expect_golden(golden_path(*dialect, operation, kind),
                      detail::statement(*dialect, operation, kind) + "\n");
      }
    }
  }
}

TEST_CASE("every plain limit's statement matches its golden file in tests/sql/", "[golden]") {
  for (const detail::Dialect* dialect : {&detail::kSqlite, &detail::kPostgresql}) {
    for (Operation operation : {Operation::consume, Operation::record, Operation::check}) {
      for (StatementKind kind :
           {StatementKind::plain_fixed_window, StatementKind::plain_sliding_window, StatementKind::plain_token_bucket,
            StatementKind::plain_sliding_log, StatementKind::plain_concurrency}) {
        // A concurrency limit's and a sliding log's check are the general statements.
        if (operation == Operation::check && (kind == StatementKind::plain_concurrency ||
                                              kind == StatementKind::plain_sliding_log)) {
          continue;
        }
        CHECK(detail::plain_kind(operation, detail::general_kind(kind)) == kind);
        expect_golden(golden_path(*dialect, operation, kind),
                      detail::statement(*dialect, operation, kind) + "\n");
      }
    }
  }
  // The others have none: the engine runs the general statement.
  CHECK_FALSE(detail::plain_kind(Operation::check, StatementKind::concurrency));
  CHECK_FALSE(detail::plain_kind(Operation::refund, StatementKind::fixed_window));
  CHECK_FALSE(detail::plain_kind(Operation::check, StatementKind::sliding_log));
  CHECK_THROWS_AS(detail::statement(Operation::check, StatementKind::plain_sliding_log),
                  std::logic_error);
  CHECK_FALSE(detail::plain_kind(Operation::consume, StatementKind::calendar_window));
}

// A flat limit's consume and record (shadow mode or a block, no override or calendar), and
// the same with overrides.
TEST_CASE("every flat limit's statement matches its golden file in tests/sql/", "[golden]") {
  for (const detail::Dialect* dialect : {&detail::kSqlite, &detail::kPostgresql}) {
    for (Operation operation : {Operation::consume, Operation::record}) {
      for (StatementKind kind :
           {StatementKind::flat_fixed_window, StatementKind::flat_sliding_window,
            StatementKind::flat_token_bucket, StatementKind::flat_sliding_log,
            StatementKind::overridden_fixed_window, StatementKind::overridden_sliding_window,
            StatementKind::overridden_token_bucket, StatementKind::overridden_sliding_log}) {
        const bool overrides = kind >= StatementKind::overridden_fixed_window;
        CHECK(detail::flat_kind(operation, detail::general_kind(kind), overrides) == kind);
        CHECK(detail::specialised_kind(operation, detail::general_kind(kind),
                                       overrides ? detail::Shape::overridden : detail::Shape::flat) ==
              kind);
        expect_golden(golden_path(*dialect, operation, kind),
                      detail::statement(*dialect, operation, kind) + "\n");
      }
    }
  }
  // The others have none: the engine runs the general statement.
  for (Operation operation : {Operation::check, Operation::refund, Operation::reset}) {
    CHECK_FALSE(detail::flat_kind(operation, StatementKind::fixed_window));
  }
  for (StatementKind kind : {StatementKind::calendar_window, StatementKind::concurrency}) {
    CHECK_FALSE(detail::flat_kind(Operation::consume, kind));
    CHECK_FALSE(detail::flat_kind(Operation::consume, kind, true));
  }
  CHECK_FALSE(detail::specialised_kind(Operation::consume, StatementKind::fixed_window,
                                       detail::Shape::general));
  CHECK_THROWS_AS(detail::statement(Operation::check, StatementKind::flat_fixed_window),
                  std::logic_error);
}

// SQLite runs a plain or flat consume or record in two parts (detail::plain_parts): the
// statement's UPDATE, and a SELECT of its RETURNING list from the owner's row. Both come from
// the statement's own pieces; the answer's read has a golden file of its own.
TEST_CASE("SQLite's two parts of a plain consume and record are the plain statement's", "[golden]") {
  for (Operation operation : {Operation::consume, Operation::record}) {
    for (StatementKind kind : {StatementKind::plain_fixed_window, StatementKind::plain_sliding_window,
                               StatementKind::plain_token_bucket, StatementKind::plain_sliding_log,
                               StatementKind::flat_fixed_window, StatementKind::flat_sliding_window,
                               StatementKind::flat_token_bucket, StatementKind::flat_sliding_log,
                               StatementKind::overridden_fixed_window,
                               StatementKind::overridden_sliding_window,
                               StatementKind::overridden_token_bucket,
                               StatementKind::overridden_sliding_log}) {
      const detail::PlainParts* parts = detail::plain_parts(detail::kSqlite, operation, kind);
      REQUIRE(parts);
      const std::string& whole = detail::statement(operation, kind);
      const std::string returning = "\nRETURNING ";
      const std::size_t cut = whole.find(returning);
      REQUIRE(cut != std::string::npos);
      CHECK(whole.substr(0, cut) == parts->write);
      const std::string table = detail::state_table(detail::general_kind(kind));
      CHECK(parts->answer == "SELECT " + whole.substr(cut + returning.size()) + "\nFROM " + table +
                                 "\nWHERE limit_name = :limit AND owner = :owner");
      // The answer's read is the same for consume and record: one file per kind.
      const std::filesystem::path path = std::filesystem::path(QUOTA_SOURCE_DIR) / "tests" /
                                         "sql" / "sqlite" /
                                         ("answer_" + std::string(detail::kind_name(kind)) + ".sql");
      expect_golden(path, parts->answer + "\n");
    }
  }
  // The others run whole.
  CHECK_FALSE(detail::plain_parts(detail::kSqlite, Operation::check, StatementKind::plain_fixed_window));
  CHECK_FALSE(detail::plain_parts(detail::kSqlite, Operation::consume, StatementKind::fixed_window));
  CHECK_FALSE(detail::plain_parts(detail::kSqlite, Operation::consume, StatementKind::plain_concurrency));
}

TEST_CASE("the SQLite statements name their parameters, the PostgreSQL ones number them",
          "[golden]") {
  for (StatementKind kind :
       {StatementKind::sliding_log, StatementKind::fixed_window, StatementKind::sliding_window,
        StatementKind::token_bucket, StatementKind::calendar_window}) {
    const std::string& sqlite = detail::statement(detail::kSqlite, Operation::consume, kind);
    const std::string& postgresql =
        detail::statement(detail::kPostgresql, Operation::consume, kind);
    for (const char* name : {":limit", ":owner", ":cost", ":now"}) {
      CHECK(sqlite.find(name) != std::string::npos);
      CHECK(postgresql.find(name) == std::string::npos);
    }
    for (const char* number : {"$1", "$2", "$3", "$4"}) {
      CHECK(postgresql.find(number) != std::string::npos);
    }
    CHECK(sqlite.find("LIMIT -1 OFFSET 0") != std::string::npos);
    CHECK(postgresql.find("LIMIT -1") == std::string::npos);
    CHECK(postgresql.find("julianday") == std::string::npos);
  }
}

}  // namespace
}  // namespace quota::test
