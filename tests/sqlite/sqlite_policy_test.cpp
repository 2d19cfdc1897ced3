// The policies and hooks of docs/concepts.md through the C++ API and the plain SQL
// statements, on a SQLite file: overrides on all four algorithms, shadow mode, refund,
// consume_all, hooks and their rollback (also inside the application's own transaction).
// tests/common/policy_test.cpp runs all of them against the reference model on every backend.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend.h"
#include "model.h"
#include "quota/sqlite.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

using detail::Operation;

constexpr std::int64_t T = 1'700'000'000'000;

constexpr const auto& kAlgorithms = kAllAlgorithms;

struct Fixture : EngineOnFile {
  Fixture() { clock.set(T); }
};

// One run of the library's statement for `operation` on a plain connection, as any SQLite
// client would run it.
Result plain(RawDb& db, Operation operation, Algorithm algorithm, const std::string& limit,
             const std::string& owner, std::int64_t cost, std::int64_t now) {
  return run_statement(db.handle(), operation, algorithm, limit, owner, cost, now);
}


void plain_override(RawDb& db, const Override& override) { db.exec(plain_override_sql(override)); }

Limit limit_of(Algorithm algorithm, std::int64_t maximum = 3, std::int64_t period_ms = 1000) {
  return make_limit(std::string(to_string(algorithm)), algorithm, maximum, period_ms);
}

// Consumes until the first denial; returns how many were allowed (at most `bound`).
int allowed_in_a_row(Engine& engine, const std::string& limit, const std::string& owner,
                     int bound = 50) {
  for (int i = 0; i < bound; ++i) {
    if (!engine.consume(limit, owner).allowed) return i;
  }
  return bound;
}

TEST_CASE("overrides on every algorithm: own maximum, exempt, deny, '*' and precedence",
          "[policy][override]") {
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    Fixture f;
    const Limit limit = limit_of(algorithm);
    f.engine.define(limit);
    f.engine.set_override({limit.name, "premium", Policy::maximum, 6});
    f.engine.set_override({limit.name, "admin", Policy::exempt});
    f.engine.set_override({limit.name, "abuser", Policy::deny});
    f.engine.set_override({"*", "everywhere", Policy::maximum, 5});
    f.engine.set_override({"*", "premium", Policy::deny});  // the limit's own override wins

    CHECK(allowed_in_a_row(f.engine, limit.name, "plain") == 3);
    CHECK(allowed_in_a_row(f.engine, limit.name, "premium") == 6);
    CHECK(allowed_in_a_row(f.engine, limit.name, "everywhere") == 5);
    CHECK(allowed_in_a_row(f.engine, limit.name, "admin") == 50);

    const Result exempt = f.engine.consume(limit.name, "admin");
    CHECK(exempt == Result{true, Reason::ok, 3, 0, T, 0});  // uses no quota
    CHECK(f.engine.usage(limit.name).size() == 3);          // plain, premium, everywhere

    const Result denied = f.engine.consume(limit.name, "abuser");
    CHECK(denied == Result{false, Reason::owner_denied, 0, -1, T, 1});
    CHECK(f.engine.check(limit.name, "abuser").reason == Reason::owner_denied);
    CHECK(f.engine.consume(limit.name, "abuser").denied == 2);

    // Removing the limit's own override leaves the '*' one: premium is now denied.
    CHECK(f.engine.remove_override(limit.name, "premium"));
    CHECK_FALSE(f.engine.remove_override(limit.name, "premium"));
    CHECK(f.engine.consume(limit.name, "premium").reason == Reason::owner_denied);
  }
}

TEST_CASE("a token bucket override has its own burst, and a new owner starts with it full",
          "[policy][override]") {
  Fixture f;
  f.engine.define(make_bucket("tb", 1, 1000, 2));
  f.engine.set_override({"tb", "big", Policy::maximum, 2, 10});
  f.engine.set_override({"tb", "double", Policy::maximum, 4});  // burst: the maximum
  CHECK(allowed_in_a_row(f.engine, "tb", "plain") == 2);
  CHECK(allowed_in_a_row(f.engine, "tb", "big") == 10);
  CHECK(allowed_in_a_row(f.engine, "tb", "double") == 4);
  // Refilled at the override's rate: 2 per second, so one token every 500 ms.
  CHECK(f.engine.consume("tb", "big").retry_after_ms == 500);
  f.clock.advance(500);
  CHECK(f.engine.consume("tb", "big").allowed);
}

TEST_CASE("owner_usage answers one owner's figures out of its own capacity", "[policy][usage]") {
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    Fixture f;
    const Limit limit = limit_of(algorithm, 10, 60'000);
    f.engine.define(limit);
    f.engine.set_override({limit.name, "premium", Policy::maximum, 100});
    f.engine.set_override({"*", "everywhere", Policy::maximum, 20});
    f.engine.set_override({limit.name, "admin", Policy::exempt});
    f.engine.set_override({limit.name, "abuser", Policy::deny});
    for (int i = 0; i < 4; ++i) REQUIRE(f.engine.consume(limit.name, "premium").allowed);

    const Usage premium = f.engine.owner_usage(limit.name, "premium");
    CHECK(premium.limit == limit.name);
    CHECK(premium.owner == "premium");
    CHECK(premium.capacity == 100);
    CHECK(premium.used == 4);
    CHECK(premium.remaining == 96);
    CHECK(f.engine.owner_usage(limit.name, "everywhere").capacity == 20);
    CHECK(f.engine.owner_usage(limit.name, "admin").capacity == 10);   // the limit's
    CHECK(f.engine.owner_usage(limit.name, "abuser").capacity == 10);  // the limit's
    // An owner without state: nothing used, the whole capacity left; nothing written.
    const Usage fresh = f.engine.owner_usage(limit.name, "fresh");
    CHECK(fresh.used == 0);
    CHECK(fresh.denied == 0);
    CHECK(fresh.remaining == 10);
    CHECK(fresh.capacity == 10);
    // usage() carries the same figures.
    const std::vector<Usage> rows = f.engine.usage(limit.name);
    REQUIRE(rows.size() == 1);
    CHECK(rows.front().capacity == 100);
    CHECK(rows.front().remaining == 96);
    CHECK(f.raw.integer("SELECT count(*) FROM " + std::string(detail::state_table(detail::kind_of(algorithm))) +
                        " WHERE owner = 'fresh'") == 0);
  }
}

TEST_CASE("owner_usage of a token bucket is out of the owner's burst", "[policy][usage]") {
  Fixture f;
  f.engine.define(make_bucket("tb", 1, 1000, 2));
  f.engine.set_override({"tb", "big", Policy::maximum, 2, 10});
  f.engine.set_override({"tb", "double", Policy::maximum, 4});  // burst: the maximum
  CHECK(f.engine.owner_usage("tb", "plain").capacity == 2);
  CHECK(f.engine.owner_usage("tb", "big").capacity == 10);
  CHECK(f.engine.owner_usage("tb", "double").capacity == 4);
}

TEST_CASE("overrides set with plain SQL give the engine's answers", "[policy][override][sql]") {
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    Fixture f;
    const Limit limit = limit_of(algorithm);
    f.engine.define(limit);
    plain_override(f.raw, {limit.name, "premium", Policy::maximum, 5});
    plain_override(f.raw, {"*", "abuser", Policy::deny});
    for (int i = 0; i < 6; ++i) {
      const Result by_sql =
          plain(f.raw, Operation::consume, algorithm, limit.name, "premium", 1, T);
      CHECK(by_sql.allowed == (i < 5));
    }
    CHECK(plain(f.raw, Operation::check, algorithm, limit.name, "premium", 1, T) ==
          f.engine.check(limit.name, "premium"));
    CHECK(plain(f.raw, Operation::consume, algorithm, limit.name, "abuser", 1, T) ==
          Result{false, Reason::owner_denied, 0, -1, T, 1});
    // The engine sees the same override list.
    const std::vector<Override> all = f.engine.overrides();
    REQUIRE(all.size() == 2);
    CHECK(all[0] == Override{"*", "abuser", Policy::deny});
    CHECK(all[1] == Override{limit.name, "premium", Policy::maximum, 5});
    CHECK(f.engine.overrides(limit.name).size() == 1);
    // Removing the limit removes its overrides.
    f.engine.remove(limit.name);
    CHECK(f.engine.overrides().size() == 1);
  }
}

TEST_CASE("bad overrides are refused with a clear error and change nothing",
          "[policy][override][validation]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 3, 1000));
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 3, 1000));
  const std::string before = dump(f.path);
  const Override bad[] = {
      {"nope", "u", Policy::maximum, 5},                 // unknown limit
      {"bad name", "u", Policy::exempt},                 // invalid limit name
      {"log", "", Policy::exempt},                       // empty owner
      {"log", "u", Policy::maximum},                     // no maximum
      {"log", "u", Policy::maximum, 0},                  // maximum out of range
      {"log", "u", Policy::maximum, kMaximumBound + 1},  // maximum out of range
      {"log", "u", Policy::exempt, 5},                   // a maximum with exempt
      {"log", "u", Policy::deny, std::nullopt, 2},       // a burst with deny
      {"log", "u", Policy::maximum, 5, 7},               // a burst on a sliding_log
      {"sw", "u", Policy::maximum, kMaximumBound},       // maximum x period beyond 2^62?
  };
  for (const Override& override : bad) {
    CAPTURE(override.limit, override.owner, to_string(override.policy));
    if (override.limit == "sw") {
      // 10^12 x 1000 ms fits in 2^62: this one is accepted, then removed.
      f.engine.set_override(override);
      CHECK(f.engine.remove_override("sw", "u"));
      continue;
    }
    try {
      f.engine.set_override(override);
      FAIL("accepted");
    } catch (const Error& error) {
      CHECK((error.code() == ErrorCode::invalid_argument ||
             error.code() == ErrorCode::unknown_limit));
      CHECK(std::string(error.what()).size() > 20);
    }
  }
  f.engine.define(make_limit("long", Algorithm::sliding_window, 1, 30LL * 24 * 3600 * 1000));
  CHECK_THROWS_AS(f.engine.set_override({"long", "u", Policy::maximum, kMaximumBound}), Error);
  f.engine.remove("long");
  CHECK_THROWS_AS(f.engine.remove_override("bad name", "u"), Error);
  CHECK_THROWS_AS(f.engine.overrides(std::string_view("bad name")), Error);
  CHECK(dump(f.path) == before);
}

TEST_CASE("shadow mode never denies, counts would-be denials exactly, records only what fits",
          "[policy][shadow]") {
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    Fixture f;
    Limit limit = limit_of(algorithm);
    limit.shadow = true;
    f.engine.define(limit);
    CHECK(f.engine.get(limit.name)->shadow);
    int shadow_denied = 0;
    for (int i = 0; i < 10; ++i) {
      const Result result = f.engine.consume(limit.name, "u");
      CHECK(result.allowed);
      if (result.shadow_denied) {
        ++shadow_denied;
        CHECK(result.reason == Reason::rate_limited);
        CHECK(result.retry_after_ms > 0);
        CHECK(result.denied == 0);
      }
    }
    CHECK(shadow_denied == 7);
    // check answers as if enforcing.
    CHECK_FALSE(f.engine.check(limit.name, "u").allowed);
    const std::vector<Usage> usage = f.engine.usage(limit.name);
    REQUIRE(usage.size() == 1);
    CHECK(usage[0].used == 3);
    CHECK(usage[0].denied == 0);
    CHECK(usage[0].shadow_denied == 7);
    CHECK(f.raw.integer("SELECT shadow_denied FROM quota_usage") == 7);
    // Enforcing again: denied, counted as a denial.
    limit.shadow = false;
    f.engine.define(limit);
    const Result enforced = f.engine.consume(limit.name, "u");
    CHECK_FALSE(enforced.allowed);
    CHECK_FALSE(enforced.shadow_denied);
    CHECK(enforced.denied == 1);
  }
}

TEST_CASE("refund gives back usage, never below zero, and answers like a check of 1",
          "[policy][refund]") {
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    Fixture f;
    const Limit limit = limit_of(algorithm, 5, 1000);
    f.engine.define(limit);
    f.engine.consume(limit.name, "u", 4);
    const Result refunded = f.engine.refund(limit.name, "u", 3);
    CHECK(refunded == f.engine.check(limit.name, "u", 1));
    CHECK(refunded.remaining == 4);
    CHECK(f.engine.refund(limit.name, "u", 100).remaining == 5);  // never below zero
    CHECK(allowed_in_a_row(f.engine, limit.name, "u") == 5);
    const Result by_sql = plain(f.raw, Operation::refund, algorithm, limit.name, "u", 2, T);
    CHECK(by_sql.remaining == 2);
    CHECK(by_sql == f.engine.check(limit.name, "u"));
    CHECK_THROWS_AS(f.engine.refund("nope", "u"), Error);
    CHECK_THROWS_AS(f.engine.refund(limit.name, "u", 0), Error);
  }
}

TEST_CASE("a sliding_log refund returns the newest events first", "[policy][refund]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  f.engine.consume("log", "u", 2);  // at T
  f.clock.advance(400);
  f.engine.consume("log", "u", 3);  // at T + 400
  // Giving back 4 keeps 1 unit of the event at T: at T + 1000 it expires and nothing is left.
  const Result refunded = f.engine.refund("log", "u", 4);
  CHECK(refunded.remaining == 4);
  CHECK(refunded.reset_at_ms == T + 1000);
  CHECK(f.raw.rows("SELECT at_ms, cost, total FROM quota_log") ==
        std::vector<std::vector<std::string>>{{std::to_string(T), "1", "1"}});
  f.clock.set(T + 1000);
  CHECK(f.engine.check("log", "u").remaining == 5);
}

TEST_CASE("a sliding_window refund takes from the current window only", "[policy][refund]") {
  Fixture f;
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 4, 1000));
  f.engine.consume("sw", "u", 4);  // window T
  f.clock.set(T + 1000);           // the previous window weighs fully
  CHECK(f.engine.refund("sw", "u", 4).remaining == 0);
  f.engine.consume("sw", "u", 1);
  f.clock.set(T + 1500);
  CHECK(f.engine.refund("sw", "u", 1).remaining == 2);  // prev 4 x 0.5 = 2 still counts
}

TEST_CASE("consume_all: all or nothing, deciding limit, longest wait", "[policy][consume_all]") {
  Fixture f;
  f.engine.define(make_limit("minute", Algorithm::fixed_window, 2, 60'000));
  f.engine.define(make_limit("hour", Algorithm::sliding_log, 3, 3'600'000));
  f.engine.define(make_bucket("bucket", 1, 1000, 5));

  const Decision first = f.engine.consume_all({"minute", "hour", "bucket"}, "u");
  CHECK(first.result.allowed);
  CHECK(first.limit == "minute");  // the fewest units left: 1
  CHECK(first.result.remaining == 1);
  CHECK(f.engine.consume_all({"minute", "hour"}, "u").result.allowed);

  // minute is now full (retry at the next minute); hour has 1 left.
  SECTION("one limit denying changes no limit's state but the decider's denied count") {
    TempDir other_dir;
    const std::string copy = other_dir.file("copy.db");
    f.raw.exec("VACUUM INTO '" + copy + "'");
    const Decision denied = f.engine.consume_all({"hour", "minute", "bucket"}, "u");
    CHECK_FALSE(denied.result.allowed);
    CHECK(denied.limit == "minute");
    CHECK(denied.result.denied == 1);
    // The same as a lone consume of the deciding limit on a copy taken before.
    Engine alone = Engine::open(copy, options_with(f.clock));
    CHECK(alone.consume("minute", "u") == denied.result);
    CHECK(dump(copy) == dump(f.path));
  }
  SECTION("the longest wait decides, -1 above all") {
    f.engine.define(make_limit("tiny", Algorithm::sliding_log, 1, 1000));
    const Decision too_big = f.engine.consume_all({"minute", "tiny"}, "u", 2);
    CHECK(too_big.limit == "tiny");
    CHECK(too_big.result.reason == Reason::cost_exceeds_capacity);
    CHECK(too_big.result.retry_after_ms == -1);
  }
  SECTION("bad lists are refused") {
    CHECK_THROWS_AS(f.engine.consume_all({}, "u"), Error);
    CHECK_THROWS_AS(f.engine.consume_all({"minute", "minute"}, "u"), Error);
    CHECK_THROWS_AS(f.engine.consume_all({"minute", "bad name"}, "u"), Error);
    const std::string before = dump(f.path);
    CHECK_THROWS_AS(f.engine.consume_all({"hour", "nope"}, "u"), Error);
    CHECK(dump(f.path) == before);  // hour's consume was rolled back
  }
}

TEST_CASE("consume_all with an owner per limit: all or nothing across owners",
          "[policy][consume_all]") {
  Fixture f;
  f.engine.define(make_limit("per_ip", Algorithm::sliding_log, 3, 60'000));
  f.engine.define(make_limit("per_key", Algorithm::fixed_window, 1, 60'000));
  const std::vector<Charge> alice{{"per_ip", "10.0.0.1"}, {"per_key", "key:alice"}};

  const Decision first = f.engine.consume_all(alice);
  CHECK(first.result.allowed);
  CHECK(first.limit == "per_key");  // the fewest units left: 0
  CHECK(f.engine.check("per_ip", "10.0.0.1").remaining == 2);

  // per_key is full: the address is not charged, and only per_key counts the denial.
  const std::string before = dump(f.path);
  const Decision denied = f.engine.consume_all(alice);
  CHECK_FALSE(denied.result.allowed);
  CHECK(denied.limit == "per_key");
  CHECK(denied.result.denied == 1);
  CHECK(f.engine.check("per_ip", "10.0.0.1").remaining == 2);
  CHECK(f.engine.owner_usage("per_ip", "10.0.0.1").denied == 0);
  CHECK(f.engine.owner_usage("per_key", "key:alice").denied == 1);
  CHECK(dump(f.path) != before);  // the denial itself is counted

  // Another key from the same address is decided on its own key and the shared address.
  const Decision bob = f.engine.consume_all({{"per_ip", "10.0.0.1"}, {"per_key", "key:bob"}}, 2);
  CHECK_FALSE(bob.result.allowed);
  CHECK(bob.limit == "per_key");
  CHECK(bob.result.reason == Reason::cost_exceeds_capacity);
  CHECK(f.engine.check("per_ip", "10.0.0.1").remaining == 2);

  SECTION("bad lists are refused and change nothing") {
    const std::string state = dump(f.path);
    CHECK_THROWS_AS(f.engine.consume_all(std::vector<Charge>{}), Error);
    CHECK_THROWS_AS(f.engine.consume_all({{"per_ip", "a"}, {"per_ip", "b"}}), Error);
    CHECK_THROWS_AS(f.engine.consume_all({{"per_ip", "a"}, {"per_key", ""}}), Error);
    CHECK_THROWS_AS(f.engine.consume_all({{"per_ip", "a"}, {"nope", "a"}}), Error);
    CHECK_THROWS_AS(f.engine.consume_all(alice, 0), Error);
    CHECK(dump(f.path) == state);
  }
}

TEST_CASE("hooks run in order and a throwing hook rolls the operation back", "[policy][hooks]") {
  Fixture f;
  f.engine.define(make_limit("send", Algorithm::sliding_log, 2, 1000));
  std::vector<std::string> calls;
  bool refuse = false, throw_after = false;
  Hooks hooks;
  hooks.before_consume = [&](const Request& request) {
    calls.push_back("before_consume " + std::string(request.owner));
    CHECK(request.now_ms == f.clock.get());
    return !refuse;
  };
  hooks.after_consume = [&](const Request&, const Result& result) {
    calls.push_back(std::string("after_consume ") + (result.allowed ? "allowed" : "denied"));
    if (throw_after) throw std::runtime_error("after_consume failed");
  };
  hooks.before_record = [&](const Request&) { calls.push_back("before_record"); };
  hooks.after_record = [&](const Request&, const Result&) { calls.push_back("after_record"); };
  hooks.on_exceeded = [&](const Request&, const Result& result) {
    calls.push_back("on_exceeded " + std::string(to_string(result.reason)));
  };
  f.engine.set_hooks("send", hooks);

  CHECK(f.engine.consume("send", "u").allowed);
  CHECK(calls == std::vector<std::string>{"before_consume u", "after_consume allowed"});

  calls.clear();
  refuse = true;
  const Result refused = f.engine.consume("send", "u");
  CHECK(refused == Result{false, Reason::hook_denied, 1, -1, T + 1000, 0});
  CHECK(calls == std::vector<std::string>{"before_consume u", "on_exceeded hook_denied",
                                          "after_consume denied"});
  refuse = false;

  calls.clear();
  f.engine.record("send", "u", 2);
  CHECK(calls ==
        std::vector<std::string>{"before_record", "on_exceeded rate_limited", "after_record"});

  SECTION("a throwing hook: the exception reaches the caller, nothing is recorded") {
    f.engine.reset("send", "u");
    const std::string before = dump(f.path);
    throw_after = true;
    CHECK_THROWS_WITH(f.engine.consume("send", "u"), "after_consume failed");
    CHECK(dump(f.path) == before);
    CHECK_THROWS_WITH(f.engine.consume_all({"send"}, "u"), "after_consume failed");
    CHECK(dump(f.path) == before);
  }
  SECTION("hooks removed: no calls") {
    f.engine.set_hooks("send", {});
    calls.clear();
    f.engine.consume("send", "v");
    CHECK(calls.empty());
  }
}

TEST_CASE("a throwing hook inside the application's transaction leaves it usable",
          "[policy][hooks]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("CREATE TABLE notes (text TEXT)");
  ManualClock clock;
  Engine engine = quota::sqlite::attach(db, options_with(clock));
  engine.define(make_limit("post", Algorithm::fixed_window, 5, 60'000));
  Hooks hooks;
  hooks.after_consume = [](const Request& request, const Result&) {
    if (request.owner == "bad") throw std::runtime_error("refused by the application");
  };
  engine.set_hooks("post", hooks);

  SQLite::Transaction transaction(db);
  db.exec("INSERT INTO notes VALUES ('first')");
  CHECK(engine.consume("post", "good").allowed);
  CHECK_THROWS_WITH(engine.consume("post", "bad"), "refused by the application");
  db.exec("INSERT INTO notes VALUES ('second')");
  transaction.commit();

  CHECK(db.execAndGet("SELECT count(*) FROM notes").getInt() == 2);
  CHECK(engine.check("post", "good").remaining == 4);
  CHECK(engine.check("post", "bad").remaining == 5);
  CHECK(db.execAndGet("SELECT count(*) FROM quota_windows WHERE owner = 'bad'").getInt() == 0);
}

}  // namespace
}  // namespace quota::test
