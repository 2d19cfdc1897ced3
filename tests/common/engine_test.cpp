// The engine through its public API, on every backend: the worked examples of
// src/statements.cpp, tight retry_after_ms and reset_at for all four algorithms, complete first
// answers, the denied counter, redefinition, and a long run of token-bucket requests at a
// fractional rate. What needs SQLite's own connection (one statement per operation, prepared
// once, the application's transactions, engines sharing a file) is in
// tests/sqlite/sqlite_engine_test.cpp.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "model.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;  // a multiple of every period used below
constexpr std::int64_t T60 = T - 20;           // ... but of 60 ms: this is

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

// An engine on a database of its own, with a clock the test moves. A test with a Fixture runs
// once per backend: on a SQLite file, and on a schema of its own in the PostgreSQL test server.
struct Fixture {
  Backend backend = each_backend();
  TestDatabase database{backend};
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
};

// After a denial with wait d at t, the same request is denied at t + d - 1 and allowed at
// t + d, and checking (any number of times) changes nothing in the file.
void require_tight_retry(Fixture& fixture, const std::string& limit, const std::string& owner,
                         std::int64_t cost, std::int64_t t, const Result& denial) {
  REQUIRE_FALSE(denial.allowed);
  REQUIRE(denial.reason == Reason::rate_limited);
  const std::int64_t wait = denial.retry_after_ms;
  REQUIRE(wait > 0);
  const std::string before = fixture.database.dump();

  fixture.clock.set(t + wait - 1);
  const Result almost = fixture.engine.check(limit, owner, cost);
  CHECK_FALSE(almost.allowed);
  CHECK(almost.retry_after_ms == 1);
  CHECK(fixture.engine.check(limit, owner, cost) == almost);

  fixture.clock.set(t + wait);
  const Result then = fixture.engine.check(limit, owner, cost);
  CHECK(then.allowed);
  CHECK(fixture.engine.check(limit, owner, cost) == then);
  CHECK(fixture.database.dump() == before);

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
  // The clock went back: evaluated at 5500, the latest time the owner's state has seen, and
  // the wait told from 4000, the caller's time: 500 + 1500.
  f.clock.set(4000);
  CHECK(f.engine.consume("send", "u") == limited(0, 2000, 6400, 2));
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

TEST_CASE("retry_after_ms is measured from the caller's time, behind the remembered one",
          "[engine]") {
  Fixture f;
  f.engine.define(make_limit("win", Algorithm::fixed_window, 1, 1000));
  f.clock.set(T + 600);
  f.engine.consume("win", "u");
  f.clock.set(T + 100);  // backwards: evaluated at T + 600, the wait told from T + 100
  const Result denial = f.engine.consume("win", "u");
  CHECK(denial == limited(0, 900, T + 1000, 1));
  require_tight_retry(f, "win", "u", 1, T + 100, denial);
}

TEST_CASE("retry_after_ms is tight: sliding_window, wherever the wait ends", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 10, 1000));

  SECTION("inside the current window, as the previous window's weight fades") {
    f.clock.set(T - 500);
    CHECK(f.engine.consume("sw", "u", 10) == ok(0, T + 1000));
    f.clock.set(T + 50);
    // 10 * 950 / 1000 = 9.5 in use; one more unit fits once 10 * (1000 - e) <= 9000: e = 100.
    const Result denial = f.engine.consume("sw", "u");
    CHECK(denial == limited(0, 50, T + 1000, 1));
    CHECK(f.engine.usage("sw").at(0).used == 10);  // 9.5 rounded up
    require_tight_retry(f, "sw", "u", 1, T + 50, denial);
  }

  SECTION("exactly when the next window begins") {
    f.clock.set(T - 990);
    CHECK(f.engine.consume("sw", "u", 4) == ok(6, T + 1000));
    f.clock.set(T);
    CHECK(f.engine.consume("sw", "u", 6) == ok(0, T + 2000));  // 6 + 4 * 1000 / 1000 = 10
    f.clock.set(T + 300);
    // 6 + 4 * 0.7 = 8.8 in use: 4 more fit only once the 6 weigh no more than 6, at T + 1000.
    const Result denial = f.engine.consume("sw", "u", 4);
    CHECK(denial == limited(1, 700, T + 2000, 1));
    require_tight_retry(f, "sw", "u", 4, T + 300, denial);
  }

  SECTION("inside the next window") {
    f.clock.set(T + 200);
    CHECK(f.engine.consume("sw", "u", 10) == ok(0, T + 2000));
    // At T + 1000 the 10 become the previous window's: one fits once 10 * (1000 - e) <= 9000.
    const Result denial = f.engine.consume("sw", "u");
    CHECK(denial == limited(0, 900, T + 2000, 1));
    require_tight_retry(f, "sw", "u", 1, T + 200, denial);
  }

  SECTION("two windows later: the whole capacity needs both windows empty") {
    f.clock.set(T + 300);
    CHECK(f.engine.consume("sw", "u") == ok(9, T + 2000));
    // 1 * 1 / 1000 still weighs at T + 1999: 10 units fit only at T + 2000.
    const Result denial = f.engine.consume("sw", "u", 10);
    CHECK(denial == limited(9, 1700, T + 2000, 1));
    require_tight_retry(f, "sw", "u", 10, T + 300, denial);
  }

  SECTION("7 per 60 ms, overdrawn by a record") {
    f.engine.define(make_limit("sw", Algorithm::sliding_window, 7, 60));
    f.clock.set(T60 + 13);
    CHECK(f.engine.record("sw", "u", 5) == ok(2, T60 + 120));
    // 9 in use: 4 more fit in the next window once 9 * (60 - e) <= 180, e = 40.
    const Result over = f.engine.record("sw", "u", 4);
    CHECK(over == limited(0, 87, T60 + 120, 0));
    CHECK(f.engine.record("sw", "u", 8) ==
          answer(false, Reason::cost_exceeds_capacity, 0, -1, T60 + 120, 0));
    f.engine.reset("sw", "u");
    CHECK(f.engine.record("sw", "u", 5) == ok(2, T60 + 120));
    CHECK(f.engine.record("sw", "u", 4) == over);
    f.clock.set(T60 + 73);
    // 9 * 47 / 60 = 7.05 in use (8 rounded up): one unit fits once 9 * (60 - e) <= 360, e = 20.
    CHECK(f.engine.check("sw", "u") == limited(0, 7, T60 + 120, 0));
    CHECK(f.engine.usage("sw").at(0).used == 8);
    require_tight_retry(f, "sw", "u", 4, T60 + 13, over);
  }
}

TEST_CASE("retry_after_ms is tight: token_bucket, fractional rates, bursts and debts", "[engine]") {
  Fixture f;

  SECTION("7 per minute, burst 3: a token every 8571.43 ms") {
    f.engine.define(make_bucket("tb", 7, 60'000, 3));
    f.clock.set(T);
    CHECK(f.engine.consume("tb", "u", 3) == ok(0, T + 25'715));  // 180000 / 7 = 25714.3
    const Result denial = f.engine.consume("tb", "u");
    CHECK(denial == limited(0, 8'572, T + 25'715, 1));  // 60000 / 7 = 8571.4
    require_tight_retry(f, "tb", "u", 1, T, denial);
  }

  SECTION("3 per 7 ms, burst 4 above the maximum") {
    f.engine.define(make_bucket("tb", 3, 7, 4));
    f.clock.set(T);
    CHECK(f.engine.consume("tb", "u", 4) == ok(0, T + 10));  // 28 / 3 = 9.3
    const Result denial = f.engine.consume("tb", "u", 2);
    CHECK(denial == limited(0, 5, T + 10, 1));  // 14 / 3 = 4.7
    require_tight_retry(f, "tb", "u", 2, T, denial);
  }

  SECTION("10 per second, burst 2 below the maximum: the capacity is the burst") {
    f.engine.define(make_bucket("tb", 10, 1000, 2));
    f.clock.set(T);
    CHECK(f.engine.consume("tb", "u", 2) == ok(0, T + 200));
    CHECK(f.engine.consume("tb", "u", 3) ==
          answer(false, Reason::cost_exceeds_capacity, 0, -1, T + 200, 1));
    const Result denial = f.engine.consume("tb", "u");
    CHECK(denial == limited(0, 100, T + 200, 2));
    require_tight_retry(f, "tb", "u", 1, T, denial);
  }

  SECTION("a record's debt is waited out") {
    f.engine.define(make_bucket("tb", 7, 60'000, 3));
    f.clock.set(T);
    CHECK(f.engine.record("tb", "u", 3) == ok(0, T + 25'715));
    // -3 tokens: 6 must come back before 3 can be taken, 360000 / 7 = 51428.6 ms.
    const Result over = f.engine.record("tb", "u", 3);
    CHECK(over == limited(0, 51'429, T + 51'429, 0));
    CHECK(f.engine.usage("tb").at(0).used == 6);  // capacity - tokens, above the capacity
    f.clock.set(T + 1000);
    // -173000 / 60000 tokens: (60000 + 173000) / 7 = 33285.7 ms until one token.
    CHECK(f.engine.consume("tb", "u") == limited(0, 33'286, T + 51'429, 1));
    require_tight_retry(f, "tb", "u", 3, T, over);
  }

  SECTION("a check remembers no time; a consume does") {
    f.engine.define(make_bucket("tb", 7, 60'000, 3));
    f.clock.set(T + 10'000);
    CHECK(f.engine.consume("tb", "u", 3) == ok(0, T + 35'715));
    f.clock.set(T + 20'000);
    CHECK(f.engine.check("tb", "u") == ok(1, T + 35'715));  // 70000 / 60000 tokens
    f.clock.set(T + 15'000);  // before the check, after the consume: evaluated at T + 15000
    CHECK(f.engine.consume("tb", "u") == limited(0, 3'572, T + 35'715, 1));
    f.clock.set(T + 5'000);  // before the consume: evaluated at T + 15000, told from T + 5000
    const Result denial = f.engine.consume("tb", "u");
    CHECK(denial == limited(0, 13'572, T + 35'715, 2));
    require_tight_retry(f, "tb", "u", 1, T + 5'000, denial);
  }
}

TEST_CASE("reset_at_ms follows docs/concepts.md", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  f.engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 5, 1000));
  f.engine.define(make_bucket("tb", 7, 60'000, 3));

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

  SECTION("sliding_window: two windows after usage, one after the previous window's, else now") {
    f.clock.set(T + 250);
    CHECK(f.engine.consume("sw", "u") == ok(4, T + 2000));
    f.clock.set(T + 999);
    CHECK(f.engine.check("sw", "u") == ok(4, T + 2000));
    f.clock.set(T + 1000);  // only the previous window has usage
    CHECK(f.engine.check("sw", "u") == ok(4, T + 2000));
    f.clock.set(T + 1500);
    CHECK(f.engine.consume("sw", "u") == ok(3, T + 3000));  // 1 + 1 * 500 / 1000
    f.clock.set(T + 1999);
    CHECK(f.engine.check("sw", "u") == ok(3, T + 3000));  // 1.001: remaining is the floor
    f.clock.set(T + 2000);
    CHECK(f.engine.check("sw", "u") == ok(4, T + 3000));
    f.clock.set(T + 2999);
    CHECK(f.engine.check("sw", "u") == ok(4, T + 3000));  // 0.001 in use
    CHECK(f.engine.usage("sw").at(0).used == 1);
    f.clock.set(T + 3000);
    CHECK(f.engine.check("sw", "u") == ok(5, T + 3000));
    CHECK(f.engine.usage("sw").empty());
    f.clock.set(T + 3001);
    CHECK(f.engine.check("sw", "u") == ok(5, T + 3001));
  }

  SECTION("token_bucket: when the bucket is full again, else now") {
    f.clock.set(T);
    CHECK(f.engine.consume("tb", "u") == ok(2, T + 8'572));  // 60000 / 7 = 8571.4
    f.clock.set(T + 8'571);
    CHECK(f.engine.check("tb", "u") == ok(2, T + 8'572));  // 2.99995 tokens
    CHECK(f.engine.usage("tb").at(0).used == 1);
    f.clock.set(T + 8'572);
    CHECK(f.engine.check("tb", "u") == ok(3, T + 8'572));
    CHECK(f.engine.usage("tb").empty());
    f.clock.set(T + 9'000);
    CHECK(f.engine.check("tb", "u") == ok(3, T + 9'000));
  }

  SECTION("an owner without state") {
    f.clock.set(T + 123);
    CHECK(f.engine.check("log", "nobody") == ok(5, T + 123));
    CHECK(f.engine.check("win", "nobody") == ok(5, T + 123));
    CHECK(f.engine.check("sw", "nobody") == ok(5, T + 123));
    CHECK(f.engine.check("tb", "nobody") == ok(3, T + 123));
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

  const TestDatabase& raw = f.database;
  CHECK(raw.integer("SELECT count(*) FROM quota_log_owners WHERE last_reset_at_ms IS NULL OR "
                    "last_reset_at_ms = 0") == 0);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows WHERE last_reset_at_ms IS NULL OR "
                    "last_reset_at_ms = 0") == 0);
}

TEST_CASE("the first operation of a new owner: sliding_window and token_bucket", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 3, 1000));
  f.engine.define(make_bucket("tb", 3, 1000));
  f.clock.set(T + 250);

  CHECK(f.engine.consume("sw", "a", 2) == ok(1, T + 2000));
  CHECK(f.engine.consume("tb", "a", 2) == ok(1, T + 250 + 667));  // 2000 / 3 = 666.7
  CHECK(f.engine.record("sw", "b", 4) ==
        answer(false, Reason::cost_exceeds_capacity, 0, -1, T + 2000, 0));
  // A bucket starts full: 3 - 4 = -1 token, full again after 4000 / 3 = 1333.3 ms.
  CHECK(f.engine.record("tb", "b", 4) ==
        answer(false, Reason::cost_exceeds_capacity, 0, -1, T + 250 + 1334, 0));
  const Result never = answer(false, Reason::cost_exceeds_capacity, 3, -1, T + 250, 1);
  CHECK(f.engine.consume("sw", "c", 4) == never);
  CHECK(f.engine.consume("tb", "c", 4) == never);
}

TEST_CASE("the denied counter counts denied consumes until a reset", "[engine]") {
  Fixture f;
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                  Algorithm::sliding_window, Algorithm::token_bucket);
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
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                  Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(algorithm));
  f.engine.define(make_limit("l", algorithm, 2, 1000));
  f.clock.set(T + 900);
  f.engine.consume("l", "u", 2);
  f.engine.consume("l", "u");
  f.clock.set(T + 100);  // earlier than the remembered T + 900
  CHECK(f.engine.reset("l", "u") == ok(2, T + 100));
  // Evaluated at the request's own time again: nothing remembered.
  const std::int64_t reset_at = algorithm == Algorithm::sliding_log      ? T + 1100
                                : algorithm == Algorithm::fixed_window   ? T + 1000
                                : algorithm == Algorithm::sliding_window ? T + 2000
                                                                         : T + 600;
  CHECK(f.engine.consume("l", "u") == ok(1, reset_at));
  const TestDatabase& raw = f.database;
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
  const TestDatabase& raw = f.database;
  CHECK(raw.integer("SELECT count(*) FROM quota_log") == 0);
  CHECK(raw.integer("SELECT count(*) FROM quota_log_owners") == 0);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 0);
}

TEST_CASE("redefining a sliding_window keeps its counts under the new maximum", "[engine]") {
  Fixture f;
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 5, 1000));
  f.clock.set(T + 100);
  CHECK(f.engine.consume("sw", "u", 5) == ok(0, T + 2000));
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 10, 1000));
  CHECK(f.engine.check("sw", "u") == ok(5, T + 2000));
  // Fewer allowed than already used: one fits once 5 * (1000 - e) <= 2000, at T + 1600.
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 3, 1000));
  CHECK(f.engine.consume("sw", "u") == limited(0, 1500, T + 2000, 1));
  f.engine.define(make_limit("sw", Algorithm::fixed_window, 3, 1000));
  CHECK(f.engine.check("sw", "u") == ok(3, T + 100, 0));
}

TEST_CASE("redefining a token_bucket keeps its tokens, clamped to the new capacity", "[engine]") {
  Fixture f;
  f.engine.define(make_bucket("tb", 2, 1000, 10));
  f.clock.set(T);
  CHECK(f.engine.consume("tb", "u") == ok(9, T + 500));

  // A smaller capacity: 9 tokens become 4, a full bucket.
  f.engine.define(make_bucket("tb", 2, 1000, 4));
  CHECK(f.engine.check("tb", "u") == ok(4, T));
  CHECK(f.engine.consume("tb", "u", 4) == ok(0, T + 2000));

  // A larger capacity keeps the balance (0) and refills towards the new capacity.
  f.engine.define(make_bucket("tb", 2, 1000, 10));
  CHECK(f.engine.check("tb", "u") == limited(0, 500, T + 5000, 0));

  // A new maximum is the new rate (no time has passed since the latest write).
  f.engine.define(make_bucket("tb", 4, 1000, 10));
  f.clock.set(T + 250);
  CHECK(f.engine.check("tb", "u") == ok(1, T + 2500));  // 9000 / 4 = 2250 ms to go
  CHECK(f.engine.get("tb") == make_bucket("tb", 4, 1000, 10));

  // Without a burst the capacity follows the maximum.
  f.engine.define(make_bucket("tb", 2, 1000));
  CHECK(f.engine.check("tb", "u") == limited(0, 250, T + 1000, 0));  // 500/1000 of a token
  CHECK(f.engine.get("tb")->capacity() == 2);
}

TEST_CASE("a token bucket whose period changes never overflows or exceeds its capacity",
          "[slow][engine]") {
  // A change of period re-scales the level to whole tokens; the exact figures are the
  // engine's choice, the bounds are not: no error, 0 <= remaining <= capacity, waits that
  // are -1 or positive, and tight.
  Fixture f;
  const std::vector<Limit> shapes = {
      make_bucket("tb", 1'000'000'000'000, 2'305'843),             // burst x period <= 2^61
      make_bucket("tb", 1'000'000'000'000, 4'611'686, 1),          // maximum x period <= 2^62
      make_bucket("tb", 1, 1),                                     // the smallest
      make_bucket("tb", 72'918'026, 31'622'400'000),               // 366 days
      make_bucket("tb", 3, 33'554'432, 68'719'476'736),            // burst x period = 2^61
      make_bucket("tb", 1'000'000'000'000, 1, 1'000'000'000'000),  // 1 ms, the largest numbers
      make_bucket("tb", 7, 60'000, 3),
  };
  f.clock.set(T);
  int step = 0;
  auto sane = [&](const Result& result, const Limit& limit) {
    CAPTURE(step, result, limit.maximum, limit.period.count(), limit.capacity());
    CHECK(result.remaining >= 0);
    CHECK(result.remaining <= limit.capacity());
    CHECK(result.reset_at_ms >= f.clock.get());
    if (result.allowed) {
      CHECK(result.retry_after_ms == 0);
    } else {
      CHECK((result.retry_after_ms == -1 || result.retry_after_ms > 0));
    }
    const auto usage = f.engine.usage("tb");
    for (const Usage& row : usage) {
      CHECK(row.used >= 0);
      CHECK(row.remaining == std::max<std::int64_t>(limit.capacity() - row.used, 0));
    }
  };
  for (const Limit& from : shapes) {
    for (const Limit& to : shapes) {
      ++step;
      f.engine.define(from);
      f.engine.reset("tb", "u");
      sane(f.engine.consume("tb", "u", std::max<std::int64_t>(from.capacity() / 2, 1)), from);
      sane(f.engine.record("tb", "u", from.capacity()), from);  // in debt
      f.engine.define(to);
      sane(f.engine.check("tb", "u", to.capacity()), to);
      sane(f.engine.consume("tb", "u"), to);
      f.clock.advance(to.period.count() / 2 + 1);
      const Result denial = f.engine.consume("tb", "u", to.capacity());
      sane(denial, to);
      if (denial.retry_after_ms > 0 && denial.retry_after_ms < 1'000'000'000'000) {
        require_tight_retry(f, "tb", "u", to.capacity(), f.clock.get(), denial);
      }
      f.clock.advance(std::min<std::int64_t>(to.period.count(), 1'000'000'000) * 1000);
      sane(f.engine.record("tb", "u", to.capacity()), to);
    }
  }
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
  const TestDatabase& raw = f.database;
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
  const TestDatabase& raw = f.database;
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
  const std::string before = f.database.dump();
  auto expect_unknown = [](auto&& operation) {
    try {
      operation();
      FAIL("no error");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::unknown_limit);
      CHECK(error.limit() == "nope");  // for callers that word their own message (quotactl)
      CHECK_THAT(error.what(),
                 Catch::Contains("unknown limit 'nope'") && Catch::Contains("define it first"));
    }
  };
  expect_unknown([&] { f.engine.check("nope", "u"); });
  expect_unknown([&] { f.engine.consume("nope", "u"); });
  expect_unknown([&] { f.engine.record("nope", "u"); });
  expect_unknown([&] { f.engine.reset("nope", "u"); });
  expect_unknown([&] { f.engine.usage("nope"); });
  expect_unknown([&] { f.engine.owner_usage("nope", "u"); });
  CHECK_FALSE(f.engine.get("nope"));
  CHECK_FALSE(f.engine.remove("nope"));
  CHECK(f.database.dump() == before);
}

// A token bucket at 7 per minute with a burst of 3 over a long run of requests: the engine
// admits exactly what exact arithmetic allows, decision by decision. The expected answers come
// from a different formulation than the engine's level: the generic cell rate algorithm,
// which keeps the moment the bucket is full again, in units of 1/7 ms (so that a token is
// exactly 60000 units), in plain 64-bit integers.
//
// 200,000 requests by default: a request costs about 10 us of SQLite in any build, so the
// full million took 10 s of CPU in Debug and 32 s under AddressSanitizer (measured when this
// was written). QUOTA_LONG_RUN_REQUESTS=1000000 runs the million; it passed in both builds.
TEST_CASE("token_bucket: a long run at 7 per minute admits exactly what the rate allows",
          "[engine][long]") {
  constexpr std::int64_t kMaximum = 7, kPeriod = 60'000, kBurst = 3;
  const char* requested = std::getenv("QUOTA_LONG_RUN_REQUESTS");
  const std::int64_t requests =
      requested && *requested ? std::strtoll(requested, nullptr, 10) : 200'000;
  const std::int64_t dense = requests * 2 / 5, varied = requests - dense;
  ManualClock clock;
  Engine engine = Engine::open(":memory:", options_with(clock));
  engine.define(make_bucket("tb", kMaximum, kPeriod, kBurst));

  // Phase 1, closed form: a request every millisecond from a full bucket. No token is ever
  // lost to a full bucket, so by request i (at T + i) exactly
  // min(i + 1, floor((3 * 60000 + 7 * i) / 60000)) of them have been admitted.
  clock.set(T);
  std::int64_t admitted = 0;
  for (std::int64_t i = 0; i < dense; ++i) {
    admitted += engine.consume("tb", "u").allowed;
    const std::int64_t expected = std::min(i + 1, (kBurst * kPeriod + kMaximum * i) / kPeriod);
    if (admitted != expected) {
      FAIL("request " << i << " at T + " << i << ": " << admitted << " admitted, expected "
                      << expected);
    }
    clock.advance(1);
  }
  CHECK(admitted == 3 + 7 * (dense - 1) / 60'000);  // 12 of 80,000; 49 of 400,000

  // Phase 2: varied intervals (the same millisecond, under a token's 8571.4 ms, above it,
  // and now and then long enough to fill the bucket) and costs 1-4 (4 never fits).
  // full_at: when the bucket is full again, in 1/7 ms; at t the bucket holds
  // (3 * 60000 - max(full_at - 7 * t, 0)) / 60000 tokens. At the dense phase's last request
  // it held (180000 + 7 * (dense - 1) - 60000 * admitted) / 60000: it was never full after
  // the first request, so it lost nothing.
  const std::int64_t last = T + dense - 1;
  const std::int64_t level_then = kBurst * kPeriod + kMaximum * (dense - 1) - kPeriod * admitted;
  std::int64_t full_at = kMaximum * last + (kBurst * kPeriod - level_then);
  std::mt19937_64 random(7);
  auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  std::int64_t admitted_varied = 0, expected_varied = 0;
  for (std::int64_t i = 0; i < varied; ++i) {
    const std::int64_t roll = between(0, 99);
    clock.advance(roll < 10   ? 0
                  : roll < 75 ? between(1, 8'571)
                  : roll < 99 ? between(8'572, 30'000)
                              : between(30'000, 200'000));
    const std::int64_t cost = roll % 10 == 3 ? between(2, 4) : 1;
    const std::int64_t now = kMaximum * clock.get();  // in 1/7 ms
    const std::int64_t from = std::max(full_at, now);
    const bool fits = cost <= kBurst && from - now + cost * kPeriod <= kBurst * kPeriod;
    if (fits) full_at = from + cost * kPeriod;
    const std::int64_t level = kBurst * kPeriod - (std::max(full_at, now) - now);
    Result expected;
    expected.allowed = fits;
    expected.reason = fits            ? Reason::ok
                      : cost > kBurst ? Reason::cost_exceeds_capacity
                                      : Reason::rate_limited;
    expected.remaining = std::max<std::int64_t>(level, 0) / kPeriod;
    expected.retry_after_ms = fits            ? 0
                              : cost > kBurst ? -1
                                              : (cost * kPeriod - level + kMaximum - 1) / kMaximum;
    expected.reset_at_ms = full_at > now ? (full_at + kMaximum - 1) / kMaximum : clock.get();
    const Result actual = engine.consume("tb", "u", cost);
    expected.denied = actual.denied;  // counted below
    expected_varied += fits;
    admitted_varied += actual.allowed;
    if (!(actual == expected)) {
      FAIL("varied request " << i << " (cost " << cost << ", t = T + " << clock.get() - T
                             << "): engine " << actual << ", expected " << expected);
    }
  }
  CHECK(admitted_varied == expected_varied);
  CHECK(engine.usage("tb").at(0).denied == (dense - admitted) + (varied - admitted_varied));
}

TEST_CASE("the largest token bucket keeps two records of its capacity as an exact debt",
          "[engine]") {
  // Regression: with burst x period allowed up to 2^62 and the debt floored at -2^61, one
  // record of the capacity reached the floor and part of a second one was forgiven (a wait of
  // 6,917,530 ms instead of 2 periods). Now burst x period <= 2^61 and the floor is -2^62.
  Fixture f;
  const Limit largest = make_bucket("tb", 1'000'000'000'000, 2'305'843);  // burst = maximum
  f.engine.define(largest);
  f.clock.set(T);
  CHECK(f.engine.record("tb", "u", 1'000'000'000'000).allowed);
  const Result second = f.engine.record("tb", "u", 1'000'000'000'000);
  CHECK_FALSE(second.allowed);
  CHECK(f.engine.check("tb", "u", 1'000'000'000'000).retry_after_ms == 2 * 2'305'843);
  REQUIRE(f.engine.usage("tb").size() == 1);
  CHECK(f.engine.usage("tb")[0].used == 2'000'000'000'000);
  f.clock.set(T + 2 * 2'305'843 - 1);
  CHECK_FALSE(f.engine.check("tb", "u", 1'000'000'000'000).allowed);
  f.clock.set(T + 2 * 2'305'843);
  CHECK(f.engine.check("tb", "u", 1'000'000'000'000).allowed);
}

TEST_CASE("the docs' example defines a limit with four braced values", "[engine]") {
  // Regression: without a default for burst, this example line warned under -Wextra
  // (-Wmissing-field-initializers), an error in a build like this suite's.
  Engine engine = Engine::open(":memory:");
  engine.define({"send_message", quota::Algorithm::sliding_log, 10, std::chrono::minutes(1)});
  CHECK(engine.get("send_message")->capacity() == 10);
}

}  // namespace
}  // namespace quota::test
