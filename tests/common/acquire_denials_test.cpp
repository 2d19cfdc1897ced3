// Engine::acquire and acquire_all (docs/embedding.md, "Waiting for one's turn"): only the final
// refusal counts, once. A waiting attempt that is denied is undone: it adds nothing to
// `denied`, starts no block and calls no on_exceeded, so a patient client does not look like
// an abuser. acquire_all waits for the slowest of several limits, all or nothing. On every
// backend, on the real clock (the waits here are a few hundred ms; nothing asserts a time).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "backend.h"
#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

TEST_CASE("acquire: waiting attempts are not denials, only the final refusal counts, once",
          "[acquire][backends]") {
  const Backend backend = each_backend();
  CAPTURE(backend);
  TestDatabase db(backend);
  Engine engine = Engine::open(db.location());
  engine.define(make_bucket("calls", 1, 300, 1));
  std::atomic<int> exceeded{0};
  Hooks hooks;
  hooks.on_exceeded = [&](const Request&, const Result&) { ++exceeded; };
  engine.set_hooks("calls", hooks);

  REQUIRE(engine.consume("calls", "app").allowed);
  // Denied at first, then allowed after one sleep: nothing counted.
  CHECK(engine.acquire("calls", "app", 1, milliseconds(5000)).allowed);
  CHECK(engine.owner_usage("calls", "app").denied == 0);
  CHECK(exceeded == 0);

  // No time to wait: the refusal is final, counted once, and on_exceeded is called once.
  const Result refused = engine.acquire("calls", "app", 1, milliseconds(0));
  CHECK_FALSE(refused.allowed);
  CHECK(refused.reason == Reason::rate_limited);
  CHECK(refused.denied == 1);
  CHECK(engine.owner_usage("calls", "app").denied == 1);
  CHECK(exceeded == 1);

  // A cost that never fits: refused at once, counted once.
  CHECK(engine.acquire("calls", "app", 2, milliseconds(5000)).retry_after_ms == -1);
  CHECK(engine.owner_usage("calls", "app").denied == 2);
  CHECK(exceeded == 2);
}

TEST_CASE("acquire: waiting attempts start no block, a final refusal does",
          "[acquire][backends][lockout]") {
  const Backend backend = each_backend();
  CAPTURE(backend);
  TestDatabase db(backend);
  Engine engine = Engine::open(db.location());
  Limit login = make_limit("login", Algorithm::fixed_window, 1, 300);
  login.block = milliseconds(60'000);
  engine.define(login);

  REQUIRE(engine.consume("login", "patient").allowed);
  // The attempts within the window are denied as rate_limited, which would block for a
  // minute: they are undone, and the wait is to the window's end.
  CHECK(engine.acquire("login", "patient", 1, milliseconds(5000)).allowed);
  const Usage patient = engine.owner_usage("login", "patient");
  CHECK(patient.denied == 0);
  CHECK_FALSE(patient.blocked_until_ms.has_value());

  REQUIRE(engine.consume("login", "hasty").allowed);
  const Result refused = engine.acquire("login", "hasty", 1, milliseconds(0));
  CHECK(refused.reason == Reason::rate_limited);
  CHECK(refused.retry_after_ms > 50'000);  // the block it started
  const Usage hasty = engine.owner_usage("login", "hasty");
  CHECK(hasty.denied == 1);
  CHECK(hasty.blocked_until_ms.has_value());
}

TEST_CASE("acquire_all waits for the slowest limit, all or nothing, counting nothing meanwhile",
          "[acquire][backends]") {
  const Backend backend = each_backend();
  CAPTURE(backend);
  TestDatabase db(backend);
  Engine engine = Engine::open(db.location());
  engine.define(make_bucket("fast", 1, 200, 1));
  engine.define(make_bucket("slow", 1, 600, 1));
  REQUIRE(engine.consume_all({"fast", "slow"}, "app").result.allowed);

  const Decision granted = engine.acquire_all({"fast", "slow"}, "app", 1, milliseconds(5000));
  CHECK(granted.result.allowed);
  // One unit taken from each, once; no denial anywhere.
  for (const char* limit : {"fast", "slow"}) {
    CAPTURE(limit);
    const Usage usage = engine.owner_usage(limit, "app");
    CHECK(usage.used == 1);
    CHECK(usage.denied == 0);
  }

  // No time: the slowest limit decides and alone counts the denial; nothing is taken.
  const Decision refused = engine.acquire_all({"fast", "slow"}, "app", 1, milliseconds(0));
  CHECK_FALSE(refused.result.allowed);
  CHECK(refused.limit == "slow");
  CHECK(engine.owner_usage("slow", "app").denied == 1);
  CHECK(engine.owner_usage("fast", "app").denied == 0);

  // An owner per limit.
  const Decision charged =
      engine.acquire_all({{"fast", "ip:1"}, {"slow", "key:1"}}, 1, milliseconds(0));
  CHECK(charged.result.allowed);
  CHECK(engine.owner_usage("fast", "ip:1").used == 1);
  CHECK(engine.owner_usage("slow", "key:1").used == 1);
}

TEST_CASE("acquire_all: bad input is refused, saying what to do, and changes nothing",
          "[acquire][backends]") {
  const Backend backend = each_backend();
  CAPTURE(backend);
  TestDatabase db(backend);
  Engine engine = Engine::open(db.location());
  engine.define(make_limit("a", Algorithm::sliding_log, 1, 1000));
  engine.define(make_limit("b", Algorithm::sliding_log, 1, 1000));
  const std::string before = db.dump();
  const auto refused = [&](auto&& call, ErrorCode code, const std::string& words) {
    try {
      call();
      FAIL("no error");
    } catch (const Error& error) {
      CHECK(error.code() == code);
      CHECK(std::string(error.what()).find(words) != std::string::npos);
    }
  };
  refused([&] { engine.acquire_all(std::vector<std::string_view>{}, "u", 1, milliseconds(10)); },
          ErrorCode::invalid_argument, "at least one limit");
  refused(
      [&] {
        engine.acquire_all({"a", "a"}, "u", 1, milliseconds(10));
      },
      ErrorCode::invalid_argument, "named twice");
  refused(
      [&] {
        engine.acquire_all({"a", "b"}, "u", 1, milliseconds(-1));
      },
      ErrorCode::invalid_argument, "max_wait");
  refused(
      [&] {
        engine.acquire_all({"a", "b"}, "", 1, milliseconds(10));
      },
      ErrorCode::invalid_argument, "owner");
  refused(
      [&] {
        engine.acquire_all({"a", "b"}, "u", 0, milliseconds(10));
      },
      ErrorCode::invalid_argument, "cost");
  refused(
      [&] {
        engine.acquire_all({"a", "nope"}, "u", 1, milliseconds(10));
      },
      ErrorCode::unknown_limit, "nope");
  refused([&] { engine.acquire("a", "u", 1, milliseconds(-5)); }, ErrorCode::invalid_argument,
          "max_wait");
  CHECK(db.dump() == before);
}

TEST_CASE("quotactl consume a,b --wait waits for the slowest limit",
          "[acquire][backends][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(backend);
  TestDatabase db(backend);
  {
    Engine engine = Engine::open(db.location());
    engine.define(make_bucket("fast", 1, 200, 1));
    engine.define(make_bucket("slow", 1, 400, 1));
    REQUIRE(engine.consume_all({"fast", "slow"}, "u").result.allowed);
  }
  const QuotactlRun waited =
      run_quotactl({"--db", db.location(), "--json", "consume", "fast,slow", "u", "--wait", "5s"});
  INFO(waited.err);
  CHECK(waited.status == 0);
  const nlohmann::json answer = nlohmann::json::parse(waited.out);
  CHECK(answer["allowed"] == true);
  CHECK(answer["denied"] == 0);

  // Bad input, before anything runs: --wait with --now, a bad duration.
  const std::string before = db.dump();
  const QuotactlRun fixed = run_quotactl({"--db", db.location(), "--now", "1700000000000",
                                          "consume", "fast,slow", "u", "--wait", "5s"});
  CHECK(fixed.status == 2);
  CHECK(fixed.err.find("--now") != std::string::npos);
  const QuotactlRun bad =
      run_quotactl({"--db", db.location(), "consume", "fast,slow", "u", "--wait", "soon"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--wait") != std::string::npos);
  CHECK(db.dump() == before);
}

}  // namespace
}  // namespace quota::test
