// A calendar limit redefined while owners count (src/statements.cpp, kCalendarInput): the
// window an owner counts keeps its end unless it is longer than the new unit's longest window.
#include <catch2/catch.hpp>
#include <chrono>

#include "backend.h"

namespace quota::test {
namespace {

constexpr std::int64_t kDay = 86'400'000;
constexpr std::int64_t T = 1'764'547'140'000;          // 2026-11-30T23:59:00Z
constexpr std::int64_t kDecember = 1'764'547'200'000;  // 2026-12-01T00:00:00Z
constexpr std::int64_t kNextYear = 1'767'225'600'000;  // 2027-01-01T00:00:00Z
constexpr std::int64_t kNine = 9 * 60 * 60 * 1000;     // +09:00 in ms

TEST_CASE("a redefined calendar limit keeps the window an owner counts, up to the new unit",
          "[calendar]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  Engine& engine = on.engine;
  on.clock.set(T);

  SECTION("another offset applies from the end of the window being counted") {
    engine.define(calendar_limit("api", 1, Calendar::month));
    CHECK(engine.consume("api", "u").reset_at_ms == kDecember);
    // At +09:00, T is already 1 December 08:59: December's window would end on 1 January at
    // 00:00 +09:00. The owner's November window still holds until its end.
    engine.define(calendar_limit("api", 1, Calendar::month, std::chrono::minutes(9 * 60)));
    const Result denied = engine.consume("api", "u");
    CHECK(denied.reason == Reason::rate_limited);
    CHECK(denied.reset_at_ms == kDecember);
    CHECK(denied.retry_after_ms == kDecember - T);
    on.clock.set(kDecember);
    const Result december = engine.consume("api", "u");
    CHECK(december.allowed);
    CHECK(december.reset_at_ms == kNextYear - kNine);
    // A new owner counts in the new configuration's window at once.
    on.clock.set(T);
    CHECK(engine.consume("api", "v").reset_at_ms == kNextYear - kNine);
  }

  SECTION("a shorter unit ends a longer window at once") {
    engine.define(calendar_limit("api", 1, Calendar::year));
    CHECK(engine.consume("api", "u").reset_at_ms == kNextYear);
    CHECK_FALSE(engine.consume("api", "u").allowed);
    engine.define(calendar_limit("api", 1, Calendar::day));
    const Result today = engine.consume("api", "u");
    CHECK(today.allowed);
    CHECK(today.reset_at_ms == kDecember);
  }

  SECTION("a longer unit keeps the shorter window until its end") {
    engine.define(calendar_limit("api", 1, Calendar::day));
    CHECK(engine.consume("api", "u").reset_at_ms == kDecember);
    engine.define(calendar_limit("api", 1, Calendar::year));
    CHECK(engine.consume("api", "u").reset_at_ms == kDecember);
    on.clock.set(kDecember);
    const Result year = engine.consume("api", "u");
    CHECK(year.allowed);
    CHECK(year.reset_at_ms == kNextYear);
    CHECK(engine.consume("api", "u").retry_after_ms == kNextYear - kDecember);
  }

  SECTION("a period in ms and a calendar unit do not share a count") {
    engine.define(
        {"api", Algorithm::fixed_window, 1, std::chrono::milliseconds(kDay), std::nullopt});
    CHECK(engine.consume("api", "u").allowed);
    engine.define(calendar_limit("api", 1, Calendar::day));
    CHECK(engine.consume("api", "u").allowed);
    CHECK_FALSE(engine.consume("api", "u").allowed);
  }
}

}  // namespace
}  // namespace quota::test
