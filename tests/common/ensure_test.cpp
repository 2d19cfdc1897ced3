// Engine::ensure (docs/embedding.md, "Defining limits at start-up"): it defines a limit only
// when none of that name exists and returns the stored definition, so that an application
// that declares its limits at start-up never undoes what an operator changed since.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "backend.h"
#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

TEST_CASE("ensure creates a missing limit and returns it", "[ensure][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  Limit bucket = make_bucket("upload", 5, 60'000, 8);
  bucket.block = std::chrono::milliseconds(30'000);
  for (const Limit& limit :
       {make_limit("send", Algorithm::sliding_log, 10, 60'000), bucket,
        calendar_limit("export", 100, Calendar::month, std::chrono::minutes(9 * 60), T)}) {
    CAPTURE(limit.name);
    CHECK(f.engine.ensure(limit) == limit);
    CHECK(f.engine.get(limit.name) == limit);
  }
  f.clock.set(T);
  CHECK(f.engine.consume("upload", "u", 8).allowed);
}

TEST_CASE("ensure leaves a stored limit and its state exactly as they are, and returns it",
          "[ensure][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.clock.set(T);
  // What the application declares, and what an operator changed it to since.
  const Limit declared = make_limit("send", Algorithm::sliding_log, 10, 60'000);
  Limit operated = make_limit("send", Algorithm::fixed_window, 50, 3'600'000);
  operated.block = std::chrono::milliseconds(1000);
  f.engine.define(operated);
  REQUIRE(f.engine.consume("send", "u", 7).allowed);
  const std::string before = f.database.dump();

  CHECK(f.engine.ensure(declared) == operated);
  CHECK(f.database.dump() == before);
  CHECK(f.engine.get("send") == operated);
  // The engine decides by the stored limit (a fixed window of 50 with 7 used), not by the
  // declared one: its statements' kind was taken from what ensure found.
  const Result answer = f.engine.consume("send", "u");
  CHECK(answer.allowed);
  CHECK(answer.remaining == 42);
  CHECK(answer.reset_at_ms == (T / 3'600'000 + 1) * 3'600'000);
}

TEST_CASE("ensure after quotactl limit set: the operator's numbers win", "[ensure][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.ensure(make_limit("send", Algorithm::sliding_log, 2, 60'000));
  REQUIRE(run_quotactl(
              {"--db", f.database.location(), "limit", "set", "send", "--max", "20", "--per", "1h"})
              .status == 0);
  // The application restarts and declares its limits again.
  Engine restarted = Engine::open(f.database.location(), options_with(f.clock));
  const Limit stored = restarted.ensure(make_limit("send", Algorithm::sliding_log, 2, 60'000));
  CHECK(stored.maximum == 20);
  CHECK(stored.period == std::chrono::hours(1));
  CHECK(restarted.get("send")->maximum == 20);
}

TEST_CASE("ensure refuses an invalid limit, stored or not, and changes nothing",
          "[ensure][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(make_limit("send", Algorithm::sliding_log, 10, 60'000));
  const std::string before = f.database.dump();
  Limit bad_name = make_limit("send!", Algorithm::sliding_log, 10, 60'000);
  Limit no_maximum = make_limit("send", Algorithm::sliding_log, 0, 60'000);
  Limit burst_on_log = make_limit("other", Algorithm::sliding_log, 10, 60'000);
  burst_on_log.burst = 20;
  for (const Limit& limit : {bad_name, no_maximum, burst_on_log}) {
    CAPTURE(limit.name, limit.maximum);
    try {
      f.engine.ensure(limit);
      FAIL("ensure took an invalid limit");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::invalid_argument);
    }
  }
  CHECK(f.database.dump() == before);
}

}  // namespace
}  // namespace quota::test
