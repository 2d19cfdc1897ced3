// The engine through its public API: the worked examples of src/statements.cpp, tight
// retry_after_ms, reset_at, complete first answers, the denied counter, redefinition, one
// statement per operation, the application's transactions, and threads.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>
#include <sqlite3.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;  // a multiple of every period used below

Limit make_limit(const std::string& name, Algorithm algorithm, std::int64_t maximum,
                 std::int64_t period_ms) {
  Limit limit;
  limit.name = name;
  limit.algorithm = algorithm;
  limit.maximum = maximum;
  limit.period = std::chrono::milliseconds(period_ms);
  return limit;
}

Result answer(bool allowed, Reason reason, std::int64_t remaining, std::int64_t retry_after_ms,
              std::int64_t reset_at_ms, std::int64_t denied) {
  return Result{allowed, reason, remaining, retry_after_ms, reset_at_ms, denied};
}

Result ok(std::int64_t remaining, std::int64_t reset_at_ms, std::int64_t denied = 0) {
  return answer(true, Reason::ok, remaining, 0, reset_at_ms, denied);
}

Result limited(std::int64_t remaining, std::int64_t retry_after_ms, std::int64_t reset_at_ms,
               std::int64_t denied) {
  return answer(false, Reason::rate_limited, remaining, retry_after_ms, reset_at_ms, denied);
}

// An engine on a file of its own, with a clock the test moves.
struct Fixture {
  TempDir dir;
  std::string path = dir.file("quota.db");
  ManualClock clock;
  Engine engine = Engine::open(path, options_with(clock));
};

// The statement texts the connection started, without the "-- TRIGGER name" entries that
// SQLITE_TRACE_STMT also reports for the triggers a statement fires.
int trace_statement(unsigned type, void* context, void*, void* text) {
  if (type == SQLITE_TRACE_STMT) {
    const std::string sql = static_cast<const char*>(text);
    if (sql.rfind("--", 0) != 0) static_cast<std::vector<std::string>*>(context)->push_back(sql);
  }
  return 0;
}

// After a denial with wait d at t, the same request is denied at t + d - 1 and allowed at
// t + d, and checking (any number of times) changes nothing in the file.
void require_tight_retry(Fixture& fixture, const std::string& limit, const std::string& owner,
                         std::int64_t cost, std::int64_t t, const Result& denial) {
  REQUIRE_FALSE(denial.allowed);
  REQUIRE(denial.reason == Reason::rate_limited);
  const std::int64_t wait = denial.retry_after_ms;
  REQUIRE(wait > 0);
  const std::string before = dump(fixture.path);

  fixture.clock.set(t + wait - 1);
  const Result almost = fixture.engine.check(limit, owner, cost);
  CHECK_FALSE(almost.allowed);
  CHECK(almost.retry_after_ms == 1);
  CHECK(fixture.engine.check(limit, owner, cost) == almost);

  fixture.clock.set(t + wait);
  const Result then = fixture.engine.check(limit, owner, cost);
  CHECK(then.allowed);
  CHECK(fixture.engine.check(limit, owner, cost) == then);
  CHECK(dump(fixture.path) == before);

  CHECK(fixture.engine.consume(limit, owner, cost).allowed);
}

TEST_CASE("the worked examples of src/statements.cpp", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("send", Algorithm::sliding_log, 2, 1000));
  f.clock.set(5000);
  CHECK(f.engine.consume("send", "u") == ok(1, 6000));
  f.clock.set(5400);
  CHECK(f.engine.consume("send", "u") == ok(0, 6400));
  f.clock.set(5500);
  CHECK(f.engine.consume("send", "u") == limited(0, 500, 6400, 1));
  f.clock.set(6000);
  CHECK(f.engine.check("send", "u") == ok(1, 6400, 1));
  // The clock went back: evaluated at 5500, the latest time the owner's state has seen.
  f.clock.set(4000);
  CHECK(f.engine.consume("send", "u") == limited(0, 500, 6400, 2));
}

TEST_CASE("retry_after_ms is tight: sliding_log, several events must expire", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  f.clock.set(T);
  CHECK(f.engine.consume("log", "u", 2) == ok(3, T + 1000));
  f.clock.set(T + 100);
  CHECK(f.engine.consume("log", "u", 2) == ok(1, T + 1100));
  f.clock.set(T + 200);
  CHECK(f.engine.consume("log", "u", 1) == ok(0, T + 1200));
  f.clock.set(T + 300);
  // 3 units must go: the events at T (2) and T + 100 (2) expire at T + 1100.
  const Result denial = f.engine.consume("log", "u", 3);
  CHECK(denial == limited(0, 800, T + 1200, 1));
  require_tight_retry(f, "log", "u", 3, T + 300, denial);
}

TEST_CASE("retry_after_ms is tight: sliding_log, one unit, events in one millisecond", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 3, 50));
  f.clock.set(T + 7);
  f.engine.consume("log", "u");
  f.engine.consume("log", "u");
  f.clock.set(T + 20);
  f.engine.consume("log", "u");
  const Result denial = f.engine.consume("log", "u");
  CHECK(denial == limited(0, 37, T + 70, 1));
  require_tight_retry(f, "log", "u", 1, T + 20, denial);
}

TEST_CASE("retry_after_ms is tight: fixed_window waits for the next window", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("win", Algorithm::fixed_window, 3, 1000));
  f.clock.set(T + 250);
  CHECK(f.engine.consume("win", "u", 3) == ok(0, T + 1000));
  const Result denial = f.engine.consume("win", "u");
  CHECK(denial == limited(0, 750, T + 1000, 1));
  require_tight_retry(f, "win", "u", 1, T + 250, denial);
}

TEST_CASE("retry_after_ms is tight after a record overdraws", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 3, 100));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 3, 100));
  f.clock.set(T);
  CHECK(f.engine.record("log", "u", 2) == ok(1, T + 100));
  CHECK(f.engine.record("win", "u", 2) == ok(1, T + 100));
  f.clock.set(T + 10);
  // Usage 4 > 3; a consume of 2 needs usage <= 1: both events must expire.
  const Result log = f.engine.record("log", "u", 2);
  CHECK(log == limited(0, 100, T + 110, 0));
  const Result win = f.engine.record("win", "u", 2);
  CHECK(win == limited(0, 90, T + 100, 0));
  require_tight_retry(f, "log", "u", 2, T + 10, log);
  require_tight_retry(f, "win", "u", 2, T + 10, win);
}

TEST_CASE("retry_after_ms is relative to the owner's remembered time", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("win", Algorithm::fixed_window, 1, 1000));
  f.clock.set(T + 600);
  f.engine.consume("win", "u");
  f.clock.set(T + 100);  // backwards: evaluated at T + 600
  const Result denial = f.engine.consume("win", "u");
  CHECK(denial == limited(0, 400, T + 1000, 1));
  require_tight_retry(f, "win", "u", 1, T + 600, denial);
}

TEST_CASE("reset_at_ms follows SPEC §3", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));

  SECTION("sliding_log: the newest counted event's time + period, else now") {
    f.clock.set(T);
    f.engine.consume("log", "u");
    f.clock.set(T + 500);
    f.engine.consume("log", "u");
    f.clock.set(T + 600);
    CHECK(f.engine.check("log", "u").reset_at_ms == T + 1500);
    f.clock.set(T + 1200);  // the first event has expired; the newest still counts
    CHECK(f.engine.check("log", "u") == ok(4, T + 1500));
    f.clock.set(T + 1499);
    CHECK(f.engine.check("log", "u") == ok(4, T + 1500));
    f.clock.set(T + 1500);  // nothing used
    CHECK(f.engine.check("log", "u") == ok(5, T + 1500));
    f.clock.set(T + 1600);
    CHECK(f.engine.check("log", "u") == ok(5, T + 1600));
  }

  SECTION("fixed_window: the end of the current window, else now") {
    f.clock.set(T + 250);
    CHECK(f.engine.consume("win", "u") == ok(4, T + 1000));
    f.clock.set(T + 999);
    CHECK(f.engine.check("win", "u") == ok(4, T + 1000));
    f.clock.set(T + 1000);
    CHECK(f.engine.check("win", "u") == ok(5, T + 1000));
    f.clock.set(T + 1001);
    CHECK(f.engine.check("win", "u") == ok(5, T + 1001));
    CHECK(f.engine.consume("win", "u") == ok(4, T + 2000));
  }

  SECTION("an owner without state") {
    f.clock.set(T + 123);
    CHECK(f.engine.check("log", "nobody") == ok(5, T + 123));
    CHECK(f.engine.check("win", "nobody") == ok(5, T + 123));
  }
}

TEST_CASE("the first operation of a new owner returns complete figures", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 3, 1000));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 3, 1000));
  f.clock.set(T + 250);

  CHECK(f.engine.consume("log", "a", 2) == ok(1, T + 1250));
  CHECK(f.engine.consume("win", "a", 2) == ok(1, T + 1000));
  CHECK(f.engine.record("log", "b", 4) ==
        answer(false, Reason::cost_exceeds_capacity, 0, -1, T + 1250, 0));
  CHECK(f.engine.record("win", "b", 3) == ok(0, T + 1000));
  // Denied at once: nothing is used, so usage is back to zero now.
  const Result never = answer(false, Reason::cost_exceeds_capacity, 3, -1, T + 250, 1);
  CHECK(f.engine.consume("log", "c", 4) == never);
  CHECK(f.engine.consume("win", "c", 4) == never);

  RawDb raw(f.path);
  CHECK(raw.integer("SELECT count(*) FROM quota_log_owners WHERE last_reset_at_ms IS NULL OR "
                    "last_reset_at_ms = 0") == 0);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows WHERE last_reset_at_ms IS NULL OR "
                    "last_reset_at_ms = 0") == 0);
}

TEST_CASE("the denied counter counts denied consumes until a reset", "[engine]") {
  Fixture f;
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window);
  CAPTURE(to_string(algorithm));
  f.engine.define(make_limit("l", algorithm, 1, 1000));
  f.clock.set(T);
  CHECK(f.engine.consume("l", "u").denied == 0);
  CHECK(f.engine.consume("l", "u").denied == 1);
  CHECK(f.engine.consume("l", "u").denied == 2);
  CHECK(f.engine.check("l", "u").denied == 2);  // check never counts
  CHECK(f.engine.check("l", "u").denied == 2);
  CHECK(f.engine.record("l", "u").denied == 2);  // neither does record, even beyond the limit
  const Result never = f.engine.consume("l", "u", 2);
  CHECK(never.reason == Reason::cost_exceeds_capacity);
  CHECK(never.denied == 3);                           // a cost that can never fit still counts
  CHECK(f.engine.consume("l", "other").denied == 0);  // per owner

  const auto usage = f.engine.usage("l");
  REQUIRE(usage.size() == 2);
  CHECK(usage[0].owner == "u");
  CHECK(usage[0].denied == 3);

  CHECK(f.engine.reset("l", "u") == ok(1, T, 0));
  CHECK(f.engine.check("l", "u").denied == 0);
  CHECK(f.engine.consume("l", "u").denied == 0);
  CHECK(f.engine.consume("l", "u").denied == 1);
  // Time passing does not forget denials.
  f.clock.set(T + 5000);
  CHECK(f.engine.check("l", "u") == ok(1, T + 5000, 1));
}

TEST_CASE("reset forgets usage, denials and the remembered time", "[engine]") {
  Fixture f;
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window);
  CAPTURE(to_string(algorithm));
  f.engine.define(make_limit("l", algorithm, 2, 1000));
  f.clock.set(T + 900);
  f.engine.consume("l", "u", 2);
  f.engine.consume("l", "u");
  f.clock.set(T + 100);  // earlier than the remembered T + 900
  CHECK(f.engine.reset("l", "u") == ok(2, T + 100));
  // Evaluated at the request's own time again: nothing remembered.
  CHECK(f.engine.consume("l", "u") ==
        ok(1, algorithm == Algorithm::sliding_log ? T + 1100 : T + 1000));
  RawDb raw(f.path);
  CHECK(raw.integer("SELECT count(*) FROM quota_resets") == 0);
}

TEST_CASE("redefining a limit: same algorithm keeps state, another discards it", "[engine]") {
  Fixture f;
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window);
  const Algorithm other =
      algorithm == Algorithm::sliding_log ? Algorithm::fixed_window : Algorithm::sliding_log;
  CAPTURE(to_string(algorithm));
  f.engine.define(make_limit("l", algorithm, 2, 1000));
  f.clock.set(T);
  f.engine.consume("l", "u", 2);
  f.engine.consume("l", "u");
  CHECK(f.engine.check("l", "u") == limited(0, 1000, T + 1000, 1));

  // More allowed: the usage and the denials stay, the new maximum applies.
  f.engine.define(make_limit("l", algorithm, 5, 1000));
  CHECK(f.engine.check("l", "u") == ok(3, T + 1000, 1));
  // Fewer allowed than already used.
  f.engine.define(make_limit("l", algorithm, 1, 1000));
  CHECK(f.engine.consume("l", "u") == limited(0, 1000, T + 1000, 2));

  // Another algorithm: nothing of the old state is left.
  f.engine.define(make_limit("l", other, 2, 1000));
  CHECK(f.engine.check("l", "u") == ok(2, T, 0));
  CHECK(f.engine.usage("l").empty());
  RawDb raw(f.path);
  CHECK(raw.integer("SELECT count(*) FROM quota_log") == 0);
  CHECK(raw.integer("SELECT count(*) FROM quota_log_owners") == 0);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 0);
}

TEST_CASE("removing a limit removes its state and only its state", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 1, 1000));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 1, 1000));
  f.engine.define(make_limit("kept", Algorithm::sliding_log, 1, 1000));
  f.clock.set(T);
  for (const char* name : {"log", "win", "kept"}) {
    f.engine.consume(name, "u");
    f.engine.consume(name, "u");
  }
  CHECK(f.engine.remove("log"));
  CHECK(f.engine.remove("win"));
  CHECK_FALSE(f.engine.remove("win"));
  RawDb raw(f.path);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 0);
  CHECK(raw.rows("SELECT DISTINCT limit_name FROM quota_log") ==
        std::vector<std::vector<std::string>>{{"kept"}});
  CHECK(raw.rows("SELECT DISTINCT limit_name FROM quota_log_owners") ==
        std::vector<std::vector<std::string>>{{"kept"}});
  CHECK(f.engine.check("kept", "u") == limited(0, 1000, T + 1000, 1));

  // Defined again, the limit starts from nothing.
  f.engine.define(make_limit("log", Algorithm::sliding_log, 1, 1000));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 1, 1000));
  CHECK(f.engine.check("log", "u") == ok(1, T));
  CHECK(f.engine.check("win", "u") == ok(1, T));
}

TEST_CASE("a fixed window whose period changes keeps counting its usage", "[engine]") {
  // Regression: a longer period left the owner's row at an old window key larger than every
  // new key; that row stayed "newest", each consume counted against an empty window, and
  // every request was allowed (5 of 5 with maximum 2).
  Fixture f;
  f.engine.define(make_limit("win", Algorithm::fixed_window, 2, 10));
  f.clock.set(T + 5005);
  CHECK(f.engine.consume("win", "u") == ok(1, T + 5010));

  // Longer windows: the consume at T + 5005 lies in the new window [T + 5000, T + 6000).
  f.engine.define(make_limit("win", Algorithm::fixed_window, 2, 1000));
  CHECK(f.engine.check("win", "u") == ok(1, T + 6000));
  CHECK(f.engine.consume("win", "u") == ok(0, T + 6000));
  const Result denial = f.engine.consume("win", "u");
  CHECK(denial == limited(0, 995, T + 6000, 1));
  require_tight_retry(f, "win", "u", 1, T + 5005, denial);
  RawDb raw(f.path);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 1);

  // Shorter windows: usage counts in the short window of its latest moment, then expires.
  // require_tight_retry consumed 1 at T + 6000; one more fills the window.
  CHECK(f.engine.consume("win", "u") == ok(0, T + 7000, 1));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 2, 10));
  CHECK(f.engine.check("win", "u") == limited(0, 10, T + 6010, 1));
  f.clock.set(T + 6010);
  CHECK(f.engine.consume("win", "u") == ok(1, T + 6020, 1));
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 1);
}

TEST_CASE("a sliding log whose period changes counts its events under the new period", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 2, 100));
  f.clock.set(T);
  f.engine.consume("log", "u", 2);
  f.clock.set(T + 50);
  f.engine.define(make_limit("log", Algorithm::sliding_log, 2, 1000));
  f.clock.set(T + 500);
  CHECK(f.engine.consume("log", "u") == limited(0, 500, T + 1000, 1));
  f.engine.define(make_limit("log", Algorithm::sliding_log, 2, 100));
  CHECK(f.engine.consume("log", "u") == ok(1, T + 600, 1));
}

TEST_CASE("the unknown limit is an error for every operation", "[engine]") {
  Fixture f;
  const std::string before = dump(f.path);
  auto expect_unknown = [](auto&& operation) {
    try {
      operation();
      FAIL("no error");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::unknown_limit);
      CHECK_THAT(error.what(),
                 Catch::Contains("unknown limit 'nope'") && Catch::Contains("define it first"));
    }
  };
  expect_unknown([&] { f.engine.check("nope", "u"); });
  expect_unknown([&] { f.engine.consume("nope", "u"); });
  expect_unknown([&] { f.engine.record("nope", "u"); });
  expect_unknown([&] { f.engine.reset("nope", "u"); });
  expect_unknown([&] { f.engine.usage("nope"); });
  CHECK_FALSE(f.engine.get("nope"));
  CHECK_FALSE(f.engine.remove("nope"));
  CHECK(dump(f.path) == before);
}

TEST_CASE("a consume, check, record or reset is one statement", "[engine]") {
  TempDir dir;
  ManualClock clock;
  SQLite::Database db(dir.file("app.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  Engine engine(db, options_with(clock));
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window);
  CAPTURE(to_string(algorithm));
  engine.define(make_limit("l", algorithm, 2, 1000));
  engine.consume("l", "warm-up");

  std::vector<std::string> started;
  sqlite3_trace_v2(db.getHandle(), SQLITE_TRACE_STMT, trace_statement, &started);
  auto expect_one = [&](detail::Operation operation, auto&& run) {
    started.clear();
    run();
    REQUIRE(started.size() == 1);
    CHECK(started[0] == detail::statement(operation, algorithm));
  };
  using detail::Operation;
  expect_one(Operation::consume, [&] { CHECK(engine.consume("l", "u").allowed); });  // new owner
  expect_one(Operation::consume, [&] { CHECK(engine.consume("l", "u").allowed); });
  expect_one(Operation::consume, [&] { CHECK_FALSE(engine.consume("l", "u").allowed); });
  expect_one(Operation::check, [&] { CHECK_FALSE(engine.check("l", "u").allowed); });
  expect_one(Operation::record, [&] { CHECK_FALSE(engine.record("l", "u").allowed); });
  expect_one(Operation::reset, [&] { CHECK(engine.reset("l", "u").allowed); });
  clock.advance(5000);
  expect_one(Operation::consume, [&] { CHECK(engine.consume("l", "u", 2).allowed); });
  sqlite3_trace_v2(db.getHandle(), 0, nullptr, nullptr);
}

TEST_CASE("a consume inside the application's transaction commits or rolls back with it",
          "[engine]") {
  TempDir dir;
  ManualClock clock;
  SQLite::Database db(dir.file("app.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)");
  Engine engine(db, options_with(clock));
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window);
  CAPTURE(to_string(algorithm));
  engine.define(make_limit("send", algorithm, 1, 60'000));
  clock.set(T);

  {
    SQLite::Transaction transaction(db);
    db.exec("INSERT INTO messages (body) VALUES ('rolled back')");
    CHECK(engine.consume("send", "u").allowed);
    CHECK_FALSE(engine.consume("send", "u").allowed);
    // No commit: the destructor rolls back the message, the usage and the denial.
  }
  CHECK(db.execAndGet("SELECT count(*) FROM messages").getInt() == 0);
  CHECK(engine.check("send", "u") == ok(1, T));

  {
    SQLite::Transaction transaction(db);
    db.exec("INSERT INTO messages (body) VALUES ('sent')");
    CHECK(engine.consume("send", "u").allowed);
    transaction.commit();
  }
  CHECK(db.execAndGet("SELECT count(*) FROM messages").getInt() == 1);
  CHECK(engine.check("send", "u").remaining == 0);
}

TEST_CASE("threads sharing engines never over-admit or lose a record", "[engine]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  clock.set(T + 1);
  Engine first = Engine::open(path, options_with(clock));
  Engine second = Engine::open(path, options_with(clock));
  first.define(make_limit("log", Algorithm::sliding_log, 37, 86'400'000));
  first.define(make_limit("win", Algorithm::fixed_window, 37, 86'400'000));

  constexpr int kThreads = 4;
  constexpr int kEach = 40;
  std::atomic<int> allowed_log{0}, allowed_win{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    Engine& engine = i % 2 == 0 ? first : second;  // two threads per Engine, two Engines
    threads.emplace_back([&engine, &allowed_log, &allowed_win] {
      for (int k = 0; k < kEach; ++k) {
        if (engine.consume("log", "u").allowed) ++allowed_log;
        if (engine.consume("win", "u").allowed) ++allowed_win;
        engine.record("log", "r");
        engine.record("win", "r");
      }
    });
  }
  for (auto& thread : threads) thread.join();

  CHECK(allowed_log == 37);
  CHECK(allowed_win == 37);
  for (const char* name : {"log", "win"}) {
    const auto usage = first.usage(name);
    REQUIRE(usage.size() == 2);
    CHECK(usage[0].owner == "r");
    CHECK(usage[0].used == kThreads * kEach);
    CHECK(usage[1].owner == "u");
    CHECK(usage[1].used == 37);
    CHECK(usage[1].denied == kThreads * kEach - 37);
  }
}

}  // namespace
}  // namespace quota::test
