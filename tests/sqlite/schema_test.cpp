// schema/schema.sql is the complete current schema: migrating an empty database yields it.
// tools/schema.sh generates the file (the CTest test schema_sql_up_to_date checks that it is
// what the script writes); these cases check it against the library's own migration.
#include <catch2/catch.hpp>

#include "sqlite/sqlite_store.h"
#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

using namespace quota;
using namespace quota::test;

namespace {

std::vector<std::vector<std::string>> schema_of(const std::string& path) {
  return RawDb(path).rows("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name");
}

}  // namespace

TEST_CASE("migrating an empty database yields exactly schema/schema.sql", "[schema]") {
  TempDir dir;
  const std::string migrated = dir.file("migrated.db");
  { Engine::open(migrated); }
  const std::string documented = dir.file("documented.db");
  RawDb(documented).exec(read_file(std::string(QUOTA_SOURCE_DIR) + "/schema/schema.sql"));

  const auto expected = schema_of(documented);
  REQUIRE(expected.size() > 5);
  CHECK(schema_of(migrated) == expected);
}

TEST_CASE("schema/schema.sql is at the latest version", "[schema]") {
  const std::string text = read_file(std::string(QUOTA_SOURCE_DIR) + "/schema/schema.sql");
  CHECK(text.find("(schema version " +
                  std::to_string(detail::latest_version(detail::built_in_sqlite_migrations())) +
                  ")") != std::string::npos);
}
