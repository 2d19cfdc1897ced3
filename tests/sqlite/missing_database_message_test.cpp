// A SQLite file that does not exist, opened without creating it: the library's error advises
// its caller in the library's own terms (a C, Python or C++ caller has no quotactl in view),
// and quotactl, which checks first, gives its own advice.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {

TEST_CASE("the library's error for a missing database names no tool, and creates nothing",
          "[opening][names]") {
  TempDir dir;
  const std::string path = dir.file("missing.db");
  const auto refusal = [&](const Options& options) -> std::string {
    try {
      Engine::open(path, options);
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::io);
      return error.what();
    }
    FAIL("opened a database that does not exist");
    return {};
  };
  Options no_create;
  no_create.create = false;
  const std::string plain = refusal(no_create);
  CHECK_THAT(plain, Catch::Contains("'" + path + "' does not exist") &&
                        Catch::Contains("create enabled") && !Catch::Contains("quotactl"));
  Options read_only;
  read_only.read_only = true;
  const std::string reading = refusal(read_only);
  CHECK_THAT(reading, Catch::Contains("does not exist") && Catch::Contains("read-only") &&
                          Catch::Contains("without read_only") && !Catch::Contains("quotactl"));
  CHECK_FALSE(std::filesystem::exists(path));

  // quotactl's own advice: its command to create it.
  const QuotactlRun run = run_quotactl({"--db", path, "limit", "list"});
  CHECK(run.status == 3);
  CHECK_THAT(run.err, Catch::Contains("does not exist") && Catch::Contains("quotactl migrate"));
  CHECK_FALSE(std::filesystem::exists(path));
}

}  // namespace quota::test
