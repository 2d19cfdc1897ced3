// Engine::now: the time the engine's operations are evaluated at, which quotactl's countdowns
// count from (with --server-clock, the database's time rather than the local clock).
#include <catch2/catch.hpp>

#include "backend.h"
#include "support.h"

namespace quota::test {
namespace {

TEST_CASE("Engine::now is the engine's clock, or the database's with server_clock",
          "[clock][backends]") {
  const Backend backend = each_backend();
  CAPTURE(backend);
  TestDatabase db(backend);
  ManualClock clock;
  clock.set(1'000);  // far from any real time
  {
    Engine engine = Engine::open(db.location(), options_with(clock));
    CHECK(engine.now() == 1'000);
  }
  Options options = options_with(clock);
  options.server_clock = true;
  Engine engine = Engine::open(db.location(), options);
  // The database's clock: this machine's (or the test server's, on this machine), not the
  // engine's clock.
  const std::int64_t before = system_clock_ms();
  const std::int64_t now = engine.now();
  const std::int64_t after = system_clock_ms();
  CHECK(now >= before - 1);
  CHECK(now <= after + 1);
}

}  // namespace
}  // namespace quota::test
