// quotactl --json on failure: the error line on stderr and, on stdout, exactly one JSON
// document {"error":{"code":...,"message":...}} with the same message, for every command and
// every kind of failure (a parse error of the command line, a bad value, an unknown limit, an
// unusable file), in-process.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace {

using nlohmann::json;
using quota::test::dump;
using quota::test::QuotactlRun;
using quota::test::run_quotactl;
using quota::test::TempDir;

QuotactlRun quotactl_in(const std::string& db, std::vector<std::string> args) {
  args.insert(args.begin(), {"--now", "1700000000000"});
  if (std::find(args.begin(), args.end(), "--db") == args.end()) {
    args.insert(args.begin(), {"--db", db});
  }
  return run_quotactl(args);
}

struct Case {
  std::vector<std::string> args;
  int status;
  const char* code;
};

}  // namespace

TEST_CASE("quotactl --json: every failure is also one JSON document on stdout",
          "[quotactl][json]") {
  TempDir dir;
  const std::string db = dir.file("quota.db");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"migrate"},
                                             {"limit", "set", "send", "--max", "3", "--per", "1m"},
                                             {"consume", "send", "u1"}}) {
    REQUIRE(quotactl_in(db, args).status == 0);
  }
  const std::string garbage = dir.file("garbage.db");
  std::ofstream(garbage) << std::string(4096, 'x');
  const std::string empty = dir.file("empty.db");
  std::ofstream{empty};
  const std::string missing = dir.file("missing.db");

  const std::vector<Case> cases{
      // The command line itself (CLI11's errors, and quotactl's own before any database).
      {{}, 2, "invalid_argument"},
      {{"frobnicate"}, 2, "invalid_argument"},
      {{"limit"}, 2, "invalid_argument"},
      {{"limit", "frobnicate"}, 2, "invalid_argument"},
      {{"consume", "send"}, 2, "invalid_argument"},
      {{"consume", "send", "u1", "extra"}, 2, "invalid_argument"},
      {{"consume", "send", "u1", "--cots", "2"}, 2, "invalid_argument"},
      {{"help", "frobnicate"}, 2, "invalid_argument"},
      {{"status", "--now", "abc"}, 2, "invalid_argument"},
      {{"status", "--now", "1", "--server-clock"}, 2, "invalid_argument"},
      {{"status", "--busy-timeout", "1x"}, 2, "invalid_argument"},
      // Bad values, every command that takes one.
      {{"migrate", "--dry-run", "extra"}, 2, "invalid_argument"},
      {{"limit", "set", "x", "--max", "0", "--per", "1m"}, 2, "invalid_argument"},
      {{"limit", "set", "x", "--max", "1", "--per", "30m1h"}, 2, "invalid_argument"},
      {{"limit", "get", "a b"}, 2, "invalid_argument"},
      {{"limit", "rm", "a b"}, 2, "invalid_argument"},
      {{"consume", "send", "u1", "--cost", "0"}, 2, "invalid_argument"},
      {{"consume", "send", "u1", "--wait", "forever"}, 2, "invalid_argument"},
      {{"check", "send", ""}, 2, "invalid_argument"},
      {{"record", "send", "u1", "--cost", "abc"}, 2, "invalid_argument"},
      {{"reset", "send", ""}, 2, "invalid_argument"},
      {{"reset", "*", ""}, 2, "invalid_argument"},
      {{"refund", "send", "u1", "--cost", "-1"}, 2, "invalid_argument"},
      {{"usage", "send", "--top", "0"}, 2, "invalid_argument"},
      {{"usage", "send", "--by", "size"}, 2, "invalid_argument"},
      {{"watch", "send", "--for", "0s"}, 2, "invalid_argument"},
      {{"override", "set", "send", "u1"}, 2, "invalid_argument"},
      {{"override", "rm", "send", ""}, 2, "invalid_argument"},
      {{"override", "list", "a b"}, 2, "invalid_argument"},
      {{"gc", "--batch", "0"}, 2, "invalid_argument"},
      {{"sql", "undo"}, 2, "invalid_argument"},
      // Unknown limits.
      {{"limit", "get", "sned"}, 2, "unknown_limit"},
      {{"consume", "nope", "u1"}, 2, "unknown_limit"},
      {{"consume", "send,nope", "u1"}, 2, "unknown_limit"},
      {{"usage", "nope"}, 2, "unknown_limit"},
      {{"sql", "consume", "nope"}, 2, "unknown_limit"},
      // Files this build cannot use.
      {{"status", "--db", missing}, 3, "io"},
      {{"limit", "list", "--db", missing}, 3, "io"},
      {{"consume", "send", "u1", "--db", dir.path().string()}, 3, "io"},
      {{"status", "--db", garbage}, 3, "not_a_database"},
      {{"check", "send", "u1", "--db", empty}, 3, "not_migrated"},
  };
  const std::string before = dump(db);
  for (const Case& c : cases) {
    for (const bool before_command : {false, true}) {
      std::vector<std::string> args = c.args;
      // --json anywhere on the line, also where a parse error stops CLI11 before reading it.
      args.insert(before_command ? args.begin() : args.end(), "--json");
      std::string shown;
      for (const std::string& arg : args) shown += arg + " ";
      INFO("quotactl " << shown);
      const QuotactlRun outcome = quotactl_in(db, args);
      INFO(outcome.err);
      CHECK(outcome.status == c.status);
      REQUIRE(outcome.err.rfind("quotactl: error: ", 0) == 0);
      REQUIRE(outcome.err.find('\n') == outcome.err.size() - 1);
      const json document = json::parse(outcome.out);  // exactly one document
      CHECK(document.size() == 1);
      CHECK(document["error"].size() == 2);
      CHECK(document["error"]["code"] == c.code);
      const std::string line = outcome.err.substr(17, outcome.err.size() - 18);
      CHECK(document["error"]["message"] == line);
      // Without --json, stdout stays empty.
      const QuotactlRun plain = quotactl_in(db, c.args);
      CHECK(plain.status == c.status);
      CHECK(plain.out.empty());
      CHECK(plain.err == outcome.err);
    }
  }
  CHECK(dump(db) == before);
  CHECK_FALSE(std::filesystem::exists(missing));
}

TEST_CASE("quotactl --json: a message that is not valid UTF-8 still makes one document",
          "[quotactl][json]") {
  TempDir dir;
  const QuotactlRun outcome =
      quotactl_in(dir.file("quota.db"), {"consume", "send", "bad\xff owner", "--json"});
  CHECK(outcome.status == 2);
  const json document = json::parse(outcome.out);
  CHECK(document["error"]["code"] == "invalid_argument");
}
