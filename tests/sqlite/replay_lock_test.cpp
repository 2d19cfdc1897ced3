// A replay of an idempotency key (SPEC §14) is answered from the key's row alone: it needs
// no write lock, so it answers at once while another connection holds SQLite's, where a
// request that decides waits for the lock (and is busy after Options::busy_timeout).
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "quota/lease.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

TEST_CASE("a replay answers while another connection holds the write lock",
          "[idempotency][sqlite][busy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  clock.set(T);
  Options options = options_with(clock);
  options.busy_timeout = std::chrono::milliseconds(100);
  Engine engine = Engine::open(path, options);
  engine.define(make_limit("send", Algorithm::fixed_window, 5, 60'000));
  Limit jobs = make_limit("jobs", Algorithm::concurrency, 2, 10'000);
  engine.define(jobs);

  const Result first = engine.consume("send", "u", 2, "k1");
  REQUIRE(first.allowed);
  REQUIRE_FALSE(first.replayed);
  const LeaseResult lease = engine.acquire_lease("jobs", "u", 1, "k2");
  REQUIRE(lease.allowed);
  const Decision both = engine.consume_all({"send", "jobs"}, "v", 1, "k4");
  REQUIRE(both.result.allowed);
  REQUIRE(both.leases.size() == 1);

  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");  // the write lock, until the rollback below
  clock.set(T + 1000);
  const Result again = engine.consume("send", "u", 2, "k1");
  CHECK(again.replayed);
  CHECK(again.allowed);
  CHECK(again.remaining == first.remaining);
  CHECK(again.reset_at_ms == first.reset_at_ms);
  const LeaseResult lease_again = engine.acquire_lease("jobs", "u", 1, "k2");
  CHECK(lease_again.replayed);
  CHECK(lease_again.lease == lease.lease);
  CHECK(lease_again.expires_at_ms == lease.expires_at_ms);
  const Decision both_again = engine.consume_all({"send", "jobs"}, "v", 1, "k4");
  CHECK(both_again.result.replayed);
  CHECK(both_again.result.remaining == both.result.remaining);
  REQUIRE(both_again.leases.size() == 1);
  CHECK(both_again.leases.front().lease == both.leases.front().lease);
  // The same key for another request is still a conflict, with nothing changed.
  CHECK_THROWS_MATCHES(engine.consume("send", "u", 1, "k1"), Error,
                       Catch::Predicate<Error>([](const Error& e) {
                         return e.code() == ErrorCode::idempotency_conflict;
                       }));
  // A new key decides, so it waits for the lock: the holder really holds it.
  CHECK_THROWS_MATCHES(
      engine.consume("send", "u", 1, "k3"), Error,
      Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::busy; }));
  holder.exec("ROLLBACK");

  // The replays charged nothing: of "send", 2 of 5 used by u and 1 by v; of "jobs", one
  // lease each.
  CHECK(engine.check("send", "u").remaining == 3);
  CHECK(engine.check("jobs", "u").remaining == 1);
  CHECK(engine.check("send", "v").remaining == 4);
  CHECK(engine.check("jobs", "v").remaining == 1);
}

}  // namespace
}  // namespace quota::test
