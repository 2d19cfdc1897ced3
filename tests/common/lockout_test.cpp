// Lockouts, waiting and one owner across every limit (docs/concepts.md): a limit's block
// after a denial on every algorithm and backend, through the library, the plain statements,
// the quota_usage view and quotactl; Engine::acquire with the real clock (the wait, the
// deadline, several threads on one Engine, cancellation); Engine::owner_usage(owner); and the
// migration that adds the columns, upgrading a database in place. The reference-model runs
// with blocks are in policy_test.cpp and property_test.cpp.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "migrations.h"
#include "quota/policy.h"
#include "statements.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

using detail::Operation;
using std::chrono::milliseconds;

constexpr std::int64_t T = 1'700'000'000'000;

Limit blocking(Algorithm algorithm, std::int64_t block_ms, std::int64_t maximum = 2,
               std::int64_t period_ms = 1000) {
  Limit limit = make_limit("login", algorithm, maximum, period_ms);
  if (algorithm == Algorithm::token_bucket) limit.burst = maximum;
  limit.block = milliseconds(block_ms);
  return limit;
}

TEST_CASE("a rate_limited denial blocks the owner until t + block, on every algorithm",
          "[lockout]") {
  const Backend backend = each_backend();
  const Algorithm algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                       Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(backend), to_string(algorithm));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(blocking(algorithm, 5000));

  CHECK(f.engine.consume("login", "u").allowed);
  CHECK(f.engine.consume("login", "u").allowed);
  f.clock.set(T + 10);
  const Result denial = f.engine.consume("login", "u");
  CHECK(denial.reason == Reason::rate_limited);  // the denial itself says why
  CHECK(denial.retry_after_ms > 0);
  CHECK(denial.denied == 1);

  // Blocked from T + 10 to T + 5010: check and consume say so, to the millisecond.
  f.clock.set(T + 20);
  Result check = f.engine.check("login", "u");
  CHECK_FALSE(check.allowed);
  CHECK(check.reason == Reason::blocked);
  CHECK(check.remaining == 0);
  CHECK(check.retry_after_ms == 4990);
  f.clock.set(T + 30);
  const Result blocked = f.engine.consume("login", "u");
  CHECK(blocked.reason == Reason::blocked);
  CHECK(blocked.retry_after_ms == 4980);
  CHECK(blocked.denied == 2);
  // ...which neither recorded nor extended the block.
  f.clock.set(T + 40);
  CHECK(f.engine.check("login", "u").retry_after_ms == 4970);
  Usage usage = f.engine.owner_usage("login", "u");
  CHECK(usage.blocked_until_ms == T + 5010);
  CHECK(usage.remaining == 0);
  CHECK(usage.used == 2);
  const std::vector<Usage> locked_out = f.engine.usage("login", 0, UsageOrder::blocked);
  REQUIRE(locked_out.size() == 1);
  CHECK(locked_out[0].owner == "u");

  // A record still records, and answers blocked; the plain statement answers the same.
  const Result recorded = f.engine.record("login", "u");
  CHECK(recorded.reason == Reason::blocked);
  CHECK(recorded.retry_after_ms == 4970);
  CHECK(f.engine.owner_usage("login", "u").used == 3);
  CHECK(f.raw.run(Operation::check, algorithm, "login", "u", 1, T + 50).retry_after_ms == 4960);

  // The last millisecond of the block, then its end: the owner answers as the algorithm does.
  f.clock.set(T + 5009);
  CHECK(f.engine.check("login", "u").reason == Reason::blocked);
  CHECK(f.engine.check("login", "u").retry_after_ms == 1);
  f.clock.set(T + 5010);
  CHECK(f.engine.check("login", "u").allowed);
  CHECK_FALSE(f.engine.owner_usage("login", "u").blocked_until_ms);
  CHECK(f.engine.usage("login", 0, UsageOrder::blocked).empty());

  // reset lifts a block at once.
  while (f.engine.consume("login", "u").allowed) {
  }
  CHECK(f.engine.check("login", "u").reason == Reason::blocked);
  CHECK(f.engine.reset("login", "u").allowed);
  CHECK(f.engine.check("login", "u").allowed);
  CHECK(f.engine.consume("login", "u").allowed);
}

TEST_CASE("shadow mode never blocks, and a limit without a block ignores old blocks", "[lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  Limit limit = blocking(Algorithm::fixed_window, 60'000, 1, 1000);
  limit.shadow = true;
  f.engine.define(limit);
  CHECK(f.engine.consume("login", "u").allowed);
  const Result would_deny = f.engine.consume("login", "u");
  CHECK(would_deny.allowed);
  CHECK(would_deny.shadow_denied);
  CHECK(would_deny.reason == Reason::rate_limited);
  f.clock.set(T + 1000);
  CHECK(f.engine.consume("login", "u").allowed);  // a new window, and no block
  CHECK_FALSE(f.engine.owner_usage("login", "u").blocked_until_ms);

  // Enforcing: the denial blocks; redefined without a block, the limit ignores it.
  limit.shadow = false;
  f.engine.define(limit);
  CHECK(f.engine.consume("login", "u").reason == Reason::rate_limited);
  CHECK(f.engine.check("login", "u").reason == Reason::blocked);
  limit.block.reset();
  f.engine.define(limit);
  f.clock.set(T + 2000);
  CHECK(f.engine.check("login", "u").allowed);
  CHECK_FALSE(f.engine.owner_usage("login", "u").blocked_until_ms);
}

TEST_CASE("an override's owner: exempt is never blocked, deny is owner_denied", "[lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(blocking(Algorithm::sliding_log, 60'000, 1, 1000));
  f.engine.set_override({"login", "vip", Policy::exempt});
  f.engine.set_override({"login", "bad", Policy::deny});
  for (int i = 0; i < 3; ++i) CHECK(f.engine.consume("login", "vip").allowed);
  const Result denied = f.engine.consume("login", "bad");
  CHECK(denied.reason == Reason::owner_denied);
  CHECK(denied.retry_after_ms == -1);
  CHECK_FALSE(f.engine.owner_usage("login", "bad").blocked_until_ms);
}

TEST_CASE("consume_all blocks only on the deciding limit; a refund leaves the block", "[lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  Limit short_block = blocking(Algorithm::fixed_window, 100, 1, 1000);
  short_block.name = "short";
  Limit long_block = blocking(Algorithm::fixed_window, 60'000, 1, 60'000);
  long_block.name = "long";
  f.engine.define(short_block);
  f.engine.define(long_block);
  CHECK(f.engine.consume_all({"short", "long"}, "u").result.allowed);
  const Decision decision = f.engine.consume_all({"short", "long"}, "u");
  CHECK(decision.limit == "long");  // the longest wait decides
  CHECK(decision.result.reason == Reason::rate_limited);
  CHECK(f.engine.owner_usage("long", "u").blocked_until_ms == T + 60'000);
  CHECK_FALSE(f.engine.owner_usage("short", "u").blocked_until_ms);
  const Result refunded = f.engine.refund("long", "u", 1);
  CHECK(refunded.reason == Reason::blocked);
  CHECK(f.engine.owner_usage("long", "u").used == 0);
  CHECK(f.engine.owner_usage("long", "u").blocked_until_ms == T + 60'000);
}

TEST_CASE("quota_usage shows blocked_until_ms while the block holds", "[lockout][sql]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  // The view takes the database's own time, so the engine runs on the real clock here.
  const std::int64_t now = system_clock_ms();
  f.clock.set(now);
  f.engine.define(blocking(Algorithm::sliding_window, 3'600'000, 1, 60'000));
  f.engine.consume("login", "u");
  f.engine.consume("login", "u");
  f.engine.consume("login", "other");
  const auto rows =
      f.database.rows("SELECT owner, remaining, blocked_until_ms FROM quota_usage ORDER BY owner");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == std::vector<std::string>{"other", "0", "NULL"});
  CHECK(rows[1] == std::vector<std::string>{"u", "0", std::to_string(now + 3'600'000)});
}

TEST_CASE("a block outside 1 ms to 366 days is refused and changes nothing", "[lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.engine.define(make_limit("login"));
  const std::string before = f.database.dump();
  for (const std::int64_t block_ms : {std::int64_t{0}, std::int64_t{-1}, kPeriodBound.count() + 1,
                                      std::int64_t{367} * 24 * 60 * 60 * 1000}) {
    CAPTURE(block_ms);
    Limit limit = blocking(Algorithm::sliding_log, block_ms);
    CHECK_THROWS_MATCHES(f.engine.define(limit), Error,
                         Catch::Predicate<Error>([](const Error& error) {
                           return error.code() == ErrorCode::invalid_argument &&
                                  std::string(error.what()).find("366 days") != std::string::npos;
                         }));
  }
  CHECK(f.database.dump() == before);
}

QuotactlRun quotactl_on(const TestDatabase& db, std::vector<std::string> args) {
  args.insert(args.begin(), {"--db", db.location()});
  return run_quotactl(args);
}

TEST_CASE("quotactl refuses bad --block, --wait and usage options with exit 2, changing nothing",
          "[lockout][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  REQUIRE(quotactl_on(db, {"migrate"}).status == 0);
  REQUIRE(quotactl_on(db, {"limit", "set", "login", "--max", "2", "--per", "1m", "--block", "1h"})
              .status == 0);
  const std::string before = db.dump();
  const std::vector<std::vector<std::string>> refused = {
      {"limit", "set", "login", "--max", "2", "--per", "1m", "--block", "0ms"},
      {"limit", "set", "login", "--max", "2", "--per", "1m", "--block", "367d"},
      {"limit", "set", "login", "--max", "2", "--per", "1m", "--block", "soon"},
      {"limit", "set", "login", "--max", "2", "--per", "1m", "--block", "1h", "--no-block"},
      {"--now", "1700000000000", "consume", "login", "u", "--wait", "1s"},
      {"consume", "login", "u", "--wait", "0s"},
      {"consume", "login", "u", "--wait", "367d"},
      {"consume", "login,other", "u", "--wait", "1s"},
      {"check", "login", "u", "--wait", "1s"},
      {"usage", "login", "--by", "blocks"},
      {"usage"},
      {"usage", "--owner", "u", "--top", "3"},
  };
  for (const auto& args : refused) {
    CAPTURE(args);
    const QuotactlRun run = quotactl_on(db, args);
    CHECK(run.status == 2);
    CHECK(run.err.rfind("quotactl: error: ", 0) == 0);
  }
  CHECK(db.dump() == before);
}

TEST_CASE("quotactl: --block, usage --by blocked and usage --owner across limits",
          "[lockout][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  const auto at = [&](std::int64_t ms, std::vector<std::string> args) {
    args.insert(args.begin(), {"--now", std::to_string(T + ms), "--json"});
    const QuotactlRun run = quotactl_on(db, args);
    INFO(run.err);
    REQUIRE((run.status == 0 || run.status == 1));
    return std::make_pair(run.status, nlohmann::json::parse(run.out));
  };
  REQUIRE(quotactl_on(db, {"migrate"}).status == 0);
  CHECK(at(0, {"limit", "set", "login", "--max", "1", "--per", "15m", "--algo", "fixed_window",
               "--block", "1h"})
            .second["block_ms"] == 3'600'000);
  // Without --block or --no-block, the limit keeps its block.
  CHECK(at(0, {"limit", "set", "login", "--max", "2", "--per", "15m"}).second["block_ms"] ==
        3'600'000);
  at(0, {"limit", "set", "api", "--max", "10", "--per", "1m"});
  at(0, {"limit", "set", "untouched", "--max", "10", "--per", "1m"});
  at(0, {"consume", "api", "alice"});
  at(1, {"consume", "login", "alice"});
  at(2, {"consume", "login", "alice"});
  const auto denial = at(3, {"consume", "login", "alice"});
  CHECK(denial.first == 1);
  CHECK(denial.second["reason"] == "rate_limited");
  const auto blocked = at(4, {"check", "login", "alice"});
  CHECK(blocked.first == 1);
  CHECK(blocked.second["reason"] == "blocked");
  CHECK(blocked.second["retry_after_ms"] == 3'600'000 - 1);

  const auto locked_out = at(5, {"usage", "login", "--by", "blocked"}).second;
  REQUIRE(locked_out.size() == 1);
  CHECK(locked_out[0]["owner"] == "alice");
  CHECK(locked_out[0]["blocked_until_ms"] == T + 3 + 3'600'000);

  const auto alice = at(6, {"usage", "--owner", "alice"}).second;
  REQUIRE(alice.size() == 2);  // not "untouched", where alice has nothing
  CHECK(alice[0]["limit"] == "api");
  CHECK(alice[0]["used"] == 1);
  CHECK(alice[0]["blocked_until_ms"].is_null());
  CHECK(alice[1]["limit"] == "login");
  CHECK(alice[1]["denied"] == 1);
  CHECK(alice[1]["blocked_until_ms"] == T + 3 + 3'600'000);

  // The readable table names each limit and how long the block lasts.
  const QuotactlRun table =
      quotactl_on(db, {"--now", std::to_string(T + 6), "usage", "--owner", "alice"});
  CHECK(table.status == 0);
  CHECK_THAT(table.out, Catch::Contains("LIMIT") && Catch::Contains("BLOCKED FOR") &&
                            Catch::Contains("login") && Catch::Contains("api"));

  // --no-block removes the block; the owner's block is ignored from then on.
  CHECK(at(7, {"limit", "set", "login", "--max", "2", "--per", "15m", "--no-block"})
            .second["block_ms"]
            .is_null());
  CHECK(at(8, {"usage", "login", "--by", "blocked"}).second.empty());
}

TEST_CASE("Engine::owner_usage(owner) lists the limits where the owner has state or an override",
          "[lockout][usage]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  for (const char* name : {"a", "b", "c", "d"}) f.engine.define(make_limit(name));
  f.engine.consume("b", "alice", 1);
  f.engine.consume("a", "bob", 1);
  f.engine.set_override({"d", "alice", Policy::maximum, 5});
  std::vector<Usage> rows = f.engine.owner_usage("alice");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].limit == "b");
  CHECK(rows[0].used == 1);
  CHECK(rows[1].limit == "d");
  CHECK(rows[1].used == 0);
  CHECK(rows[1].capacity == 5);
  CHECK(f.engine.owner_usage("nobody").empty());
  // A '*' override covers every limit.
  f.engine.set_override({"*", "alice", Policy::exempt});
  rows = f.engine.owner_usage("alice");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].limit == "a");
  CHECK_THROWS_AS(f.engine.owner_usage(""), Error);
}

// ---------------------------------------------------------------------------------------
// acquire, on the real clock: the bounds are generous (a shared, noisy machine), but each
// proves what it names: a wait of the retry's length and not of the deadline's, no wait past
// a deadline, a cancelled wait ended long before its retry.

using SteadyClock = std::chrono::steady_clock;

std::int64_t elapsed_ms(SteadyClock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - since).count();
}

Engine real_clock_engine(const TestDatabase& db) { return Engine::open(db.location()); }

TEST_CASE("acquire sleeps for the retry, then consumes; a shorter deadline returns at once",
          "[lockout][acquire]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  Engine engine = real_clock_engine(db);
  engine.define(make_bucket("calls", 1, 300, 1));
  REQUIRE(engine.consume("calls", "app").allowed);

  // The deadline is shorter than the retry: the denial comes back without a sleep.
  auto start = SteadyClock::now();
  const Result early = engine.acquire("calls", "app", 1, milliseconds(50));
  CHECK_FALSE(early.allowed);
  CHECK(early.retry_after_ms > 50);
  CHECK(elapsed_ms(start) < 200);  // a sleep would have lasted about 300 ms

  // Long enough: one sleep of the retry, then allowed. `start` precedes the check, so the
  // time to the token is at most the elapsed time (give or take the clock's millisecond).
  start = SteadyClock::now();
  const Result denial = engine.check("calls", "app");
  REQUIRE_FALSE(denial.allowed);
  const Result granted = engine.acquire("calls", "app", 1, milliseconds(5000));
  const std::int64_t waited = elapsed_ms(start);
  CHECK(granted.allowed);
  CHECK(waited >= denial.retry_after_ms - 2);
  CHECK(waited < denial.retry_after_ms + 200);

  // A cost that can never fit returns at once, however long the deadline.
  start = SteadyClock::now();
  CHECK(engine.acquire("calls", "app", 2, milliseconds(5000)).retry_after_ms == -1);
  CHECK(elapsed_ms(start) < 1000);
  CHECK_THROWS_AS(engine.acquire("calls", "app", 1, milliseconds(-1)), Error);
}

TEST_CASE("threads waiting on one Engine each get their turn, and do not hold it while asleep",
          "[lockout][acquire]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  Engine engine = real_clock_engine(db);
  engine.define(make_bucket("calls", 1, 600, 1));  // one call per 600 ms
  engine.define(make_limit("other", Algorithm::sliding_log, 1000, 60'000));
  // Measured from before the first token is taken, so that the elapsed time covers it.
  const auto start = SteadyClock::now();
  REQUIRE(engine.consume("calls", "app").allowed);
  constexpr int kThreads = 3;
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      if (engine.acquire("calls", "app", 1, milliseconds(10'000)).allowed) ++granted;
    });
  }
  // Meanwhile the Engine answers at once: no waiter holds it while it sleeps.
  std::this_thread::sleep_for(milliseconds(50));
  const auto other_start = SteadyClock::now();
  CHECK(engine.consume("other", "app").allowed);
  CHECK(elapsed_ms(other_start) < 400);  // a sleeper holding the Engine would take ~550 ms
  for (auto& thread : threads) thread.join();
  CHECK(granted == kThreads);
  // Three more tokens at one per 600 ms: the last came no sooner than 1800 ms after the first.
  CHECK(elapsed_ms(start) >= 1800 - 5);
}

TEST_CASE("a waiter is cancelled from another thread at once", "[lockout][acquire]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  Engine engine = real_clock_engine(db);
  engine.define(make_bucket("calls", 1, 5000, 1));  // a retry of about 5 s
  REQUIRE(engine.consume("calls", "app").allowed);
  std::stop_source stop;
  Result answer;
  const auto start = SteadyClock::now();
  std::thread waiter(
      [&] { answer = engine.acquire("calls", "app", 1, milliseconds(10'000), stop.get_token()); });
  std::this_thread::sleep_for(milliseconds(50));
  stop.request_stop();
  waiter.join();
  CHECK_FALSE(answer.allowed);
  CHECK(answer.reason == Reason::rate_limited);
  CHECK(elapsed_ms(start) < 2500);  // long before the retry of about 5 s
  // The cancelled wait consumed nothing: one token back in about 5 s, as before.
  CHECK(engine.check("calls", "app").retry_after_ms > 2500);
}

// ---------------------------------------------------------------------------------------

TEST_CASE("the lockout migration upgrades a database in place, keeping every row",
          "[lockout][migrations]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  const auto& built_in = built_in_migrations(backend);
  // Every migration before 0007, as a build before it left the database...
  db.migrate_before(7);
  // ...with an owner at its limit in a fixed window, written with plain SQL (this build's
  // statements are not the previous build's).
  {
    db.exec(
        "INSERT INTO quota_limits (name, algorithm, maximum, period_ms) VALUES "
        "('login', 'fixed_window', 1, 60000)");
    db.exec(
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used, "
        "previous_used, denied, seen_ms) VALUES ('login', 'u', 1, 60000, " +
        std::to_string(T / 60'000) + ", 1, 0, 2, " + std::to_string(T) + ")");
  }
  const auto old_columns =
      "SELECT limit_name, owner, window_key, used, previous_used, denied, seen_ms "
      "FROM quota_windows ORDER BY owner";
  const auto before = db.rows(old_columns);
  ManualClock clock;
  clock.set(T + 10);
  Engine engine = Engine::open(db.location(), options_with(clock));
  CHECK(engine.schema_version() == built_in.back().version);
  CHECK(db.integer("SELECT max(version) FROM quota_migrations") == built_in.back().version);
  CHECK(db.rows(old_columns) == before);
  CHECK(db.rows("SELECT blocked_until_ms FROM quota_windows") ==
        std::vector<std::vector<std::string>>{{"NULL"}});
  CHECK_FALSE(engine.get("login")->block);
  // The owner keeps its usage and denials, and the new columns work at once.
  const Result denied = engine.consume("login", "u");
  CHECK(denied.reason == Reason::rate_limited);
  CHECK(denied.denied == 3);
  Limit limit = *engine.get("login");
  limit.block = milliseconds(1000);
  engine.define(limit);
  CHECK(engine.consume("login", "u").reason == Reason::rate_limited);
  CHECK(engine.check("login", "u").reason == Reason::blocked);
}

}  // namespace
}  // namespace quota::test
