// Regression: quotactl's own parsers quoted a bad value whole in their errors (a 5,000-byte
// --max made a 5,078-byte message); every one now quotes at most quota::bounded's 64 bytes and
// the value's length, as the library does. In-process, on a migrated database.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "quota/error.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace {

using quota::test::QuotactlRun;
using quota::test::run_quotactl;
using quota::test::TempDir;

TEST_CASE("quotactl quotes at most a bounded prefix of a bad value", "[quotactl][names]") {
  TempDir dir;
  const std::string db = dir.file("quota.db");
  REQUIRE(run_quotactl({"--db", db, "migrate"}).status == 0);
  REQUIRE(run_quotactl({"--db", db, "limit", "set", "L", "--max", "2", "--per", "1m"}).status == 0);
  const std::string digits(10'000, '9');
  const std::string letters(10'000, 'q');
  const std::vector<std::vector<std::string>> commands = {
      {"limit", "set", "L", "--max", digits, "--per", "1m"},
      {"limit", "set", "L", "--max", "2", "--per", digits + "m"},
      {"limit", "set", "L", "--max", "2", "--per", letters},
      {"limit", "set", "L", "--max", "2", "--per", "1m", "--algo", letters},
      {"limit", "set", "L", "--max", "2", "--per", "day", "--algo", "fixed_window",
       "--utc-offset", letters},
      {"limit", "set", "L", "--max", "2", "--per", "day", "--algo", "fixed_window", "--anchor",
       letters},
      {"consume", "L", "u", "--cost", letters},
      {"usage", "L", "--by", letters},
      {"sql", letters},
      {"--" + letters, "status"},
      {letters},
  };
  for (const std::vector<std::string>& command : commands) {
    std::vector<std::string> args = {"--db", db};
    args.insert(args.end(), command.begin(), command.end());
    const QuotactlRun run = run_quotactl(args);
    CAPTURE(command.front(), command.size(), run.err.substr(0, 300));
    CHECK(run.status == 2);
    CHECK(run.err.size() < 600);
    CHECK(run.err.find("bytes)") != std::string::npos);
  }
}

TEST_CASE("quota::bounded keeps short values and cuts long ones between characters",
          "[names]") {
  CHECK(quota::bounded("send") == "send");
  CHECK(quota::bounded("a\nb") == "a\\x0Ab");
  const std::string shown = quota::bounded(std::string(63, 'x') + "é" + std::string(100, 'y'));
  CHECK(shown == std::string(63, 'x') + "…(165 bytes)");
}

}  // namespace
