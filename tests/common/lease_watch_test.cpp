// Engine::watch on a concurrency limit (SPEC §13) on every backend and on an in-memory
// database: the owner's usage (used = units held, remaining) on acquire, renew (used unchanged,
// the last expiry moved), release, a denied acquire, and each lease's expiry by the clock to
// the millisecond; a watch of another owner sees none of it.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "quota/lease.h"
#include "support.h"
#include "support/watch_seen.h"

namespace quota::test {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t T = 1'700'000'000'000;

Limit jobs() {
  Limit limit;
  limit.name = "jobs";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = 3;
  limit.period = 10s;  // each lease's TTL
  return limit;
}

// The watch's last usage of `owner` is `used` held, `remaining` free, the last lease ending at
// `last_expiry` (ms after T).
auto holding(std::int64_t used, std::int64_t remaining, std::int64_t last_expiry) {
  return [=](const Usage& u) {
    return u.owner == "u" && u.used == used && u.remaining == remaining &&
           u.reset_at_ms == T + last_expiry;
  };
}

// A change that time alone makes: not seen at `at` − 1 (after six looks of the watch), seen
// at `at`.
void expect_expiry(ManualClock& clock, Seen& seen, std::int64_t at, std::int64_t used) {
  CAPTURE(at, used);
  clock.set(T + at - 1);
  std::this_thread::sleep_for(60ms);
  CHECK_FALSE(seen.wait_used("u", used, 0ms));
  clock.set(T + at);
  REQUIRE(seen.wait_used("u", used));
}

void watch_leases(const std::string& location) {
  ManualClock clock;
  clock.set(T);
  Options options = options_with(clock);
  options.watch_interval = 10ms;
  Engine engine = Engine::open(location, options);
  engine.define(jobs());

  Seen seen;
  Seen elsewhere;
  Watch watch = engine.watch("jobs", "u", [&](const Usage& u) { seen.add(u); });
  Watch other = engine.watch("jobs", "v", [&](const Usage& u) { elsewhere.add(u); });
  REQUIRE(seen.wait_for([](const Usage& u) { return u.used == 0 && u.remaining == 3; }));
  REQUIRE(elsewhere.wait_used("v", 0));
  CHECK(seen.all().front().capacity == 3);

  // Acquire: the units held, and the lease's expiry as the owner's reset.
  const LeaseResult first = engine.acquire_lease("jobs", "u", 2);
  REQUIRE(first.allowed);
  REQUIRE(seen.wait_for(holding(2, 1, 10'000)));
  clock.set(T + 1000);
  const LeaseResult second = engine.acquire_lease("jobs", "u");
  REQUIRE(second.allowed);
  REQUIRE(seen.wait_for(holding(3, 0, 11'000)));

  // A denied acquire changes nothing held, and is counted.
  CHECK_FALSE(engine.acquire_lease("jobs", "u").allowed);
  REQUIRE(seen.wait_for([](const Usage& u) { return u.used == 3 && u.denied == 1; }));

  // Renew: nothing more held, the last expiry moves.
  clock.set(T + 2000);
  REQUIRE(engine.renew_lease(first.lease).allowed);  // first now ends at T + 12 s
  REQUIRE(seen.wait_for(holding(3, 0, 12'000)));

  // Release: its units are free at once.
  REQUIRE(engine.release_lease(second.lease));
  REQUIRE(seen.wait_for(holding(2, 1, 12'000)));
  clock.set(T + 3000);
  REQUIRE(engine.acquire_lease("jobs", "u").allowed);  // ends at T + 13 s
  REQUIRE(seen.wait_for(holding(3, 0, 13'000)));

  // Expiry by the clock alone, at the millisecond of each lease's end.
  seen.clear();
  expect_expiry(clock, seen, 12'000, 1);
  expect_expiry(clock, seen, 13'000, 0);
  // A renewal of an expired lease changes nothing.
  CHECK_FALSE(engine.renew_lease(first.lease).allowed);
  CHECK_FALSE(engine.release_lease(first.lease));
  std::this_thread::sleep_for(60ms);
  for (const Usage& usage : seen.all()) CHECK(usage.owner == "u");
  CHECK(seen.count() == 2);  // the two expiries, nothing more

  // The other owner's watch saw its first usage and nothing of "u".
  CHECK(elsewhere.count() == 1);
  CHECK(watch.active());
  CHECK(other.active());
  CHECK_FALSE(watch.failure());
}

TEST_CASE("a watch on a concurrency limit sees acquire, renew, release and expiry",
          "[watch][lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  watch_leases(database.location());
}

// No other connection can write to an in-memory database, so the watch learns of a change
// only from the Engine that makes it: renew and release must say so as acquire does.
TEST_CASE("a watch on a concurrency limit of an in-memory database sees renew and release",
          "[watch][lease]") {
  watch_leases(":memory:");
}

}  // namespace
}  // namespace quota::test
