// gc (Engine::gc and `quotactl gc`) on every backend: it deletes what it should, in batches,
// and lets other connections work between them. tests/sqlite/sqlite_gc_test.cpp holds what is about
// SQLite files only: gc inside the application's SQLite transaction, and the property test that
// runs random operations on two files, one of them collected at random moments.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

constexpr std::int64_t kBase = 1'700'000'000'000;  // a multiple of 1000: a 1 s window starts

std::int64_t count(const TestDatabase& database, const std::string& table) {
  return database.integer("SELECT count(*) FROM " + table);
}

// --- what gc deletes ------------------------------------------------------------------------

TEST_CASE("gc: the examples of src/gc.cpp", "[gc][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  const auto at = [&](std::int64_t ms) { clock.set(kBase + ms); };

  at(9400);
  engine.consume("log", "u");
  at(9600);
  engine.consume("log", "u");
  at(9000);
  engine.consume("log", "v");
  engine.consume("log", "w");
  CHECK_FALSE(engine.consume("log", "w", 6).allowed);
  CHECK_FALSE(engine.consume("log", "w", 6).allowed);
  at(9999);
  engine.consume("win", "u", 3);
  at(10000);
  engine.consume("win", "v");

  at(10500);
  CHECK(engine.gc() == 5);
  CHECK(state_keys(database) == std::set<std::string>{
                                    "quota_log|log|u|" + std::to_string(kBase + 9600),
                                    "quota_log_owners|log|u",
                                    "quota_log_owners|log|w",
                                    "quota_windows|win|v",
                                });
  CHECK(engine.check("log", "w").denied == 2);
  CHECK(engine.check("log", "u").remaining == 4);
  CHECK(engine.gc() == 0);
}

TEST_CASE("gc: a calendar window goes once it has ended, and answers stay the same",
          "[gc][calendar][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  // Days at +09:00: 2025-11-26T15:00:00Z is 27 November 00:00 in Tokyo.
  constexpr std::int64_t kMidnight = 1'764'169'200'000;
  engine.define(calendar_limit("daily", 3, Calendar::day, std::chrono::minutes(9 * 60)));
  clock.set(kMidnight - 1000);
  engine.consume("daily", "old", 2);  // counts until kMidnight
  clock.set(kMidnight);
  engine.consume("daily", "new");  // counts until a day later
  clock.set(kMidnight - 2000);
  CHECK_FALSE(engine.consume("daily", "denied", 4).allowed);  // a denial keeps its row

  clock.set(kMidnight + 10);
  const Result new_before = engine.check("daily", "new");
  const Result old_before = engine.check("daily", "old");
  CHECK(old_before.remaining == 3);
  CHECK(engine.gc() == 1);
  CHECK(state_keys(database) ==
        std::set<std::string>{"quota_windows|daily|denied", "quota_windows|daily|new"});
  CHECK(engine.check("daily", "new") == new_before);
  CHECK(engine.check("daily", "old") == old_before);
  CHECK(engine.check("daily", "new").reset_at_ms == kMidnight + 86'400'000);
  CHECK(engine.gc() == 0);
}

TEST_CASE("gc keeps what still counts and deletes what is left over", "[gc][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  ManualClock clock;
  clock.set(kBase);
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));

  SECTION("an event expires exactly period_ms after it: at now - period_ms it goes") {
    engine.consume("log", "u");
    clock.set(kBase + 999);
    CHECK(engine.gc() == 0);
    clock.set(kBase + 1000);
    CHECK(engine.gc() == 2);  // the event, then the owner
  }
  SECTION("a window goes when the next one begins") {
    clock.set(kBase + 999);
    engine.consume("win", "u");
    CHECK(engine.gc() == 0);
    clock.set(kBase + 1000);
    CHECK(engine.gc() == 1);
  }
  SECTION("a row remembering a time after now stays (the clock rule needs it)") {
    database.exec(
        "INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, recorded, "
        "denied, seen_ms) VALUES ('log', 'later', 5, 1000, 0, 0, 0, " +
        std::to_string(kBase + 1) +
        ");"
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used, "
        "previous_used, denied, seen_ms) VALUES ('win', 'later', 5, 1000, 0, 0, 0, 0, " +
        std::to_string(kBase + 1) + ")");
    CHECK(engine.gc() == 0);
    clock.set(kBase + 1);
    CHECK(engine.gc() == 2);
  }
  SECTION("rows of a limit that does not exist, and events without their owner's row") {
    database.exec(
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used, "
        "previous_used, denied, seen_ms) VALUES ('gone', 'u', 5, 1000, 1700000000, 5, 0, 3, "
        "1700000000000);"
        // recorded 0: the row records no event of its own (the trigger that would is not run).
        "INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, recorded, "
        "denied, seen_ms) VALUES ('gone', 'u', 5, 1000, 1, 0, 3, 1700000000000);"
        "INSERT INTO quota_log (limit_name, owner, at_ms, cost, total) VALUES "
        "('gone', 'u', 1700000000000, 1, 1), ('log', 'nobody', 1700000000000, 1, 1)");
    CHECK(engine.gc() == 4);
    CHECK(state_keys(database).empty());
  }
  SECTION("a window written under another period counts in the window that holds seen_ms") {
    // Written under a period of 1 minute, the row's window_key is that minute; under the new
    // period of 1 s it counts in the second that holds seen_ms, which is still now.
    engine.define(make_limit("win", Algorithm::fixed_window, 5, 60'000));
    clock.set(kBase + 10'400);
    engine.consume("win", "u");
    engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
    clock.set(kBase + 10'999);
    CHECK(engine.gc() == 0);
    CHECK(engine.check("win", "u").remaining == 4);
    clock.set(kBase + 11'000);
    CHECK(engine.gc() == 1);
  }
  SECTION("a sliding window's count weighs for two windows") {
    engine.define(make_limit("weighted", Algorithm::sliding_window, 5, 1000));
    clock.set(kBase + 10'400);
    engine.consume("weighted", "u");
    clock.set(kBase + 11'999);  // window 11: u's count is the previous window's, still weighed
    CHECK(engine.gc() == 0);
    CHECK(engine.check("weighted", "u").remaining == 4);
    clock.set(kBase + 12'000);
    CHECK(engine.gc() == 1);
    CHECK(count(database, "quota_windows") == 0);
  }
  SECTION("a token bucket goes when it is full again") {
    Limit bucket = make_limit("bucket", Algorithm::token_bucket, 2, 1000);
    bucket.burst = 3;
    engine.define(bucket);
    clock.set(kBase + 10'000);
    engine.consume("bucket", "u", 3);  // empty; 2 tokens per 1000 ms: full again at +1500
    clock.set(kBase + 11'499);
    CHECK(engine.gc() == 0);
    CHECK(engine.check("bucket", "u").remaining == 2);
    clock.set(kBase + 11'500);
    CHECK(engine.gc() == 1);
    CHECK(count(database, "quota_buckets") == 0);
  }
}

TEST_CASE("gc on an empty database deletes nothing and reports no batch", "[gc][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  Engine engine = Engine::open(database.location());
  int calls = 0;
  CHECK(engine.gc(1000, [&](const GcProgress&) { ++calls; }) == 0);
  CHECK(calls == 0);
  engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  CHECK(engine.gc() == 0);
}

TEST_CASE("gc refuses a batch of 0 rows and a clock before 1970", "[gc][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  CHECK_THROWS_MATCHES(engine.gc(0), Error, Catch::Predicate<Error>([](const Error& error) {
                         return error.code() == ErrorCode::invalid_argument;
                       }));
  clock.set(-1);
  CHECK_THROWS_AS(engine.gc(), Error);
}

// A clock that goes back behind a gc is answered without the deleted state: never more than
// the algorithm allows at the gc's now (here: the event had expired then).
TEST_CASE("gc: an operation dated before the gc is answered as at the gc's now", "[gc][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  ManualClock clock;
  clock.set(kBase);
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 1, 1000));
  engine.consume("log", "u");
  clock.set(kBase + 1000);
  CHECK(engine.check("log", "u").allowed);
  CHECK(engine.gc() == 2);
  clock.set(kBase + 500);
  const Result late = engine.consume("log", "u");
  CHECK(late.allowed);
  CHECK(late.reset_at_ms == kBase + 1500);
}

// --- batches ---------------------------------------------------------------------------------

// A database with `dead` finished windows, `live` current ones and a sliding_log owner with
// `events` events in its first minute, for a gc at kBase + 90 s (kAfterFill): the events of
// its first 30 s have expired then.
constexpr std::int64_t kAfterFill = kBase + 90'000;

void fill(const TestDatabase& database, int dead, int live, int events) {
  ManualClock clock;
  clock.set(kBase);
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  engine.define(make_limit("log", Algorithm::sliding_log, 1'000'000, 60'000));
  for (int i = 0; i < dead; ++i) engine.consume("win", "dead" + std::to_string(i));
  for (int i = 0; i < events; ++i) {
    clock.set(kBase + i * (60'000 / events));
    engine.consume("log", "u");
  }
  clock.set(kAfterFill);
  for (int i = 0; i < live; ++i) engine.consume("win", "live" + std::to_string(i));
}

TEST_CASE("gc works in batches of batch_rows rows, whatever their boundaries", "[slow][gc][backends]") {
  const Backend backend = each_backend();
  const std::size_t batch_rows =
      GENERATE(std::size_t{2}, std::size_t{7}, std::size_t{1000}, std::size_t{2999},
               std::size_t{3000}, std::size_t{3001}, std::size_t{100'000});
  CAPTURE(backend, batch_rows);
  TestDatabase database(backend);
  fill(database, 2500, 500, 1000);
  // Events at 0, 60, ..., 59940, the owner seen at 59940; now = 90000: those <= 30000 have
  // expired (501 of them).
  const std::int64_t expected = 2500 + 501;
  const std::int64_t rows = 2500 + 500 + 1 + 1000;

  ManualClock clock;
  clock.set(kAfterFill);
  Engine engine = Engine::open(database.location(), options_with(clock));
  std::vector<GcProgress> reports;
  const std::int64_t deleted =
      engine.gc(batch_rows, [&](const GcProgress& progress) { reports.push_back(progress); });
  CHECK(deleted == expected);
  REQUIRE_FALSE(reports.empty());
  CHECK(reports.back().deleted == expected);
  CHECK(reports.back().examined == rows);
  CHECK(reports.front().total == rows);
  for (std::size_t i = 1; i < reports.size(); ++i) {
    CHECK(reports[i].examined - reports[i - 1].examined <= std::int64_t(batch_rows));
    CHECK(reports[i].deleted >= reports[i - 1].deleted);
  }
  // One report per batch that examined rows: each table's rows in batches of batch_rows.
  std::size_t batches = 0;
  for (const std::size_t table_rows : {std::size_t{1000}, std::size_t{1}, std::size_t{3000}}) {
    batches += (table_rows + batch_rows - 1) / batch_rows;
  }
  CHECK(reports.size() == batches);
  CHECK(count(database, "quota_windows") == 500);
  CHECK(count(database, "quota_log") == 499);
  CHECK(engine.gc(batch_rows) == 0);
}

TEST_CASE("gc lets other connections and threads write between its batches", "[gc][backends]") {
  const TestDatabase database(each_backend());
  CAPTURE(database.backend());
  fill(database, 50, 0, 0);
  ManualClock clock;
  clock.set(kAfterFill);
  Options impatient = options_with(clock);
  impatient.busy_timeout = std::chrono::milliseconds(0);  // a held lock fails at once
  Engine collector = Engine::open(database.location(), options_with(clock));
  Engine other = Engine::open(database.location(), impatient);
  int writes = 0;
  const std::int64_t deleted = collector.gc(1, [&](const GcProgress&) {
    if (writes == 50) return;  // the rows written here are swept too: stop adding them
    other.consume("win", "other" + std::to_string(writes));
    collector.consume("win", "self" + std::to_string(writes));  // no lock held: no deadlock
    ++writes;
  });
  CHECK(deleted == 50);
  CHECK(writes == 50);
  CHECK(count(database, "quota_windows") == 2 * writes);
}

}  // namespace
}  // namespace quota::test

// --- quotactl gc ---------------------------------------------------------------------------

namespace {

using nlohmann::json;
using quota::test::Backend;
using quota::test::each_backend;
using quota::test::QuotactlRun;
using quota::test::TestDatabase;

struct Database {
  explicit Database(Backend backend) : database(backend) {}
  TestDatabase database;

  QuotactlRun ctl(std::vector<std::string> args, std::int64_t now,
                  const quotactl::Context& context = {}) const {
    return quota::test::run_quotactl_at(database.location(), now, std::move(args), context);
  }
  // The rows of `prepare`: 3 owners of a fixed_window limit at kBase, one of them denied.
  void prepare() {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"migrate"},
             {"limit", "set", "daily", "--max", "1", "--per", "1d", "--algo", "fixed_window"},
             {"consume", "daily", "a"},
             {"consume", "daily", "b"},
             {"consume", "daily", "c"},
             {"consume", "daily", "c"}}) {
      REQUIRE(ctl(args, quota::test::kBase).status <= 1);
    }
  }
};

constexpr std::int64_t kNextDay = quota::test::kBase + 86'400'000;

}  // namespace

TEST_CASE("quotactl gc: JSON and human output, exit 0", "[gc][quotactl][backends]") {
  Database db(each_backend());
  CAPTURE(db.database.backend());
  db.prepare();
  SECTION("JSON: exactly {\"deleted\": N}") {
    const QuotactlRun nothing = db.ctl({"gc", "--json"}, quota::test::kBase);
    CHECK(nothing.status == 0);
    CHECK(nothing.err.empty());
    CHECK(json::parse(nothing.out) == json{{"deleted", 0}});
    const QuotactlRun some = db.ctl({"gc", "--json"}, kNextDay);
    CHECK(some.status == 0);
    CHECK(json::parse(some.out) == json{{"deleted", 2}});  // c has a denial: it stays
    CHECK(db.database.integer("SELECT count(*) FROM quota_windows") == 1);
  }
  SECTION("human: one line with the count") {
    CHECK(db.ctl({"gc"}, quota::test::kBase).out ==
          "nothing to delete (3 rows of state examined)\n");
    const QuotactlRun some = db.ctl({"gc"}, kNextDay);
    CHECK(some.status == 0);
    CHECK(some.out == "deleted 2 rows of state that no longer affected any answer (3 examined)\n");
    CHECK(db.ctl({"reset", "daily", "c"}, kNextDay).status == 0);
    CHECK(db.ctl({"gc"}, kNextDay).out == "nothing to delete (0 rows of state examined)\n");
    CHECK(db.ctl({"consume", "daily", "c"}, kNextDay).status == 0);
    CHECK(db.ctl({"gc"}, kNextDay + 86'400'000).out ==
          "deleted 1 row of state that no longer affected any answer (1 examined)\n");
  }
}

TEST_CASE("quotactl gc: a progress bar on a terminal only, never with --json",
          "[gc][quotactl][backends]") {
  Database db(each_backend());
  CAPTURE(db.database.backend());
  db.prepare();
  const quotactl::Context terminal{"", false, true};
  const quotactl::Context no_color{"", true, true};

  SECTION("on a terminal, with more than one batch: redrawn in place, then erased") {
    for (const auto& context : {terminal, no_color}) {
      const QuotactlRun run = db.ctl({"gc", "--batch", "1"}, kNextDay, context);
      CHECK(run.status == 0);
      CHECK(run.out.find("\rgc [##########....................]  33%  1 deleted") !=
            std::string::npos);
      CHECK(run.out.find("100%  2 deleted") != std::string::npos);
      const std::string last =
          "\rdeleted 2 rows of state that no longer affected any answer (3 examined)\n";
      CHECK(run.out.substr(run.out.size() - last.size()) == last);
      CHECK(run.out.find('\x1b') == std::string::npos);
      db.prepare();  // consume again for the next context (at kBase: a, b come back)
    }
  }
  SECTION("one batch, --json or not a terminal: no bar") {
    CHECK(db.ctl({"gc"}, kNextDay, terminal).out.find('\r') == std::string::npos);
    db.prepare();
    const QuotactlRun json_run = db.ctl({"gc", "--batch", "1", "--json"}, kNextDay, terminal);
    CHECK(json_run.out == "{\"deleted\":2}\n");
    db.prepare();
    CHECK(db.ctl({"gc", "--batch", "1"}, kNextDay).out.find('\r') == std::string::npos);
  }
}

TEST_CASE("quotactl gc: bad arguments are exit 2 and change nothing", "[gc][quotactl][backends]") {
  Database db(each_backend());
  CAPTURE(db.database.backend());
  db.prepare();
  const std::string before = db.database.dump();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"gc", "extra"},
                                               {"gc", "--batch", "0"},
                                               {"gc", "--batch", "-1"},
                                               {"gc", "--batch", "1.5"},
                                               {"gc", "--batch", "abc"},
                                               {"gc", "--batch", "1000001"},
                                               {"gc", "--batch"},
                                               {"gc", "--bogus"}}) {
    INFO(args.back());
    const QuotactlRun run = db.ctl(args, kNextDay);
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    CHECK(run.err.rfind("quotactl: error: ", 0) == 0);
    CHECK(run.err.find('\n') == run.err.size() - 1);
  }
  CHECK(db.database.dump() == before);
}

TEST_CASE("quotactl gc: a missing or unmigrated SQLite file is exit 3 and left alone",
          "[gc][quotactl][sqlite]") {
  Database db(Backend::sqlite);
  const std::string& path = db.database.location();
  const QuotactlRun missing = db.ctl({"gc"}, kNextDay);
  CHECK(missing.status == 3);
  CHECK(missing.err.find("quotactl migrate") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path));

  quota::test::RawDb(path).exec("CREATE TABLE accounts (id INTEGER PRIMARY KEY)");
  const std::string bytes = quota::test::read_file(path);
  const QuotactlRun unmigrated = db.ctl({"gc", "--json"}, kNextDay);
  CHECK(unmigrated.status == 3);
  CHECK(nlohmann::json::parse(unmigrated.out)["error"]["code"] == "not_migrated");
  CHECK(unmigrated.err.find("quotactl migrate") != std::string::npos);
  CHECK(quota::test::read_file(path) == bytes);
}
