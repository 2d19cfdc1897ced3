// The clock rule (docs/concepts.md) for every algorithm: an operation arriving with a time
// earlier than the latest its owner's state has seen is evaluated at that latest time, whether the
// clock went back by less or by more than one period (or to the epoch). Each case runs the
// same operations on two engines, one whose clock went back and one whose clock stayed at
// the latest time: every answer, and the state afterwards, must be the same.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;
constexpr std::int64_t kPeriod = 1'000;

Limit limit_for(Algorithm algorithm) {
  // A token bucket of burst 4 refilling 3 per period; the others 3 per period.
  return algorithm == Algorithm::token_bucket ? make_bucket("l", 3, kPeriod, 4)
                                              : make_limit("l", algorithm, 3, kPeriod);
}

// `steady`'s answer as a caller `lag` ms behind is told it: a finite wait is measured from
// the caller's own time (docs/concepts.md), `lag` longer; everything else is the same.
Result from_behind(Result steady, std::int64_t lag) {
  if (steady.retry_after_ms > 0) steady.retry_after_ms += lag;
  return steady;
}

struct Twin {
  ManualClock clock;
  Engine engine = Engine::open(":memory:", options_with(clock));
};

TEST_CASE("a clock that goes back is answered as at the latest time seen, for every algorithm",
          "[clock]") {
  const Algorithm algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                       Algorithm::sliding_window, Algorithm::token_bucket);
  // Back by less than a period, by exactly one, by several and a bit, and to the epoch.
  const std::int64_t back = GENERATE(kPeriod / 3, kPeriod, 5 * kPeriod + 7, T + 250);
  CAPTURE(to_string(algorithm), back);
  Twin behind, steady;
  for (Twin* twin : {&behind, &steady}) {
    twin->engine.define(limit_for(algorithm));
    // Usage spread over the current and previous period, so that every algorithm has
    // something that time would change (events expiring, windows, tokens).
    for (const auto& [at, cost] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {T - 700, 1}, {T + 100, 1}, {T + 250, 2}}) {
      twin->clock.set(at);
      twin->engine.consume("l", "u", cost);
    }
  }
  const std::int64_t latest = T + 250;
  behind.clock.set(latest - back);
  steady.clock.set(latest);
  // Every operation that reads or writes the owner's state, including denials and a record
  // beyond the limit, answers exactly as at the latest time, but for a wait, which is
  // measured from the caller's time.
  CHECK(behind.engine.check("l", "u") == from_behind(steady.engine.check("l", "u"), back));
  CHECK(behind.engine.consume("l", "u") == from_behind(steady.engine.consume("l", "u"), back));
  CHECK(behind.engine.consume("l", "u", 2) ==
        from_behind(steady.engine.consume("l", "u", 2), back));
  CHECK(behind.engine.record("l", "u", 3) == from_behind(steady.engine.record("l", "u", 3), back));
  const Result denied = behind.engine.consume("l", "u");
  CHECK_FALSE(denied.allowed);
  const Result denied_steady = steady.engine.consume("l", "u");
  CHECK(denied == from_behind(denied_steady, back));
  // The wait at the latest time, plus the time the caller is behind it.
  CHECK(denied_steady.retry_after_ms > 0);
  CHECK(denied.retry_after_ms == denied_steady.retry_after_ms + back);
  CHECK(behind.engine.usage("l").at(0).used == steady.engine.usage("l").at(0).used);

  // The clock comes forward again: both agree at every later moment, so going back granted
  // nothing extra.
  for (const std::int64_t later : {latest + 1, latest + kPeriod / 2, latest + 2 * kPeriod}) {
    behind.clock.set(later);
    steady.clock.set(later);
    CAPTURE(later - latest);
    CHECK(behind.engine.check("l", "u") == steady.engine.check("l", "u"));
    CHECK(behind.engine.consume("l", "u") == steady.engine.consume("l", "u"));
  }
}

TEST_CASE("check never moves the remembered time, a denied consume does", "[clock]") {
  const Algorithm algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                       Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(algorithm));
  Twin twin;
  twin.engine.define(limit_for(algorithm));
  twin.clock.set(T);
  twin.engine.consume("l", "u");
  // A check from the future does not drag the owner's time forward...
  twin.clock.set(T + 10 * kPeriod);
  CHECK(twin.engine.check("l", "u").remaining == limit_for(algorithm).capacity());
  twin.clock.set(T);
  Model model;
  model.define(limit_for(algorithm));
  model.consume("l", "u", 1, T);
  CHECK(twin.engine.check("l", "u") == model.check("l", "u", 1, T));
  // ...but a consume from the future does, even when it is denied.
  twin.clock.set(T + 10 * kPeriod);
  const std::int64_t too_much = limit_for(algorithm).capacity();
  twin.engine.consume("l", "u", too_much);
  twin.engine.consume("l", "u", too_much);  // denied: the first one used everything
  model.consume("l", "u", too_much, T + 10 * kPeriod);
  model.consume("l", "u", too_much, T + 10 * kPeriod);
  twin.clock.set(T);
  CHECK(twin.engine.check("l", "u") == model.check("l", "u", 1, T));
  // The wait at the remembered time, told from the caller's: 10 periods longer.
  CHECK(twin.engine.check("l", "u").retry_after_ms ==
        model.check("l", "u", 1, T + 10 * kPeriod).retry_after_ms + 10 * kPeriod);
}

TEST_CASE("reset forgets the remembered time: an earlier time then counts as it is", "[clock]") {
  const Algorithm algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                       Algorithm::sliding_window, Algorithm::token_bucket);
  const std::int64_t back = GENERATE(kPeriod / 3, 5 * kPeriod + 7);
  CAPTURE(to_string(algorithm), back);
  Twin twin, fresh;
  twin.engine.define(limit_for(algorithm));
  fresh.engine.define(limit_for(algorithm));
  twin.clock.set(T);
  twin.engine.consume("l", "u", 3);
  twin.engine.reset("l", "u");
  twin.clock.set(T - back);
  fresh.clock.set(T - back);
  CHECK(twin.engine.consume("l", "u", 2) == fresh.engine.consume("l", "u", 2));
  CHECK(twin.engine.check("l", "u") == fresh.engine.check("l", "u"));
}

}  // namespace
}  // namespace quota::test
