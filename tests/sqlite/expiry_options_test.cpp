// What the background expiry (Options::expire_interval) takes of the caller's Options: the
// clock and the connection's settings, never a callback of the caller's (Options::on_error)
// nor the failure policy that would call it.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>

#include "support.h"
#include "support/expiry_pass.h"

namespace quota::test {

using namespace std::chrono_literals;

TEST_CASE("the expiry keeps no copy of the caller's on_error, and fails closed", "[expiry]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  // What the caller's on_error holds: every copy of the callback holds it once more.
  const auto held = std::make_shared<int>(0);
  Options options = options_with(clock);
  options.failure_policy = FailurePolicy::fail_open;
  options.on_error = [held](const Error&) { ++*held; };

  Options quiet = options;
  quiet.expire_interval = 0ms;
  long without_expiry = 0;
  {
    Engine engine = Engine::open(path, quiet);
    without_expiry = held.use_count();
  }
  REQUIRE(without_expiry > 3);  // `held`, `options`', `quiet`'s and the engine's callbacks
  REQUIRE(held.use_count() == 3);

  options.expire_interval = 1ms;
  Engine engine = Engine::open(path, options);
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  REQUIRE(engine.consume("win", "u").allowed);
  clock.advance(10'000);
  await_expiry_pass(engine);
  // The expiry's closure and its engine hold none: the callback cannot be called from there.
  CHECK(held.use_count() == without_expiry);
  CHECK(engine.metrics().gc_deleted == 1);
  CHECK(*held == 0);
}

}  // namespace quota::test
