// The caller-relative retry_after_ms (docs/concepts.md, "Time") in the statements as the
// sqlite3 shell runs them: a request whose :now is behind the owner's remembered time is told
// the wait from its own :now. tests/postgresql/caller_relative_psql_test.cpp runs the same
// through psql.
#include <fmt/format.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

// What the sqlite3 shell prints for `script` on `database` (list mode, '|' between columns).
std::string sqlite3_shell(const std::string& database, const std::string& script,
                          const TempDir& dir) {
  const std::string script_path = dir.file("script.sql");
  std::ofstream(script_path) << ".mode list\n" << script;
  const std::string command = "/usr/bin/sqlite3 -bail " + database + " < " + script_path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return output;
}

TEST_CASE("the sqlite3 shell is told the wait from its own :now when it is behind",
          "[retry][sql][sqlite]") {
  if (!std::filesystem::exists("/usr/bin/sqlite3")) {
    WARN("sqlite3 shell not installed; skipped");
    return;
  }
  TempDir dir;
  const std::string database = dir.file("quota.db");
  {
    ManualClock clock;
    Engine engine = Engine::open(database, options_with(clock));
    engine.define(make_limit("send", Algorithm::fixed_window, 2, 1000));
    Limit login = make_limit("login", Algorithm::sliding_log, 1, 1000);
    login.block = std::chrono::milliseconds(5000);
    engine.define(login);
  }
  const auto request = [](const char* limit, std::int64_t now) {
    return fmt::format(".parameter set :limit '{}'\n.parameter set :now {}\n", limit, now);
  };
  const std::string consume =
      detail::statement(detail::Operation::consume, detail::kind_of(Algorithm::fixed_window)) + ";\n";
  const std::string check =
      detail::statement(detail::Operation::check, detail::kind_of(Algorithm::fixed_window)) + ";\n";
  const std::string log_consume =
      detail::statement(detail::Operation::consume, detail::kind_of(Algorithm::sliding_log)) + ";\n";
  std::string script = ".parameter init\n.parameter set :owner 'u'\n.parameter set :cost 1\n";
  // send: two at T + 400 fill the window [T, T + 1000); from T + 100 the wait is 900.
  script += request("send", T + 400) + consume + consume;
  script += request("send", T + 100) + consume + check;
  script += request("send", T + 400) + check;
  // login: one at T; a denial from T - 200 starts the 5 s block at T and waits 5200; a
  // blocked consume from T - 300 waits 5300.
  script += request("login", T) + log_consume;
  script += request("login", T - 200) + log_consume;
  script += request("login", T - 300) + log_consume;
  const std::string output = sqlite3_shell(database, script, dir);
  const std::string end = std::to_string(T + 1000);
  CHECK(output == fmt::format("1|ok|1|0|{0}|0|0\n"
                              "1|ok|0|0|{0}|0|0\n"
                              "0|rate_limited|0|900|{0}|1|0\n"
                              "0|rate_limited|0|900|{0}|1|0|2|0|2|\n"
                              "0|rate_limited|0|600|{0}|1|0|2|0|2|\n"
                              "1|ok|0|0|{0}|0|0\n"
                              "0|rate_limited|0|5200|{0}|1|0\n"
                              "0|blocked|0|5300|{0}|2|0\n",
                              end));
}

}  // namespace
}  // namespace quota::test
