// quotactl and an unknown limit: a name close to a stored one (a typo, or a difference of
// case) is answered "did you mean ...", whichever command met it; the message never invites
// defining the mistyped name.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace {

using quota::test::dump;
using quota::test::QuotactlRun;
using quota::test::run_quotactl;
using quota::test::TempDir;

QuotactlRun quotactl_in(const std::string& db, std::vector<std::string> args) {
  // watch follows the clock as it goes, so it takes no --now.
  if (args.front() != "watch") args.insert(args.begin(), {"--now", "1700000000000"});
  args.insert(args.begin(), {"--db", db});
  return run_quotactl(args);
}

}  // namespace

TEST_CASE("quotactl: an unknown limit close to a stored one is answered 'did you mean'",
          "[quotactl][names]") {
  TempDir dir;
  const std::string db = dir.file("quota.db");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"migrate"},
           {"limit", "set", "send_message", "--max", "3", "--per", "1m"},
           {"limit", "set", "login", "--max", "5", "--per", "1h", "--algo", "token_bucket"},
           {"consume", "send_message", "u1"}}) {
    REQUIRE(quotactl_in(db, args).status == 0);
  }
  const std::string before = dump(db);
  // Every command that names a limit, each met in its own way (the library's error, or
  // quotactl's own look-up).
  const std::vector<std::vector<std::string>> commands{
      {"limit", "get", "NAME"},         {"limit", "rm", "NAME"},
      {"consume", "NAME", "u1"},        {"consume", "login,NAME", "u1"},
      {"check", "NAME", "u1"},          {"record", "NAME", "u1"},
      {"reset", "NAME", "u1"},          {"refund", "NAME", "u1"},
      {"usage", "NAME"},                {"override", "set", "NAME", "u1", "--exempt"},
      {"override", "rm", "NAME", "u1"}, {"override", "list", "NAME"},
      {"sql", "consume", "NAME"},       {"watch", "NAME", "--for", "10ms"},
  };
  for (std::vector<std::string> args : commands) {
    for (auto& [typed, meant] : std::vector<std::pair<std::string, std::string>>{
             {"send_mesage", "send_message"}, {"Send_Message", "send_message"}, {"lgoin", "login"}}) {
      std::vector<std::string> line = args;
      for (std::string& arg : line) {
        if (arg == "NAME") arg = typed;
        if (arg == "login,NAME") arg = "login," + typed;
      }
      std::string shown;
      for (const std::string& arg : line) shown += arg + " ";
      INFO("quotactl " << shown);
      const QuotactlRun outcome = quotactl_in(db, line);
      CHECK(outcome.status == 2);
      CHECK(outcome.err == "quotactl: error: unknown limit '" + typed + "': did you mean '" +
                               meant +
                               "'? (`quotactl limit list` shows the limits there are)\n");
    }
    std::vector<std::string> line = args;
    for (std::string& arg : line) {
      if (arg == "NAME") arg = "payments";
      if (arg == "login,NAME") arg = "login,payments";
    }
    const QuotactlRun far = quotactl_in(db, line);
    CHECK(far.status == 2);
    CHECK(far.err ==
          "quotactl: error: unknown limit 'payments': `quotactl limit list` shows the limits "
          "there are; `quotactl limit set NAME --max N --per DURATION` defines one\n");
  }
  CHECK(dump(db) == before);
}
