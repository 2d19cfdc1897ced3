// The generated texts beyond the decision statements: gc's rules and the quota_usage view, in
// each dialect, as golden files of tests/sql/; and the view's migrations, which must be what
// the generator writes today (src/sql/usage_view.h). After a deliberate change to a fragment,
//   QUOTA_UPDATE_GOLDEN=1 build/debug/tests/quota_tests "[golden]"
// rewrites the golden files; when the view changed, the test fails rather than write a
// migration of its own. Adding the migration is a separate, deliberate step:
//   QUOTA_WRITE_VIEW_MIGRATION=1 build/debug/tests/quota_tests "[golden]"
// writes the view into the NEXT migration of each backend (an applied migration is never
// edited); review the diff.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gc.h"
#include "sql/fragments.h"
#include "sql/usage_view.h"
#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks `text` against the golden file `name` of `dialect` (rewriting it when asked).
void check_golden(const detail::Dialect& dialect, const std::string& name, const std::string& text) {
  const fs::path path = fs::path(QUOTA_SOURCE_DIR) / "tests" / "sql" / std::string(dialect.name) / name;
  CAPTURE(path.string());
  if (std::getenv("QUOTA_UPDATE_GOLDEN") != nullptr) std::ofstream(path, std::ios::binary) << text;
  REQUIRE(fs::exists(path));
  CHECK(read_text(path) == text);
}

fs::path migrations_dir(const detail::Dialect& dialect) {
  const fs::path root = fs::path(QUOTA_SOURCE_DIR) / "migrations";
  return dialect.name == detail::kPostgresql.name ? root / "postgresql" : root;
}

TEST_CASE("gc's rules and the quota_usage view match their golden files in tests/sql/",
          "[golden]") {
  for (const detail::Dialect* dialect : {&detail::kSqlite, &detail::kPostgresql}) {
    for (const detail::Sweep& sweep : detail::sweeps(*dialect)) {
      check_golden(*dialect, std::string("gc_") + sweep.table + ".sql", sweep.dead + "\n");
    }
    check_golden(*dialect, "quota_usage.sql", detail::sql::usage_view(*dialect) + "\n");
  }
}

TEST_CASE("the newest generated migration of the view is what the generator writes today",
          "[golden][migrations]") {
  for (const detail::Dialect* dialect : {&detail::kSqlite, &detail::kPostgresql}) {
    // The migrations by version; the newest whose first line is the generator's marker.
    int latest = 0;
    int generated = 0;
    fs::path generated_path;
    for (const auto& entry : fs::directory_iterator(migrations_dir(*dialect))) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".sql" || name.size() < 5) continue;
      const int version = std::stoi(name.substr(0, 4));
      latest = std::max(latest, version);
      const std::string text = read_text(entry.path());
      if (text.rfind(detail::sql::kGeneratedViewMarker, 0) == 0 && version > generated) {
        generated = version;
        generated_path = entry.path();
      }
    }
    CAPTURE(dialect->name, generated_path.string());
    const bool current =
        generated > 0 &&
        read_text(generated_path) == detail::sql::usage_view_migration(*dialect, generated);
    if (!current && std::getenv("QUOTA_WRITE_VIEW_MIGRATION") == nullptr) {
      FAIL_CHECK(fmt::format(
          "the quota_usage view that the generator writes differs from {}: a fragment changed "
          "since that migration was written. A view change needs a new migration, added on "
          "purpose: run QUOTA_WRITE_VIEW_MIGRATION=1 build/debug/tests/quota_tests \"[golden]\" "
          "to write migration {:04}_generated_usage_view.sql for this backend, then review it "
          "(QUOTA_UPDATE_GOLDEN=1 alone never writes a migration)",
          generated_path.string(), latest + 1));
      continue;
    }
    if (!current) {
      const fs::path next = migrations_dir(*dialect) /
                            (fmt::format("{:04}", latest + 1) + "_generated_usage_view.sql");
      std::ofstream(next, std::ios::binary) << detail::sql::usage_view_migration(*dialect, latest + 1);
      generated_path = next;
      generated = latest + 1;
    }
    // Out of date: a fragment changed since the migration was written. Write the next one
    // (QUOTA_WRITE_VIEW_MIGRATION=1, above); never edit an applied migration.
    REQUIRE(generated > 0);
    CHECK(read_text(generated_path) == detail::sql::usage_view_migration(*dialect, generated));
  }
}

TEST_CASE("filling SQL fragments: bound names, fragments, dialect and inputs", "[golden]") {
  using detail::sql::fill;
  using detail::sql::finish;
  // A binding is inserted as it is; a fragment takes the same bindings; others wait.
  CHECK(fill("{a} {b}", {{"a", "{b}"}}) == "{b} {b}");
  CHECK(fill("{window.rest}", {{"t", "?1"}}) == "{period_ms} - ?1 % {period_ms}");
  CHECK(finish("{window.rest}", detail::kSqlite) == "period_ms - t % period_ms");
  CHECK(finish("{max}(1, 2)", detail::kPostgresql) == "greatest(1, 2)");
  // A brace that names nothing is SQL's own ('{}' in a JSON path).
  CHECK(finish("json_extract('{}', '$')", detail::kSqlite) == "json_extract('{}', '$')");
  // A name that nothing defines is a bug in the templates.
  CHECK_THROWS_AS(finish("{no_such_name}", detail::kSqlite), std::logic_error);
  CHECK_THROWS_AS(detail::sql::ref("fixed_window.no_such"), std::logic_error);
}

}  // namespace
}  // namespace quota::test
