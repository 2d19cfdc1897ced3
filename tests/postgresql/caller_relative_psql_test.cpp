// The caller-relative retry_after_ms (docs/concepts.md, "Time") in the PostgreSQL statements
// as psql runs them: a request whose $4 (:now) is behind the owner's remembered time is told
// the wait from its own time. tests/caller_relative_sqlite3_test.cpp runs the same through the
// sqlite3 shell.
#include <fmt/format.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "backend.h"
#include "statements.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

// What psql prints for `script` on `uri`: unaligned, tuples only, '|' between columns.
std::string psql_output(const std::string& uri, const std::string& script) {
  TempDir dir;
  const std::string file = dir.file("script.sql");
  std::ofstream(file) << script;
  const std::string command =
      "psql -X -q -A -t -F '|' -v ON_ERROR_STOP=1 -d '" + uri + "' -f '" + file + "' 2>&1";
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

TEST_CASE("psql is told the wait from its own time when it is behind", "[retry][sql][postgresql]") {
  TestDatabase db(Backend::postgresql);
  {
    ManualClock clock;
    Engine engine = Engine::open(db.location(), options_with(clock));
    engine.define(make_limit("send", Algorithm::fixed_window, 2, 1000));
    Limit login = make_limit("login", Algorithm::sliding_log, 1, 1000);
    login.block = std::chrono::milliseconds(5000);
    engine.define(login);
  }
  using detail::kPostgresql;
  using detail::Operation;
  std::string script = fmt::format(
      "PREPARE consume_window(text, text, bigint, bigint) AS {};\n"
      "PREPARE check_window(text, text, bigint, bigint) AS {};\n"
      "PREPARE consume_log(text, text, bigint, bigint) AS {};\n",
      detail::statement(kPostgresql, Operation::consume, detail::kind_of(Algorithm::fixed_window)),
      detail::statement(kPostgresql, Operation::check, detail::kind_of(Algorithm::fixed_window)),
      detail::statement(kPostgresql, Operation::consume, detail::kind_of(Algorithm::sliding_log)));
  // send: two at T + 400 fill the window [T, T + 1000); from T + 100 the wait is 900.
  script += fmt::format(
      "EXECUTE consume_window('send', 'u', 1, {0});\n"
      "EXECUTE consume_window('send', 'u', 1, {0});\n"
      "EXECUTE consume_window('send', 'u', 1, {1});\n"
      "EXECUTE check_window('send', 'u', 1, {1});\n"
      "EXECUTE check_window('send', 'u', 1, {0});\n",
      T + 400, T + 100);
  // login: one at T; a denial from T - 200 starts the 5 s block at T and waits 5200; a
  // blocked consume from T - 300 waits 5300.
  script += fmt::format(
      "EXECUTE consume_log('login', 'u', 1, {});\n"
      "EXECUTE consume_log('login', 'u', 1, {});\n"
      "EXECUTE consume_log('login', 'u', 1, {});\n",
      T, T - 200, T - 300);
  const std::string output = psql_output(db.location(), script);
  CHECK(output == fmt::format("t|ok|1|0|{0}|0|f\n"
                              "t|ok|0|0|{0}|0|f\n"
                              "f|rate_limited|0|900|{0}|1|f\n"
                              "f|rate_limited|0|900|{0}|1|f|2|0|2|\n"
                              "f|rate_limited|0|600|{0}|1|f|2|0|2|\n"
                              "t|ok|0|0|{0}|0|f\n"
                              "f|rate_limited|0|5200|{0}|1|f\n"
                              "f|blocked|0|5300|{0}|2|f\n",
                              T + 1000));
}

}  // namespace
}  // namespace quota::test
