// The golden files of the concurrency leases' statements (src/sql/lease_statements.cpp), in
// each dialect, as checked in: acquire (a concurrency limit's consume), check, record, renew
// and release. After a deliberate change, rewrite them with
//   QUOTA_UPDATE_GOLDEN=1 build/debug/tests/quota_tests "[golden]"
// and review the diff.
#include "sql/lease_statements.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "quota/admin.h"
#include "statements.h"
#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

using detail::Operation;
using detail::StatementKind;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("every lease statement matches its golden file in tests/sql/", "[golden][lease]") {
  const bool update = std::getenv("QUOTA_UPDATE_GOLDEN") != nullptr;
  for (const detail::Dialect* dialect : {&detail::kSqlite, &detail::kPostgresql}) {
    const std::pair<const char*, std::string> statements[] = {
        {"acquire", detail::statement(*dialect, Operation::consume, StatementKind::concurrency)},
        {"check", detail::statement(*dialect, Operation::check, StatementKind::concurrency)},
        {"record", detail::statement(*dialect, Operation::record, StatementKind::concurrency)},
        {"renew", detail::sql::renew_statement(*dialect)},
        {"release", detail::sql::release_statement(*dialect)},
    };
    for (const auto& [name, statement] : statements) {
      const std::filesystem::path path = std::filesystem::path(QUOTA_SOURCE_DIR) / "tests" /
                                         "sql" / std::string(dialect->name) /
                                         (std::string("lease_") + name + ".sql");
      CAPTURE(path.string());
      if (update) std::ofstream(path, std::ios::binary) << statement << "\n";
      REQUIRE(std::filesystem::exists(path));
      CHECK(read_file(path) == statement + "\n");
    }
    // reset is every limit's; refund has none (the engine refuses it with a clear error).
    CHECK(detail::statement(*dialect, Operation::reset, StatementKind::concurrency) ==
          detail::statement(*dialect, Operation::reset, StatementKind::sliding_log));
    CHECK_THROWS_AS(detail::statement(*dialect, Operation::refund, StatementKind::concurrency),
                    std::logic_error);
  }
  // quotactl sql prints the same strings.
  CHECK(admin::statement(admin::Dialect::sqlite, "acquire", Algorithm::concurrency) ==
        detail::statement(detail::kSqlite, Operation::consume, StatementKind::concurrency));
  CHECK(admin::statement(admin::Dialect::postgresql, "renew", Algorithm::concurrency) ==
        detail::sql::renew_statement(detail::kPostgresql));
  CHECK_THROWS_AS(admin::statement(admin::Dialect::sqlite, "acquire", Algorithm::fixed_window),
                  Error);
}

}  // namespace
}  // namespace quota::test
