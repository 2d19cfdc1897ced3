// quotactl: every command and exit status through run() in-process, the refusal of bad input
// and of unusable files without changing them, the `sql` statements against raw SQLite, and a
// few runs of the real binary.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "cli.h"
#include "quota/version.h"
#include "sqlite/sqlite_store.h"
#include "statements.h"
#include "support.h"
#include "support/quotactl_run.h"
#include "text.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace {

using nlohmann::json;
using quota::test::dump;
using quota::test::QuotactlRun;
using quota::test::RawDb;
using quota::test::read_file;
using quota::test::run_quotactl;
using quota::test::TempDir;

constexpr std::int64_t kStart = 1'700'000'000'000;  // 2023-11-14T22:13:20.000Z

// [1, 2, ..., the latest schema version]: what migrating an empty database applies.
json every_version() {
  json versions = json::array();
  for (int v = 1; v <= quota::detail::latest_version(quota::detail::built_in_sqlite_migrations());
       ++v)
    versions.push_back(v);
  return versions;
}

// A scratch database file and quotactl runs against it at a clock the test sets.
struct Fixture {
  TempDir dir;
  std::string db = dir.file("quota.db");
  std::int64_t now = kStart;

  QuotactlRun ctl(std::vector<std::string> args, const quotactl::Context& context = {}) const {
    args.insert(args.begin(), {"--db", db, "--now", std::to_string(now)});
    return run_quotactl(args, context);
  }
  // Runs a command that must succeed with --json, and returns its document.
  json ok(std::vector<std::string> args) const {
    args.push_back("--json");
    const QuotactlRun outcome = ctl(args);
    INFO(outcome.err);
    REQUIRE(outcome.status == 0);
    REQUIRE(outcome.err.empty());
    return outcome.document();
  }
  // A migrated database with limit `send` (sliding_log, 3 per minute) and some state.
  void prepare() {
    ok({"migrate"});
    ok({"limit", "set", "send", "--max", "3", "--per", "1m"});
    ok({"limit", "set", "daily", "--max", "100", "--per", "1d", "--algo", "fixed_window"});
    ok({"consume", "send", "u1"});
  }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string random_bytes(std::size_t size) {
  std::mt19937 random(42);
  std::string bytes(size, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random() & 0xFF);
  return bytes;
}

// An empty SQLite database of an application: one table of its own, no quota schema.
void make_application_database(const std::string& path) {
  RawDb db(path);
  db.exec(
      "CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT); "
      "INSERT INTO accounts (email) VALUES ('a@example.com')");
}

}  // namespace

// --- migrate and status -------------------------------------------------------------------

TEST_CASE("quotactl migrate creates the file, applies every migration once", "[quotactl]") {
  Fixture f;
  const json first = f.ok({"migrate"});
  CHECK(first["applied"] == every_version());
  CHECK(first["schema_version"] ==
        quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));
  CHECK(std::filesystem::exists(f.db));

  const json again = f.ok({"migrate"});
  CHECK(again["applied"] == json::array());
  CHECK(again["schema_version"] ==
        quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));

  RawDb db(f.db);
  CHECK(db.integer("SELECT count(*) FROM quota_migrations") ==
        quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));
  CHECK(db.integer("SELECT applied_at_ms FROM quota_migrations") == kStart);
  CHECK(db.rows("PRAGMA journal_mode")[0][0] == "wal");

  const QuotactlRun human = run_quotactl({"--db", f.dir.file("other.db"), "migrate"});
  CHECK(human.status == 0);
  CHECK(human.out.find("applied 0001_initial") != std::string::npos);
}

TEST_CASE("quotactl migrate keeps an application's own tables and rows", "[quotactl]") {
  Fixture f;
  make_application_database(f.db);
  f.ok({"migrate"});
  RawDb db(f.db);
  CHECK(db.rows("SELECT email FROM accounts")[0][0] == "a@example.com");
}

TEST_CASE("quotactl migrate --dry-run prints the pending SQL and creates nothing", "[quotactl]") {
  Fixture f;
  const json plan = f.ok({"migrate", "--dry-run"});
  CHECK(plan["pending"] == every_version());
  CHECK(plan["schema_version"] == 0);
  CHECK_FALSE(std::filesystem::exists(f.db));

  const QuotactlRun human = f.ctl({"migrate", "--dry-run"});
  CHECK(human.status == 0);
  CHECK(human.out.find(quota::detail::built_in_sqlite_migrations().front().sql) !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(f.db));

  make_application_database(f.db);
  const std::string before = read_file(f.db);
  CHECK(f.ok({"migrate", "--dry-run"})["pending"] == every_version());
  CHECK(read_file(f.db) == before);

  f.ok({"migrate"});
  const json nothing = f.ok({"migrate", "--dry-run"});
  CHECK(nothing["pending"] == json::array());
  CHECK(nothing["schema_version"] ==
        quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));
}

TEST_CASE("quotactl status reports any SQLite database without writing", "[quotactl]") {
  Fixture f;
  SECTION("a missing file is exit 3 naming quotactl migrate, and is not created") {
    const QuotactlRun outcome = f.ctl({"status"});
    CHECK(outcome.status == 3);
    CHECK(outcome.one_error_line());
    CHECK(outcome.err.find("quotactl migrate") != std::string::npos);
    CHECK(outcome.out.empty());
    CHECK_FALSE(std::filesystem::exists(f.db));
  }
  SECTION("an unmigrated database is version 0 with every migration pending") {
    make_application_database(f.db);
    const std::string before = read_file(f.db);
    const json status = f.ok({"status"});
    CHECK(status["schema_version"] == 0);
    CHECK(status["latest_version"] ==
          quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));
    CHECK(status["pending"] == every_version());
    CHECK(status["journal_mode"] == "delete");
    CHECK(status["limits"] == 0);
    CHECK(status["state_rows"] == 0);
    CHECK(read_file(f.db) == before);
    const QuotactlRun human = f.ctl({"status"});
    CHECK(human.status == 0);
    CHECK(human.out.find("0001_initial") != std::string::npos);
    CHECK(human.out.find("quotactl migrate") != std::string::npos);
  }
  SECTION("an empty file is an empty database") {
    write_bytes(f.db, "");
    CHECK(f.ok({"status"})["schema_version"] == 0);
    CHECK(read_file(f.db).empty());
  }
  SECTION("a migrated database shows its limits and state rows") {
    f.prepare();
    f.ok({"consume", "send", "u2"});
    f.ok({"consume", "daily", "u2"});
    f.ok({"limit", "set", "bucket", "--max", "5", "--per", "1s", "--algo", "token_bucket"});
    f.ok({"consume", "bucket", "u1"});
    const std::string before = dump(f.db);
    const json status = f.ok({"status"});
    CHECK(status["schema_version"] ==
          quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));
    CHECK(status["pending"] == json::array());
    CHECK(status["journal_mode"] == "wal");
    CHECK(status["limits"] == 3);
    // send (sliding_log): 2 owner rows and 2 log events; daily (fixed_window): 1 window row;
    // bucket (token_bucket): 1 bucket.
    CHECK(status["state_rows"] == 6);
    CHECK(status["path"] == f.db);
    CHECK_FALSE(status.contains("problem"));
    CHECK(dump(f.db) == before);
  }
  SECTION("a schema newer than the build is reported with exit 0") {
    f.ok({"migrate"});
    RawDb(f.db).exec("INSERT INTO quota_migrations VALUES (99, 'future', 'abc', 0)");
    const json status = f.ok({"status"});
    CHECK(status["schema_version"] == 99);
    CHECK(status["latest_version"] ==
          quota::detail::latest_version(quota::detail::built_in_sqlite_migrations()));
    CHECK(status["pending"] == json::array());
    CHECK(status.contains("problem"));
  }
}

TEST_CASE("quotactl refuses a schema newer than the build or an edited migration (exit 3)",
          "[quotactl]") {
  Fixture f;
  f.prepare();
  SECTION("newer") {
    RawDb(f.db).exec("INSERT INTO quota_migrations VALUES (99, 'future', 'abc', 0)");
  }
  SECTION("edited") { RawDb(f.db).exec("UPDATE quota_migrations SET checksum = 'edited'"); }
  const std::string before = dump(f.db);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"consume", "send", "u1"},
                                               {"limit", "list"},
                                               {"migrate"},
                                               {"migrate", "--dry-run"},
                                               {"sql", "consume", "send"}}) {
    INFO(args[0]);
    const QuotactlRun outcome = f.ctl(args);
    CHECK(outcome.status == 3);
    CHECK(outcome.one_error_line());
  }
  CHECK(dump(f.db) == before);
}

TEST_CASE("quotactl status on an edited migration reports it and exits 3", "[quotactl]") {
  Fixture f;
  f.ok({"migrate"});
  RawDb(f.db).exec("UPDATE quota_migrations SET checksum = 'edited'");
  const QuotactlRun outcome = f.ctl({"status", "--json"});
  CHECK(outcome.status == 3);
  CHECK(outcome.one_error_line());
  CHECK(outcome.err.find("checksum") != std::string::npos);
  CHECK(outcome.document()["problem"].get<std::string>().find("checksum") != std::string::npos);
}

// --- limits -------------------------------------------------------------------------------

TEST_CASE("quotactl limit set/get/list/rm", "[quotactl]") {
  Fixture f;
  f.ok({"migrate"});

  const json created = f.ok({"limit", "set", "send", "--max", "10", "--per", "1m"});
  CHECK(created["name"] == "send");
  CHECK(created["algorithm"] == "sliding_log");
  CHECK(created["maximum"] == 10);
  CHECK(created["period_ms"] == 60000);
  CHECK(created["burst"].is_null());
  CHECK(created["shadow"] == false);
  CHECK(created["block_ms"].is_null());
  // No calendar (tests/sqlite/quotactl_calendar_test.cpp has those).
  CHECK(created["period"].is_null());
  CHECK(created["utc_offset"].is_null());
  CHECK(created["anchor_ms"].is_null());
  CHECK(created.size() == 10);

  SECTION("set is idempotent") {
    const std::string before = dump(f.db);
    CHECK(f.ok({"limit", "set", "send", "--max", "10", "--per", "1m"}) == created);
    CHECK(dump(f.db) == before);
    const QuotactlRun human = f.ctl({"limit", "set", "send", "--max", "10", "--per", "60s"});
    CHECK(human.out == "limit send unchanged: 10 per 1m (sliding_log)\n");
  }
  SECTION("the algorithm defaults to the existing limit's") {
    f.ok({"limit", "set", "send", "--max", "5", "--per", "1h", "--algo", "fixed_window"});
    const json updated = f.ok({"limit", "set", "send", "--max", "7", "--per", "500ms"});
    CHECK(updated["algorithm"] == "fixed_window");
    CHECK(updated["maximum"] == 7);
    CHECK(updated["period_ms"] == 500);
  }
  SECTION("get, list and rm") {
    f.ok({"limit", "set", "api", "--max", "1000", "--per", "1d", "--algo", "fixed_window"});
    CHECK(f.ok({"limit", "get", "send"}) == created);
    const json all = f.ok({"limit", "list"});
    REQUIRE(all.is_array());
    REQUIRE(all.size() == 2);
    CHECK(all[0]["name"] == "api");
    CHECK(all[0]["algorithm"] == "fixed_window");
    CHECK(all[0]["period_ms"] == 86'400'000);
    CHECK(all[1] == created);

    const QuotactlRun table = f.ctl({"limit", "list"});
    CHECK(table.out.find("fixed_window") != std::string::npos);
    CHECK(table.out.find("1d") != std::string::npos);

    f.ok({"consume", "api", "u1"});
    CHECK(f.ok({"limit", "rm", "api"}) == json{{"removed", "api"}});
    CHECK(f.ok({"limit", "list"}).size() == 1);
    CHECK(RawDb(f.db).integer("SELECT count(*) FROM quota_windows") == 0);
  }
  SECTION("an unknown NAME is exit 2") {
    for (const char* command : {"get", "rm"}) {
      const QuotactlRun outcome = f.ctl({"limit", command, "nope"});
      CHECK(outcome.status == 2);
      CHECK(outcome.one_error_line());
      CHECK(outcome.err.find("unknown limit 'nope'") != std::string::npos);
    }
  }
  SECTION("a token bucket keeps its burst; a configuration that could overflow is exit 2") {
    const json bucket = f.ok({"limit", "set", "tb", "--max", "7", "--per", "1m", "--algo",
                              "token_bucket", "--burst", "3"});
    CHECK(bucket["algorithm"] == "token_bucket");
    CHECK(bucket["burst"] == 3);
    CHECK(f.ok({"limit", "get", "tb"}) == bucket);
    const QuotactlRun outcome = f.ctl({"limit", "set", "sw", "--max", "1000000000000", "--per",
                                       "1d", "--algo", "sliding_window"});
    CHECK(outcome.status == 2);
    CHECK(outcome.one_error_line());
    CHECK(outcome.err.find("at most 2^62") != std::string::npos);
  }
  SECTION("an empty list says how to add a limit") {
    f.ok({"limit", "rm", "send"});
    CHECK(f.ok({"limit", "list"}) == json::array());
    CHECK(f.ctl({"limit", "list"}).out.find("quotactl limit set") != std::string::npos);
  }
}

// `args` with `option`'s value replaced by `value`, or the option added.
std::vector<std::string> with_option(std::vector<std::string> args, const std::string& option,
                                     const std::string& value) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == option) {
      args[i + 1] = value;
      return args;
    }
  }
  args.push_back(option);
  args.push_back(value);
  return args;
}

TEST_CASE("quotactl limit set: numbers too large for 64 bits are refused in the units typed",
          "[quotactl]") {
  // Regression: `--max 1000000000000 --per 366d --algo token_bucket` suggested a maximum of at
  // most 145836053, which was then refused for the burst that defaults to the maximum, and the
  // message spoke of 31622400000 ms.
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "sw", "--max", "10", "--per", "1d", "--algo", "sliding_window"});
  const std::vector<std::vector<std::string>> refused = {
      {"limit", "set", "t", "--max", "1000000000000", "--per", "366d", "--algo", "token_bucket"},
      {"limit", "set", "t", "--max", "100000000", "--per", "366d", "--algo", "token_bucket"},
      {"limit", "set", "t", "--max", "145836054", "--per", "8784h", "--algo", "token_bucket",
       "--burst", "72918027"},
      {"limit", "set", "t", "--max", "1", "--per", "366d", "--algo", "token_bucket", "--burst",
       "1000000000000"},
      {"limit", "set", "t", "--max", "1000000000000", "--per", "1d", "--algo", "sliding_window"},
      {"limit", "set", "t", "--max", "200000000", "--per", "366d", "--algo", "sliding_window"},
      {"limit", "set", "sw", "--max", "200000000", "--per", "527040m"},  // the algorithm kept
  };
  const std::vector<std::pair<std::regex, std::vector<std::string>>> suggestions = {
      {std::regex(R"(use --max (\d+) and --burst (\d+) or less)"), {"--max", "--burst"}},
      {std::regex(R"(use --max (\d+) or less)"), {"--max"}},
      {std::regex(R"(use --burst (\d+) or less)"), {"--burst"}},
      {std::regex(R"(add --burst (\d+) or less)"), {"--burst"}},
      {std::regex(R"(--per (\w+) or less)"), {"--per"}},
  };
  for (const std::vector<std::string>& args : refused) {
    const std::string& per = *(std::find(args.begin(), args.end(), "--per") + 1);
    CAPTURE(args);
    const QuotactlRun outcome = f.ctl(args);
    CHECK(outcome.status == 2);
    CHECK(outcome.one_error_line());
    CHECK(outcome.err.find("--per " + per + " is too large") != std::string::npos);
    CHECK(outcome.err.find("00000 ms") == std::string::npos);  // no period in milliseconds
    CHECK(f.ctl({"limit", "get", "t"}).status == 2);           // nothing was created or changed
    CHECK(f.ok({"limit", "get", "sw"})["maximum"] == 10);
    // Every suggestion, with the other options as typed, is accepted.
    int suggested = 0;
    for (const auto& [pattern, options] : suggestions) {
      std::smatch match;
      if (!std::regex_search(outcome.err, match, pattern)) continue;
      std::vector<std::string> fixed = args;
      for (std::size_t i = 0; i < options.size(); ++i) {
        fixed = with_option(fixed, options[i], match[i + 1].str());
      }
      CAPTURE(fixed);
      ++suggested;
      f.ok(fixed);
      f.ok(args[2] == "t"
               ? std::vector<std::string>{"limit", "rm", "t"}
               : std::vector<std::string>{"limit", "set", "sw", "--max", "10", "--per", "1d"});
    }
    CHECK(suggested >= 2);  // a number to lower, and a shorter period
  }
}

// --- operations ---------------------------------------------------------------------------

TEST_CASE("quotactl consume, check, record and reset answer per docs/concepts.md", "[quotactl]") {
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "send", "--max", "2", "--per", "1m"});

  const QuotactlRun first = f.ctl({"consume", "send", "u1", "--json"});
  CHECK(first.status == 0);
  const json allowed = first.document();
  CHECK(allowed == json{{"limit", "send"},
                        {"owner", "u1"},
                        {"allowed", true},
                        {"reason", "ok"},
                        {"remaining", 1},
                        {"retry_after_ms", 0},
                        {"reset_at_ms", kStart + 60'000},
                        {"denied", 0},
                        {"shadow_denied", false}});

  f.now = kStart + 1'000;
  CHECK(f.ok({"consume", "send", "u1", "--cost", "1"})["remaining"] == 0);

  f.now = kStart + 2'000;
  const std::string before_check = dump(f.db);
  const QuotactlRun check = f.ctl({"check", "send", "u1", "--json"});
  CHECK(check.status == 1);
  CHECK(check.document()["allowed"] == false);
  CHECK(check.document()["retry_after_ms"] == 58'000);
  CHECK(dump(f.db) == before_check);

  const QuotactlRun denied = f.ctl({"consume", "send", "u1", "--json"});
  CHECK(denied.status == 1);
  const json answer = denied.document();
  CHECK(answer["limit"] == "send");
  CHECK(answer["owner"] == "u1");
  CHECK(answer["allowed"] == false);
  CHECK(answer["reason"] == "rate_limited");
  CHECK(answer["remaining"] == 0);
  CHECK(answer["retry_after_ms"] == 58'000);
  CHECK(answer["reset_at_ms"] == kStart + 61'000);
  CHECK(answer["denied"] == 1);

  SECTION("retry_after_ms is tight through the CLI") {
    f.now = kStart + 2'000 + 58'000 - 1;
    CHECK(f.ctl({"check", "send", "u1"}).status == 1);
    f.now = kStart + 2'000 + 58'000;
    CHECK(f.ctl({"check", "send", "u1"}).status == 0);
  }
  SECTION("a cost above the capacity can never succeed") {
    const QuotactlRun outcome = f.ctl({"consume", "send", "u2", "--cost", "3", "--json"});
    CHECK(outcome.status == 1);
    CHECK(outcome.document()["reason"] == "cost_exceeds_capacity");
    CHECK(outcome.document()["retry_after_ms"] == -1);
  }
  SECTION("record records beyond the limit and exits 1 when over it") {
    const QuotactlRun outcome = f.ctl({"record", "send", "u1", "--cost", "2", "--json"});
    CHECK(outcome.status == 1);
    CHECK(outcome.document()["allowed"] == false);
    CHECK(outcome.document()["remaining"] == 0);
    const json under = f.ok({"record", "send", "u3"});
    CHECK(under["allowed"] == true);
    CHECK(under["remaining"] == 1);
  }
  SECTION("reset forgets the owner's state and exits 0") {
    const json reset = f.ok({"reset", "send", "u1"});
    CHECK(reset == json{{"limit", "send"},
                        {"owner", "u1"},
                        {"allowed", true},
                        {"reason", "ok"},
                        {"remaining", 2},
                        {"retry_after_ms", 0},
                        {"reset_at_ms", kStart + 2'000},
                        {"denied", 0},
                        {"shadow_denied", false}});
    CHECK(f.ok({"consume", "send", "u1"})["remaining"] == 1);
  }
}

TEST_CASE("quotactl prints one readable line per operation", "[quotactl]") {
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "send", "--max", "10", "--per", "1m"});
  CHECK(f.ctl({"consume", "send", "u1"}).out == "allowed  send/u1: 9 of 10 left, resets in 1m\n");
  f.now += 100;
  CHECK(f.ctl({"check", "send", "u1"}).out == "allowed  send/u1: 9 of 10 left, resets in 59.9s\n");
  CHECK(f.ctl({"record", "send", "u1", "--cost", "9"}).out ==
        "recorded send/u1: 0 of 10 left, resets in 1m\n");
  f.now = kStart + 58'766;
  CHECK(f.ctl({"consume", "send", "u1"}).out ==
        "denied   send/u1: 0 of 10 left, retry in 1.234s (at 2023-11-14T22:14:20.000Z), "
        "1 denied so far\n");
  CHECK(f.ctl({"consume", "send", "u1", "--cost", "11"}).out ==
        "denied   send/u1: a cost of 11 is more than the capacity of 10: it can never be "
        "allowed\n");
  CHECK(f.ctl({"reset", "send", "u1"}).out == "reset    send/u1: 10 of 10 left, nothing in use\n");

  SECTION("colour only on a terminal, without NO_COLOR and without --json") {
    const quotactl::Context terminal{"", false, true};
    CHECK(f.ctl({"consume", "send", "u1"}, terminal).out.find("\x1b[32mallowed") !=
          std::string::npos);
    const quotactl::Context no_color{"", true, true};
    CHECK(f.ctl({"consume", "send", "u1"}, no_color).out.find('\x1b') == std::string::npos);
    CHECK(f.ctl({"consume", "send", "u1", "--json"}, terminal).out.find('\x1b') ==
          std::string::npos);
  }
}

TEST_CASE("quotactl usage lists owners most used first", "[quotactl]") {
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "send", "--max", "4", "--per", "1m"});
  f.ok({"consume", "send", "light"});
  f.ok({"consume", "send", "heavy", "--cost", "4"});
  f.ok({"consume", "send", "middle", "--cost", "2"});
  f.ctl({"consume", "send", "heavy"});  // denied

  const json all = f.ok({"usage", "send"});
  REQUIRE(all.size() == 3);
  CHECK(all[0] == json{{"owner", "heavy"},
                       {"used", 4},
                       {"remaining", 0},
                       {"denied", 1},
                       {"reset_at_ms", kStart + 60'000},
                       {"shadow_denied", 0},
                       {"capacity", 4},
                       {"blocked_until_ms", nullptr}});
  CHECK(all[1]["owner"] == "middle");
  CHECK(all[1]["used"] == 2);
  CHECK(all[2]["owner"] == "light");

  CHECK(f.ok({"usage", "send", "--top", "1"}).size() == 1);
  const json one = f.ok({"usage", "send", "--owner", "middle"});
  REQUIRE(one.size() == 1);
  CHECK(one[0]["remaining"] == 2);
  CHECK(f.ok({"usage", "send", "--owner", "nobody"}) == json::array());

  const QuotactlRun table = f.ctl({"usage", "send"});
  CHECK(table.status == 0);
  CHECK(table.out.find("heavy   ####################   4/4       1  1m") != std::string::npos);
  CHECK(table.out.find("middle  ##########..........   2/4       0  1m") != std::string::npos);
  CHECK(table.out.find("heavy") < table.out.find("middle"));

  CHECK(f.ctl({"usage", "nope"}).status == 2);
}

// --- sql ----------------------------------------------------------------------------------

namespace {

// The statement of `quotactl sql` output: what follows the leading comment lines.
std::string statement_of(const std::string& output) {
  std::size_t start = 0;
  while (output.compare(start, 2, "--") == 0) start = output.find('\n', start) + 1;
  return output.substr(start);
}

// Runs `sql` on a raw connection with the parameters bound, as any SQLite client would.
json run_raw(RawDb& db, const std::string& sql, const std::string& limit, const std::string& owner,
             std::int64_t cost, std::int64_t now) {
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &statement, nullptr) == SQLITE_OK);
  sqlite3_bind_text(statement, sqlite3_bind_parameter_index(statement, ":limit"), limit.c_str(), -1,
                    SQLITE_TRANSIENT);
  sqlite3_bind_text(statement, sqlite3_bind_parameter_index(statement, ":owner"), owner.c_str(), -1,
                    SQLITE_TRANSIENT);
  sqlite3_bind_int64(statement, sqlite3_bind_parameter_index(statement, ":cost"), cost);
  sqlite3_bind_int64(statement, sqlite3_bind_parameter_index(statement, ":now"), now);
  REQUIRE(sqlite3_step(statement) == SQLITE_ROW);
  json row{{"limit", limit}, {"owner", owner}};
  for (int i = 0; i < sqlite3_column_count(statement); ++i) {
    const std::string name = sqlite3_column_name(statement, i);
    if (name == "reason") {
      row[name] = reinterpret_cast<const char*>(sqlite3_column_text(statement, i));
    } else if (name == "allowed" || name == "shadow_denied") {
      row[name] = sqlite3_column_int64(statement, i) != 0;
    } else if (name != "used" && name != "shadow_denials" && name != "capacity" &&
               name != "blocked_until_ms") {
      // (those four are check's, for Engine::usage and owner_usage)
      row[name] = sqlite3_column_int64(statement, i);
    }
  }
  while (sqlite3_step(statement) == SQLITE_ROW) {
  }
  REQUIRE(sqlite3_finalize(statement) == SQLITE_OK);
  return row;
}

}  // namespace

TEST_CASE("quotactl sql prints exactly the library's statement", "[quotactl]") {
  using quota::detail::Operation;
  Fixture f;
  for (const auto& [name, operation] :
       {std::pair{"consume", Operation::consume}, std::pair{"check", Operation::check},
        std::pair{"record", Operation::record}, std::pair{"reset", Operation::reset}}) {
    INFO(name);
    const QuotactlRun human = f.ctl({"sql", name});  // no NAME: no database needed
    CHECK(human.status == 0);
    CHECK(human.out.find(".parameter set :limit") != std::string::npos);
    const std::string& expected =
        quota::detail::statement(operation, quota::detail::kind_of(quota::Algorithm::sliding_log));
    CHECK(statement_of(human.out) == expected + ";\n");
    const json document = f.ok({"sql", name});
    CHECK(document == json{{"operation", name},
                           {"algorithm", "sliding_log"},
                           {"dialect", "sqlite"},
                           {"parameters", {"limit", "owner", "cost", "now"}},
                           {"sql", expected}});
  }
  CHECK_FALSE(std::filesystem::exists(f.db));

  f.prepare();
  const json daily = f.ok({"sql", "consume", "daily"});
  CHECK(daily["algorithm"] == "fixed_window");
  CHECK(daily["sql"] ==
        quota::detail::statement(Operation::consume, quota::detail::kind_of(quota::Algorithm::fixed_window)));
  CHECK(f.ctl({"sql", "consume", "nope"}).status == 2);
  CHECK(f.ctl({"sql", "undo"}).status == 2);
}

TEST_CASE("quotactl sql statements give the answers quotactl consume gives", "[quotactl]") {
  Fixture cli;       // driven by quotactl consume/check/record/reset
  Fixture sql_only;  // driven by the printed statements on a raw connection
  for (Fixture* f : {&cli, &sql_only}) {
    f->ok({"migrate"});
    f->ok({"limit", "set", "log", "--max", "3", "--per", "10s"});
    f->ok({"limit", "set", "window", "--max", "3", "--per", "10s", "--algo", "fixed_window"});
  }
  struct Step {
    const char* operation;
    const char* limit;
    std::int64_t at;
    std::int64_t cost;
  };
  const Step steps[] = {
      {"consume", "log", 0, 1},         {"consume", "log", 500, 2},
      {"consume", "log", 900, 1},       {"check", "log", 1'000, 1},
      {"record", "log", 2'000, 2},      {"consume", "log", 10'000, 1},
      {"consume", "log", 12'500, 1},    {"reset", "log", 13'000, 1},
      {"consume", "log", 13'000, 3},    {"consume", "window", 0, 2},
      {"consume", "window", 9'999, 2},  {"check", "window", 9'999, 1},
      {"consume", "window", 10'000, 3}, {"consume", "window", 5'000, 1},
  };
  RawDb raw(sql_only.db);
  for (const Step& step : steps) {
    INFO(step.operation << ' ' << step.limit << " at " << step.at);
    cli.now = kStart + step.at;
    std::vector<std::string> args{step.operation, step.limit, "u1", "--json"};
    if (std::string(step.operation) != "reset") {
      args.insert(args.end(), {"--cost", std::to_string(step.cost)});
    }
    const QuotactlRun by_cli = cli.ctl(args);
    REQUIRE(by_cli.status <= 1);
    const std::string statement =
        statement_of(sql_only.ctl({"sql", step.operation, step.limit}).out);
    CHECK(run_raw(raw, statement, step.limit, "u1", step.cost, kStart + step.at) ==
          by_cli.document());
  }
}

TEST_CASE("quotactl sql's shell instructions work in the sqlite3 shell", "[quotactl]") {
  if (!std::filesystem::exists("/usr/bin/sqlite3")) {
    WARN("sqlite3 shell not installed; skipped");
    return;
  }
  Fixture f;
  f.prepare();
  // Uncomment the .parameter lines, as a person following them would.
  std::string script;
  std::istringstream lines(f.ctl({"sql", "consume", "send"}).out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("--   .parameter", 0) == 0) line = line.substr(5);
    if (line.rfind(".parameter set :now", 0) == 0)
      line = ".parameter set :now " + std::to_string(kStart + 1);
    script += line + '\n';
  }
  const std::string script_path = f.dir.file("consume.sql");
  write_bytes(script_path, ".mode list\n" + script);
  const std::string command = "/usr/bin/sqlite3 " + f.db + " < " + script_path;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string output;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  CHECK(WEXITSTATUS(pclose(pipe)) == 0);
  // u1 consumed once in prepare(): allowed, 1 of 3 left after this one, reset a minute later.
  CHECK(output == "1|ok|1|0|" + std::to_string(kStart + 60'001) + "|0|0\n");
}

// --- help and version ---------------------------------------------------------------------

TEST_CASE("quotactl --help, help COMMAND and --version", "[quotactl]") {
  const QuotactlRun help = run_quotactl({"--help"});
  CHECK(help.status == 0);
  for (const char* command : {"migrate", "status", "limit", "consume", "check", "record", "reset",
                              "usage", "gc", "sql"}) {
    CHECK(help.out.find(std::string("  ") + command + " ") != std::string::npos);
  }
  CHECK(run_quotactl({"help"}).out == help.out);

  const QuotactlRun consume = run_quotactl({"help", "consume"});
  CHECK(consume.status == 0);
  CHECK(consume.out.find("--cost") != std::string::npos);
  CHECK(run_quotactl({"consume", "--help"}).out == consume.out);
  CHECK(run_quotactl({"help", "limit", "set"}).out.find("--per DURATION") != std::string::npos);

  const QuotactlRun unknown = run_quotactl({"help", "nope"});
  CHECK(unknown.status == 2);
  CHECK(unknown.one_error_line());

  const QuotactlRun version = run_quotactl({"--version"});
  CHECK(version.status == 0);
  CHECK(version.out == std::string("quotactl ") + quota::kVersion + "\n");

  // With --json, exactly one JSON document holding the same text (docs/quotactl.md).
  const QuotactlRun json_version = run_quotactl({"--version", "--json"});
  CHECK(json_version.status == 0);
  CHECK(json::parse(json_version.out) == json{{"version", quota::kVersion}});
  const QuotactlRun json_help = run_quotactl({"--json", "help", "limit", "set"});
  CHECK(json_help.status == 0);
  CHECK(json::parse(json_help.out)["help"] == run_quotactl({"help", "limit", "set"}).out);
  const QuotactlRun json_flag = run_quotactl({"consume", "--help", "--json"});
  CHECK(json_flag.status == 0);
  CHECK(json::parse(json_flag.out)["help"] == consume.out);
}

TEST_CASE("quotactl help COMMAND explains every command, as COMMAND --help does", "[quotactl]") {
  for (const std::string command :
       {"migrate", "status", "limit", "limit set", "limit get", "limit list", "limit rm", "consume",
        "check", "record", "reset", "usage", "gc", "sql", "help"}) {
    INFO(command);
    std::vector<std::string> words{"help"};
    for (std::size_t start = 0, space; start < command.size(); start = space + 1) {
      space = std::min(command.find(' ', start), command.size());
      words.push_back(command.substr(start, space - start));
    }
    const QuotactlRun help = run_quotactl(words);
    CHECK(help.status == 0);
    CHECK(help.err.empty());
    CHECK(help.out.find("Usage: quotactl " + command + " [OPTIONS]") != std::string::npos);
    CHECK(help.out.find("Global options") != std::string::npos);
    words.erase(words.begin());
    words.push_back("--help");
    CHECK(run_quotactl(words).out == help.out);
  }
  CHECK(run_quotactl({"help", "gc"}).out.find("--batch N") != std::string::npos);
  CHECK(run_quotactl({"help", "migrate"}).out.find("--dry-run") != std::string::npos);
}

TEST_CASE("quotactl global options stand before or after the command", "[quotactl]") {
  Fixture f;
  f.prepare();
  const std::string at = std::to_string(kStart + 5);
  const QuotactlRun after =
      run_quotactl({"check", "send", "u1", "--db", f.db, "--json", "--now", at});
  CHECK(after.status == 0);
  CHECK(after.document()["remaining"] == 2);
  const QuotactlRun nested = run_quotactl({"limit", "get", "send", "--json", "--db", f.db});
  CHECK(nested.document()["maximum"] == 3);

  SECTION("--db defaults to $QUOTA_DB") {
    const QuotactlRun outcome = run_quotactl({"limit", "list", "--json"}, {f.db, false, false});
    CHECK(outcome.status == 0);
    CHECK(outcome.document().size() == 2);
  }
}

// --- refusals -----------------------------------------------------------------------------

TEST_CASE("quotactl refuses invalid input with exit 2 and changes nothing", "[quotactl]") {
  struct Case {
    std::vector<std::string> args;
    bool needs_database;  // the refusal needs the limits in the database (unknown limit...)
  };
  const std::string long_owner(1025, 'o');
  const std::string long_name(65, 'n');
  const std::vector<Case> cases{
      {{"consume", "send", ""}, false},
      {{"consume", "send", long_owner}, false},
      {{"consume", "send", "bad\xff utf8"}, false},
      {{"consume", "send", "u1", "--cost", "0"}, false},
      {{"consume", "send", "u1", "--cost", "-1"}, false},
      {{"consume", "send", "u1", "--cost=-1"}, false},
      {{"consume", "send", "u1", "--cost", "1.5"}, false},
      {{"consume", "send", "u1", "--cost", "abc"}, false},
      {{"consume", "send", "u1", "--cost", "99999999999999999999999"}, false},
      {{"consume", "send", "u1", "--cost", "1000000000001"}, false},
      {{"check", "send", "u1", "--cost", "0"}, false},
      {{"record", "send", "u1", "--cost", "abc"}, false},
      {{"reset", "send", ""}, false},
      {{"limit", "set", "x", "--max", "0", "--per", "1m"}, false},
      {{"limit", "set", "x", "--max", "-1", "--per", "1m"}, false},
      {{"limit", "set", "x", "--max", "1.5", "--per", "1m"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "0s"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "-1m"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "1.5m"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "10y"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "abc"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "367d"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "366366366366d"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "1m", "--algo", "leaky"}, false},
      {{"limit", "set", "x", "--max", "10", "--per", "1m", "--algo", "sliding_log", "--burst", "5"},
       false},
      {{"limit", "set", "x", "--max", "1000000000000", "--per", "1d", "--algo", "sliding_window"},
       false},
      {{"limit", "set", "x", "--max", "145836054", "--per", "366d", "--algo", "sliding_window"},
       false},
      {{"limit", "set", "x", "--max", "10", "--per", "366d", "--algo", "token_bucket", "--burst",
        "1000000000000"},
       false},
      {{"limit", "set", "x", "--max", "10", "--per", "1m", "--burst", "0"}, false},
      {{"limit", "set", "send", "--max", "10", "--per", "1m", "--burst", "5"}, true},
      {{"limit", "set", "a b", "--max", "10", "--per", "1m"}, false},
      {{"limit", "set", long_name, "--max", "10", "--per", "1m"}, false},
      {{"limit", "set", "x", "--per", "1m"}, false},
      {{"limit", "get", "a b"}, false},
      {{"limit", "rm", long_name}, false},
      {{"consume", "a b", "u1"}, false},
      {{"consume", long_name, "u1"}, false},
      {{"consume", "nope", "u1"}, true},
      {{"check", "nope", "u1"}, true},
      {{"record", "nope", "u1"}, true},
      {{"reset", "nope", "u1"}, true},
      {{"limit", "get", "nope"}, true},
      {{"limit", "rm", "nope"}, true},
      {{"usage", "nope"}, true},
      {{"usage", "send", "--top", "0"}, false},
      {{"usage", "send", "--owner", ""}, false},
      {{"sql", "consume", "nope"}, true},
      {{"sql", "undo"}, false},
      {{"gc", "extra"}, false},
      {{"gc", "--batch", "0"}, false},
      {{"gc", "--batch", "abc"}, false},
      {{"sql", "consume", "a b"}, false},
      {{"frobnicate"}, false},
      {{"limit", "frobnicate"}, false},
      {{}, false},
      {{"limit"}, false},
      {{"consume"}, false},
      {{"consume", "send"}, false},
      {{"consume", "send", "u1", "extra"}, false},
      {{"consume", "send", "u1", "--cost"}, false},
      {{"consume", "send", "u1", "--bogus"}, false},
      {{"sql"}, false},
      {{"usage"}, false},
      {{"status", "--now", "abc"}, false},
      {{"status", "--now", "-1"}, false},
      {{"status", "--db", ""}, false},
  };

  Fixture f;
  f.prepare();
  f.ctl({"consume", "send", "u1", "--cost", "2"});
  f.ctl({"consume", "send", "u1"});  // denied: the denied counter is state too
  const std::string before = dump(f.db);
  const std::string bytes = read_file(f.db);
  const std::string garbage_path = f.dir.file("garbage.db");
  const std::string garbage = random_bytes(4096);
  write_bytes(garbage_path, garbage);
  const std::string missing_path = f.dir.file("missing.db");

  for (const Case& c : cases) {
    std::string shown;
    for (const std::string& arg : c.args) shown += (arg.size() > 70 ? "<long>" : arg) + " ";
    INFO("quotactl " << shown);
    const QuotactlRun outcome = f.ctl(c.args);
    CHECK(outcome.status == 2);
    CHECK(outcome.one_error_line());
    CHECK(outcome.out.empty());
    if (c.needs_database) continue;
    // Checked before the database is opened: the same answer whatever the file.
    for (const std::string& path : {garbage_path, missing_path}) {
      std::vector<std::string> args = c.args;
      args.insert(args.end(), {"--db", path});
      if (c.args == std::vector<std::string>{"status", "--db", ""}) continue;
      const QuotactlRun elsewhere = run_quotactl(args);
      CHECK(elsewhere.status == 2);
      CHECK(elsewhere.one_error_line());
    }
  }
  CHECK(dump(f.db) == before);
  CHECK(read_file(f.db) == bytes);
  CHECK(read_file(garbage_path) == garbage);
  CHECK_FALSE(std::filesystem::exists(missing_path));
}

TEST_CASE("quotactl refuses unusable files with exit 3 and leaves them as they were",
          "[quotactl]") {
  Fixture f;
  const std::vector<std::vector<std::string>> commands{
      {"consume", "send", "u1"},
      {"check", "send", "u1"},
      {"record", "send", "u1"},
      {"reset", "send", "u1"},
      {"limit", "list"},
      {"limit", "get", "send"},
      {"limit", "rm", "send"},
      {"usage", "send"},
      {"sql", "consume", "send"},
      {"limit", "set", "send", "--max", "1", "--per", "1s"},
      {"gc"}};

  SECTION("a missing file is not created") {
    for (const auto& args : commands) {
      INFO(args[0]);
      const QuotactlRun outcome = f.ctl(args);
      CHECK(outcome.status == 3);
      CHECK(outcome.one_error_line());
      CHECK(outcome.err.find("quotactl migrate") != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(f.db));
    }
  }
  SECTION("a file of random bytes is not changed, not even by migrate") {
    const std::string garbage = random_bytes(8192);
    write_bytes(f.db, garbage);
    auto all = commands;
    all.insert(all.end(), {{"migrate"}, {"migrate", "--dry-run"}, {"status"}});
    for (const auto& args : all) {
      INFO(args[0]);
      const QuotactlRun outcome = f.ctl(args);
      CHECK(outcome.status == 3);
      CHECK(outcome.one_error_line());
      CHECK(outcome.err.find("not a SQLite database") != std::string::npos);
    }
    CHECK(read_file(f.db) == garbage);
  }
  SECTION("a directory") {
    std::filesystem::create_directory(f.db);
    auto all = commands;
    all.insert(all.end(), {{"migrate"}, {"status"}});
    for (const auto& args : all) {
      INFO(args[0]);
      const QuotactlRun outcome = f.ctl(args);
      CHECK(outcome.status == 3);
      CHECK(outcome.one_error_line());
      CHECK(outcome.err.find("directory") != std::string::npos);
    }
    CHECK(std::filesystem::is_empty(f.db));
  }
  SECTION("an unmigrated database names quotactl migrate and is not changed") {
    make_application_database(f.db);
    const std::string bytes = read_file(f.db);
    for (const auto& args : commands) {
      INFO(args[0]);
      const QuotactlRun outcome = f.ctl(args);
      CHECK(outcome.status == 3);
      CHECK(outcome.one_error_line());
      CHECK(outcome.err.find("quotactl migrate") != std::string::npos);
    }
    CHECK(read_file(f.db) == bytes);
    CHECK(f.ok({"status"})["schema_version"] == 0);
  }
  SECTION("an empty file is an unmigrated database and stays empty") {
    write_bytes(f.db, "");
    CHECK(f.ctl({"consume", "send", "u1"}).status == 3);
    CHECK(read_file(f.db).empty());
  }
  SECTION("a database behind the build (a migration missing) is refused") {
    f.prepare();
    RawDb(f.db).exec("DELETE FROM quota_migrations");
    const std::string before = dump(f.db);
    const QuotactlRun outcome = f.ctl({"consume", "send", "u1"});
    CHECK(outcome.status == 3);
    CHECK(outcome.err.find("quotactl migrate") != std::string::npos);
    CHECK(dump(f.db) == before);
  }
}

// --- the real binary ----------------------------------------------------------------------

namespace {

struct Shell {
  int status = -1;
  std::string out;
};

// Runs `command` with /bin/sh, capturing stdout (stderr goes to stdout with 2>&1 when asked).
Shell shell(const std::string& command) {
  Shell result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) result.out += buffer;
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

TEST_CASE("quotactl binary: exit statuses, QUOTA_DB and the error line", "[quotactl][binary]") {
  TempDir dir;
  const std::string binary = QUOTACTL_PATH;
  const std::string env = "QUOTA_DB=" + dir.file("env.db") + " ";
  const json migrated = json::parse(shell(env + binary + " migrate --json").out);
  CHECK(migrated == json{{"applied", every_version()},
                         {"schema_version", quota::detail::latest_version(
                                                quota::detail::built_in_sqlite_migrations())}});
  CHECK(shell(env + binary + " limit set send --max 1 --per 1h").status == 0);
  CHECK(shell(env + binary + " consume send u1 --now " + std::to_string(kStart)).status == 0);
  const Shell denied = shell(env + binary + " consume send u1 --now " + std::to_string(kStart));
  CHECK(denied.status == 1);
  CHECK(denied.out.rfind("denied   send/u1: 0 of 1 left, retry in 1h (at", 0) == 0);
  CHECK(denied.out.find('\x1b') == std::string::npos);  // stdout is a pipe: no colour

  const Shell bad = shell(env + binary + " consume send u1 --cost 0 2>&1");
  CHECK(bad.status == 2);
  CHECK(bad.out.rfind("quotactl: error: ", 0) == 0);
  CHECK(shell(binary + " --db " + dir.file("missing.db") + " status 2>/dev/null").status == 3);
  CHECK(shell(binary + " --version").out == std::string("quotactl ") + quota::kVersion + "\n");
}

TEST_CASE("quotactl binary: ./quota.db is the default database", "[quotactl][binary]") {
  TempDir dir;
  const std::string in_dir = "cd " + dir.path().string() + " && env -u QUOTA_DB " + QUOTACTL_PATH;
  CHECK(shell(in_dir + " migrate >/dev/null").status == 0);
  CHECK(std::filesystem::exists(dir.path() / "quota.db"));
  CHECK(shell(in_dir + " status --json").out.find("\"path\":\"./quota.db\"") != std::string::npos);
}

namespace {

// Runs the built binary with its stdout on a pseudo-terminal, so that its own isatty() says
// "terminal", with NO_COLOR and QUOTA_DB removed from the environment and `environment`
// added. The terminal turns each "\n" into "\r\n"; the output comes back with "\n" again.
Shell on_terminal(const std::vector<std::string>& args,
                  const std::vector<std::string>& environment = {}) {
  std::vector<std::string> words{QUOTACTL_PATH};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<std::string> variables = environment;
  for (char** variable = environ; *variable; ++variable) {
    const std::string_view text(*variable);
    if (!text.starts_with("NO_COLOR=") && !text.starts_with("QUOTA_DB=")) {
      variables.emplace_back(text);
    }
  }
  const quota::test::TerminalRun run = quota::test::run_on_terminal(words, variables);
  Shell result{run.status, run.out};
  for (std::size_t at; (at = result.out.find("\r\n")) != std::string::npos;) {
    result.out.replace(at, 2, "\n");
  }
  return result;
}

}  // namespace

TEST_CASE("quotactl binary on a terminal: colour unless NO_COLOR or --json", "[quotactl][binary]") {
  Fixture f;
  f.prepare();  // send: 3 per minute, u1 has used 1
  const std::vector<std::string> consume{"--db",    f.db,   "--now", std::to_string(kStart),
                                         "consume", "send", "u2"};

  const Shell coloured = on_terminal(consume);
  CHECK(coloured.status == 0);
  CHECK(coloured.out == "\x1b[32mallowed \x1b[0m send/u2: 2 of 3 left, resets in 1m\n");

  const Shell plain = on_terminal(consume, {"NO_COLOR=1"});
  CHECK(plain.status == 0);
  CHECK(plain.out == "allowed  send/u2: 1 of 3 left, resets in 1m\n");

  std::vector<std::string> as_json = consume;
  as_json.insert(as_json.end(), {"--json", "--cost", "2"});
  const Shell document = on_terminal(as_json);
  CHECK(document.status == 1);  // 2 + 2 of 3
  CHECK(document.out.find('\x1b') == std::string::npos);
  CHECK(json::parse(document.out)["reason"] == "rate_limited");

  // gc's progress bar is drawn on the terminal too (and erased before the count).
  const Shell gc = on_terminal(
      {"--db", f.db, "--now", std::to_string(kStart + 3'600'000), "gc", "--batch", "1"});
  CHECK(gc.status == 0);
  CHECK(gc.out.find("\rgc [") != std::string::npos);
  CHECK(gc.out.find("deleted 3 rows of state") != std::string::npos);  // u2 was denied: kept
}

// --- values -------------------------------------------------------------------------------

TEST_CASE("quotactl durations: parsed strictly, shown in human units", "[quotactl]") {
  using std::chrono::milliseconds;
  CHECK(quotactl::parse_duration("500ms", "--per") == milliseconds(500));
  CHECK(quotactl::parse_duration("30s", "--per") == milliseconds(30'000));
  CHECK(quotactl::parse_duration("1m", "--per") == milliseconds(60'000));
  CHECK(quotactl::parse_duration("1h", "--per") == milliseconds(3'600'000));
  CHECK(quotactl::parse_duration("366d", "--per") == quota::kPeriodBound);
  for (const char* bad :
       {"0s", "-1m", "1.5m", "10y", "abc", "", "m", "1", "1 m", "+1m", "1M", "367d", "8785h",
        "9999999999999999999s", "366366366366d", "999999999999h"}) {
    INFO(bad);
    CHECK_THROWS_AS(quotactl::parse_duration(bad, "--per"), quota::Error);
  }

  CHECK(quotactl::format_period(milliseconds(90'000)) == "90s");
  CHECK(quotactl::format_period(milliseconds(86'400'000)) == "1d");
  CHECK(quotactl::format_period(milliseconds(1'500)) == "1500ms");

  CHECK(quotactl::format_duration(0) == "0ms");
  CHECK(quotactl::format_duration(999) == "999ms");
  CHECK(quotactl::format_duration(1'234) == "1.234s");
  CHECK(quotactl::format_duration(59'900) == "59.9s");
  CHECK(quotactl::format_duration(90'000) == "1m 30s");
  CHECK(quotactl::format_duration(7'500'000) == "2h 5m");
  CHECK(quotactl::format_duration(86'400'001) == "1d 0.001s");

  CHECK(quotactl::format_time(kStart) == "2023-11-14T22:13:20.000Z");
  CHECK(quotactl::format_time(0) == "1970-01-01T00:00:00.000Z");

  CHECK(quotactl::parse_whole("42", "--cost", 1, 100) == 42);
  for (const char* bad :
       {"0", "-1", "1.5", "abc", "", "-", "101", " 1", "1e2", "0x10", "99999999999999999999999"}) {
    INFO(bad);
    CHECK_THROWS_AS(quotactl::parse_whole(bad, "--cost", 1, 100), quota::Error);
  }
  CHECK(quotactl::printable("a\nb") == "a\\x0ab");
}

TEST_CASE("quotactl override set, list and rm", "[quotactl][policy]") {
  Fixture f;
  f.prepare();
  CHECK(f.ok({"override", "set", "send", "vip", "--max", "6"}) == json{{"limit", "send"},
                                                                       {"owner", "vip"},
                                                                       {"policy", "maximum"},
                                                                       {"maximum", 6},
                                                                       {"burst", nullptr},
                                                                       {"anchor_ms", nullptr}});
  f.ok({"override", "set", "*", "root", "--exempt"});
  f.ok({"override", "set", "daily", "spammer", "--deny"});
  const json all = f.ok({"override", "list"});
  REQUIRE(all.size() == 3);
  CHECK(all[0]["limit"] == "*");
  CHECK(all[0]["policy"] == "exempt");
  CHECK(f.ok({"override", "list", "send"}).size() == 1);

  // The overrides decide: vip gets 6, root is never limited, spammer never allowed.
  for (int i = 0; i < 6; ++i) CHECK(f.ok({"consume", "send", "vip"})["allowed"] == true);
  CHECK(f.ctl({"consume", "send", "vip"}).status == 1);
  for (int i = 0; i < 5; ++i) CHECK(f.ok({"consume", "send", "root"})["remaining"] == 3);
  const QuotactlRun spammer = f.ctl({"consume", "daily", "spammer", "--json"});
  CHECK(spammer.status == 1);
  CHECK(spammer.document()["reason"] == "owner_denied");
  CHECK(spammer.document()["retry_after_ms"] == -1);
  const QuotactlRun line = f.ctl({"consume", "daily", "spammer"});
  CHECK(line.out.find("(owner_denied), never allowed") != std::string::npos);

  const QuotactlRun table = f.ctl({"override", "list"});
  CHECK(table.out.find("send   vip      maximum 6") != std::string::npos);

  // The readable line counts out of the owner's own capacity, not the limit's 3.
  f.ok({"override", "set", "send", "gold", "--max", "100"});
  CHECK(f.ctl({"consume", "send", "gold"}).out.find(": 99 of 100 left") != std::string::npos);
  CHECK(f.ctl({"consume", "send", "gold", "--cost", "101"}).out.find("the capacity of 100") !=
        std::string::npos);
  CHECK(f.ctl({"check", "send", "plain"}).out.find(": 3 of 3 left") != std::string::npos);
  f.ok({"override", "rm", "send", "gold"});

  CHECK(f.ok({"override", "rm", "send", "vip"}) ==
        json{{"removed",
              {{"limit", "send"}, {"owner", "vip"}, {"override", true}, {"anchor", false}}}});
  CHECK(f.ctl({"override", "rm", "send", "vip"}).status == 2);
  CHECK(f.ok({"override", "list", "send"}) == json::array());
}

TEST_CASE("quotactl override refuses bad input with exit 2 and changes nothing",
          "[quotactl][policy]") {
  Fixture f;
  f.prepare();
  const std::string before = dump(f.db);
  const std::vector<std::vector<std::string>> cases = {
      {"override", "set", "send", "u"},                                // no policy
      {"override", "set", "send", "u", "--max", "3", "--exempt"},      // two policies
      {"override", "set", "send", "u", "--exempt", "--deny"},          // two policies
      {"override", "set", "send", "u", "--burst", "3"},                // burst without max
      {"override", "set", "send", "u", "--max", "0"},                  // out of range
      {"override", "set", "send", "u", "--max", "3", "--burst", "4"},  // burst on a log
      {"override", "set", "nope", "u", "--max", "3"},                  // unknown limit
      {"override", "set", "bad name", "u", "--deny"},                  // invalid name
      {"override", "set", "send", "", "--deny"},                       // empty owner
      {"override", "rm", "send", "nobody"},                            // no such override
      {"override", "list", "bad name"},
      {"consume", "send,send", "u"},    // a limit twice
      {"consume", "send,,daily", "u"},  // an empty name
      {"consume", "send,nope", "u"},    // unknown limit
      {"usage", "send", "--by", "cost"},
      {"limit", "set", "send", "--max", "3", "--per", "1m", "--shadow", "--enforce"},
  };
  for (const auto& args : cases) {
    std::string shown;
    for (const std::string& arg : args) shown += arg + " ";
    INFO("quotactl " << shown);
    const QuotactlRun outcome = f.ctl(args);
    CHECK(outcome.status == 2);
    CHECK(outcome.one_error_line());
    CHECK(outcome.out.empty());
  }
  CHECK(dump(f.db) == before);
}

TEST_CASE("quotactl consume a,b consumes every limit or none", "[quotactl][policy]") {
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "minute", "--max", "2", "--per", "1m", "--algo", "fixed_window"});
  f.ok({"limit", "set", "hour", "--max", "5", "--per", "1h"});
  const json first = f.ok({"consume", "minute,hour", "u1"});
  CHECK(first["limit"] == "minute");
  CHECK(first["limits"] == json::array({"minute", "hour"}));
  CHECK(first["remaining"] == 1);
  f.ok({"consume", "minute,hour", "u1"});
  const QuotactlRun denied = f.ctl({"consume", "hour,minute", "u1", "--json"});
  CHECK(denied.status == 1);
  CHECK(denied.document()["limit"] == "minute");
  CHECK(denied.document()["denied"] == 1);
  // Nothing was recorded on hour: 3 of 5 left.
  CHECK(f.ok({"check", "hour", "u1"})["remaining"] == 3);
  const QuotactlRun line = f.ctl({"consume", "hour,minute", "u1"});
  CHECK(line.out.find("[decided by minute of 2 limits]") != std::string::npos);
}

TEST_CASE("quotactl refund, shadow mode and usage --by denied", "[quotactl][policy]") {
  Fixture f;
  f.prepare();  // send: 3 per minute, u1 consumed 1
  f.ok({"consume", "send", "u1", "--cost", "2"});
  const json refunded = f.ok({"refund", "send", "u1", "--cost", "2"});
  CHECK(refunded == f.ok({"check", "send", "u1"}));
  CHECK(refunded["remaining"] == 2);
  CHECK(f.ctl({"refund", "send", "u1", "--cost", "9"}).status == 0);
  CHECK(f.ctl({"refund", "send", "u1"}).out.rfind("refunded send/u1: 3 of 3 left", 0) == 0);

  // sql refund prints the statement the CLI ran: the same answer from a plain connection.
  f.ok({"consume", "send", "u2", "--cost", "3"});
  const std::string statement = statement_of(f.ctl({"sql", "refund", "send"}).out);
  RawDb raw(f.db);
  const json by_sql = run_raw(raw, statement, "send", "u2", 1, kStart);
  CHECK(by_sql["remaining"] == 1);
  CHECK(by_sql == f.ok({"check", "send", "u2"}));

  // Shadow mode: exit 0 and shadow_denied; kept by a plain `limit set`; --enforce ends it.
  CHECK(f.ok({"limit", "set", "send", "--max", "3", "--per", "1m", "--shadow"})["shadow"] == true);
  f.ok({"consume", "send", "u3", "--cost", "3"});
  const QuotactlRun shadow = f.ctl({"consume", "send", "u3", "--json"});
  CHECK(shadow.status == 0);
  CHECK(shadow.document()["allowed"] == true);
  CHECK(shadow.document()["shadow_denied"] == true);
  CHECK(shadow.document()["reason"] == "rate_limited");
  CHECK(f.ctl({"consume", "send", "u3"}).out.find("shadow mode: enforcing would deny") !=
        std::string::npos);
  CHECK(f.ok({"limit", "set", "send", "--max", "3", "--per", "1m"})["shadow"] == true);
  CHECK(f.ok({"limit", "get", "send"})["shadow"] == true);
  const json usage = f.ok({"usage", "send", "--owner", "u3"});
  REQUIRE(usage.size() == 1);
  CHECK(usage[0]["shadow_denied"] == 2);
  CHECK(usage[0]["denied"] == 0);
  CHECK(f.ok({"limit", "set", "send", "--max", "3", "--per", "1m", "--enforce"})["shadow"] ==
        false);
  CHECK(f.ctl({"consume", "send", "u3"}).status == 1);

  // usage --by denied: the most denied first, whatever their usage.
  for (int i = 0; i < 3; ++i) f.ctl({"consume", "send", "u2"});
  const json by_denied = f.ok({"usage", "send", "--by", "denied", "--top", "2"});
  REQUIRE(by_denied.size() == 2);
  CHECK(by_denied[0]["owner"] == "u2");
  CHECK(by_denied[0]["denied"] == 2);  // one unit was refunded by plain SQL above
  CHECK(by_denied[1]["owner"] == "u3");
}

TEST_CASE("quotactl: every command naming an unknown limit answers exit 2 and one message",
          "[quotactl]") {
  // Regression: `override list NOSUCH` printed [] and exited 0, `override rm NOSUCH x` said "no
  // override", and the operations' message named the library's Engine::define.
  Fixture f;
  f.prepare();  // send (sliding_log), daily (fixed_window)
  const std::string before = dump(f.db);
  const std::string message =
      "quotactl: error: unknown limit 'NOSUCH': `quotactl limit list` shows the limits there "
      "are; `quotactl limit set NAME --max N --per DURATION` defines one\n";
  const std::vector<std::vector<std::string>> commands{
      {"limit", "get", "NOSUCH"},
      {"limit", "rm", "NOSUCH"},
      {"consume", "NOSUCH", "u1"},
      {"consume", "NOSUCH", "u1", "--cost", "2"},
      {"consume", "send,NOSUCH", "u1"},
      {"consume", "NOSUCH,daily", "u1"},
      {"check", "NOSUCH", "u1"},
      {"record", "NOSUCH", "u1"},
      {"reset", "NOSUCH", "u1"},
      {"refund", "NOSUCH", "u1"},
      {"usage", "NOSUCH"},
      {"usage", "NOSUCH", "--by", "denied", "--top", "3"},
      {"override", "set", "NOSUCH", "u1", "--max", "5"},
      {"override", "set", "NOSUCH", "u1", "--exempt"},
      {"override", "set", "NOSUCH", "u1", "--deny"},
      {"override", "rm", "NOSUCH", "u1"},
      {"override", "list", "NOSUCH"},
      {"sql", "consume", "NOSUCH"},
      {"sql", "check", "NOSUCH"},
      {"sql", "record", "NOSUCH"},
      {"sql", "reset", "NOSUCH"},
      {"sql", "refund", "NOSUCH"},
  };
  for (const std::vector<std::string>& args : commands) {
    for (const bool json_output : {false, true}) {
      std::vector<std::string> line = args;
      if (json_output) line.push_back("--json");
      std::string shown;
      for (const std::string& arg : line) shown += arg + " ";
      INFO("quotactl " << shown);
      const QuotactlRun outcome = f.ctl(line);
      CHECK(outcome.status == 2);
      CHECK(outcome.err == message);
      CHECK((json_output ? json::parse(outcome.out)["error"]["code"] == "unknown_limit"
                         : outcome.out.empty()));
    }
  }
  CHECK(dump(f.db) == before);

  // '*' is every limit for overrides, not an unknown limit.
  CHECK(f.ok({"override", "list", "*"}) == json::array());
  f.ok({"override", "set", "*", "root", "--exempt"});
  CHECK(f.ok({"override", "list", "*"}).size() == 1);
  f.ok({"override", "rm", "*", "root"});
  // A known limit (or '*') without the override still says there is no override.
  for (const std::string limit : {"send", "*"}) {
    const QuotactlRun none = f.ctl({"override", "rm", limit, "nobody"});
    CHECK(none.status == 2);
    CHECK(none.one_error_line());
    CHECK(none.err.find("no override for owner 'nobody'") != std::string::npos);
  }
}

TEST_CASE("quotactl usage counts each owner out of its own capacity", "[quotactl][policy]") {
  // Regression: with `override set log u42 --max 20` and one consume, the usage table showed
  // 1/6 and a bar scaled to 6 while check said 19 of 20, and the JSON rows had no capacity.
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "log", "--max", "6", "--per", "1m"});
  f.ok({"override", "set", "log", "u42", "--max", "20"});
  f.ok({"consume", "log", "u42"});
  f.ok({"consume", "log", "u1"});
  CHECK(f.ok({"check", "log", "u42"})["remaining"] == 19);

  const json rows = f.ok({"usage", "log"});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["owner"] == "u1");
  CHECK(rows[0]["capacity"] == 6);
  CHECK(rows[0]["remaining"] == 5);
  CHECK(rows[1]["owner"] == "u42");
  CHECK(rows[1]["capacity"] == 20);
  CHECK(rows[1]["remaining"] == 19);

  const QuotactlRun table = f.ctl({"usage", "log"});
  CHECK(table.status == 0);
  INFO(table.out);
  // 1 of 20 fills 1 of the bar's 20 characters; 1 of 6 fills 4 (rounded up).
  CHECK(table.out.find("u42    #...................  1/20       0  1m") != std::string::npos);
  CHECK(table.out.find("u1     ####................   1/6       0  1m") != std::string::npos);

  // A token bucket's capacity is its burst, or the override's.
  f.ok({"limit", "set", "tb", "--max", "5", "--per", "1m", "--algo", "token_bucket", "--burst",
        "10"});
  f.ok({"override", "set", "tb", "vip", "--max", "50", "--burst", "100"});
  f.ok({"consume", "tb", "vip", "--cost", "50"});
  f.ok({"consume", "tb", "plain", "--cost", "5"});
  const json buckets = f.ok({"usage", "tb"});
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0]["owner"] == "vip");
  CHECK(buckets[0]["capacity"] == 100);
  CHECK(buckets[1]["capacity"] == 10);
  const QuotactlRun bucket_table = f.ctl({"usage", "tb"});
  CHECK(bucket_table.out.find("##########..........  50/100") != std::string::npos);
  CHECK(bucket_table.out.find("##########..........    5/10") != std::string::npos);
}

TEST_CASE("quotactl usage --by shadow_denied ranks whom shadow mode would have stopped",
          "[quotactl][policy]") {
  // Regression: `usage --by shadow_denied` was refused, so shadow mode's would-be denials could
  // not be ranked.
  Fixture f;
  f.ok({"migrate"});
  f.ok({"limit", "set", "send", "--max", "3", "--per", "1m", "--shadow"});
  f.ok({"consume", "send", "big", "--cost", "3"});  // the most used, never over
  f.ok({"consume", "send", "x"});
  f.ok({"consume", "send", "x", "--cost", "3"});  // would be denied once
  f.ok({"consume", "send", "y"});
  for (int i = 0; i < 2; ++i) f.ok({"consume", "send", "y", "--cost", "3"});  // twice

  const auto owners = [](const json& rows) {
    std::vector<std::string> names;
    for (const json& row : rows) names.push_back(row["owner"]);
    return names;
  };
  const json by_shadow = f.ok({"usage", "send", "--by", "shadow_denied"});
  CHECK(owners(by_shadow) == std::vector<std::string>{"y", "x", "big"});
  CHECK(by_shadow[0]["shadow_denied"] == 2);
  CHECK(by_shadow[1]["shadow_denied"] == 1);
  CHECK(by_shadow[2]["shadow_denied"] == 0);
  CHECK(owners(f.ok({"usage", "send"})) == std::vector<std::string>{"big", "x", "y"});
  CHECK(owners(f.ok({"usage", "send", "--by", "shadow_denied", "--top", "1"})) ==
        std::vector<std::string>{"y"});

  const QuotactlRun table = f.ctl({"usage", "send", "--by", "shadow_denied"});
  CHECK(table.status == 0);
  CHECK(table.out.find("SHADOW DENIED") != std::string::npos);
  CHECK(table.out.find("y ") < table.out.find("x "));
  CHECK(table.out.find("x ") < table.out.find("big "));
  CHECK(run_quotactl({"help", "usage"}).out.find("shadow_denied") != std::string::npos);
}

TEST_CASE("quotactl suggests the command, option or value a typo most likely meant", "[quotactl]") {
  // Regression: a mistyped command or option (`comsume`, `--cots`) got no suggestion.
  Fixture f;
  f.prepare();
  const std::string before = dump(f.db);
  struct Case {
    std::vector<std::string> args;
    std::string error;  // the whole error line
  };
  const std::vector<Case> cases{
      {{"comsume", "send", "u1"},
       "unknown command 'comsume' (did you mean 'consume'?): use one of migrate, status, limit, "
       "consume, check, record, reset, refund, lease, usage, watch, override, apply, gc, sql, "
       "help; run "
       "`quotactl --help`"},
      {{"limt", "get", "send"}, "unknown command 'limt' (did you mean 'limit'?)"},
      {{"limit", "sett", "send"},
       "unknown command 'limit sett' (did you mean 'limit set'?): use one of set, get, list, rm; "
       "run `quotactl help limit`"},
      {{"limit", "st"}, "unknown command 'limit st' (did you mean 'limit set'?)"},
      {{"override", "lst"}, "unknown command 'override lst' (did you mean 'override list'?)"},
      {{"consume", "send", "u1", "--cots", "3"},
       "consume: unknown option '--cots' (did you mean '--cost'?): run `quotactl help consume` "
       "for the options"},
      {{"consume", "send", "u1", "--cots=3"},
       "consume: unknown option '--cots' (did you mean "
       "'--cost'?)"},
      {{"check", "send", "u1", "--jsn"}, "check: unknown option '--jsn' (did you mean '--json'?)"},
      {{"--jsn", "check", "send", "u1"}, "check: unknown option '--jsn' (did you mean '--json'?)"},
      {{"status", "--bd", "x.db"}, "status: unknown option '--bd' (did you mean '--db'?)"},
      {{"limit", "set", "x", "--mx", "3", "--per", "1m"},
       "limit set: unknown option '--mx' (did you mean '--max'?): run `quotactl help limit set` "
       "for the options"},
      {{"limit", "set", "x", "--max", "3", "--per", "1m", "--shaddow"},
       "limit set: unknown option '--shaddow' (did you mean '--shadow'?)"},
      {{"usage", "send", "--by", "denid"},
       "unknown order 'denid' for --by (did you mean 'denied'?): use used, denied, "
       "shadow_denied or blocked"},
      {{"usage", "send", "--by", "shadow-denied"},
       "unknown order 'shadow-denied' for --by (did you mean 'shadow_denied'?)"},
      {{"sql", "consme"}, "unknown operation 'consme' (did you mean 'consume'?)"},
      {{"help", "comsume"},
       "unknown command 'comsume' (did you mean 'consume'?): run `quotactl --help` for the list"},
      {{"help", "limit", "sett"},
       "unknown command 'limit sett' (did you mean 'limit set'?): run `quotactl help limit` for "
       "the list"},
      // Nothing close: no suggestion, the list or the help to read.
      {{"frobnicate"}, "unknown command 'frobnicate': use one of migrate"},
      {{"consume", "send", "u1", "--bogus"},
       "consume: unknown option '--bogus': run `quotactl help consume` for the options"},
      {{"consume", "send", "u1", "-x"}, "consume: unknown option '-x': run"},
      {{"usage", "send", "--by", "cost"}, "unknown order 'cost' for --by: use used"},
  };
  for (const Case& c : cases) {
    std::string shown;
    for (const std::string& arg : c.args) shown += arg + " ";
    INFO("quotactl " << shown);
    const QuotactlRun outcome = f.ctl(c.args);
    INFO(outcome.err);
    CHECK(outcome.status == 2);
    CHECK(outcome.one_error_line());
    CHECK(outcome.out.empty());
    CHECK(outcome.err.rfind("quotactl: error: " + c.error, 0) == 0);
  }
  CHECK(dump(f.db) == before);
}

TEST_CASE("quotactl likely_meant: the closest candidates within a typo's distance", "[quotactl]") {
  using quotactl::did_you_mean;
  using quotactl::likely_meant;
  using V = std::vector<std::string>;
  const V commands{"set", "get", "list", "rm"};
  CHECK(likely_meant("sett", commands) == V{"set"});
  CHECK(likely_meant("st", commands) == V{"set"});
  CHECK(likely_meant("et", commands) == V{"set", "get"});  // a tie: both
  CHECK(likely_meant("lsit", commands) == V{"list"});      // a swap counts 1
  CHECK(likely_meant("x", commands).empty());              // one letter: anything is 1 away
  CHECK(likely_meant("rmm", commands) == V{"rm"});
  CHECK(likely_meant("sxyz", commands).empty());
  CHECK(likely_meant("set", commands).empty());  // no typo
  CHECK(likely_meant("--cots", {"--cost", "--json", "--db", "-h"}) == V{"--cost"});
  CHECK(likely_meant("-x", {"-h", "--db"}).empty());
  CHECK(likely_meant("comsume", {"consume", "check"}) == V{"consume"});
  CHECK(likely_meant("cnsme", {"consume"}) == V{"consume"});  // 2 edits in a long word
  CHECK(likely_meant("cnme", {"consume"}).empty());           // 3 edits
  CHECK(likely_meant(std::string(100'000, 'a'), commands).empty());
  CHECK(likely_meant("", commands).empty());
  CHECK(did_you_mean("sett", commands, "limit ") == " (did you mean 'limit set'?)");
  CHECK(did_you_mean("et", commands) == " (did you mean 'set' or 'get'?)");
  CHECK(did_you_mean("ab", {"abc", "abd", "abe"}) == " (did you mean 'abc', 'abd' or 'abe'?)");
  CHECK(did_you_mean("zzzz", commands).empty());
}
