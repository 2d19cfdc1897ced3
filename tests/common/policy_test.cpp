// Every policy of docs/concepts.md at once against the reference model, on every backend:
// overrides (through the engine or plain SQL), shadow mode, lockouts, refunds, time moving
// both ways. The cases of each policy on a SQLite file are in tests/sqlite/sqlite_policy_test.cpp.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "model.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

using detail::Operation;

constexpr std::int64_t T = 1'700'000'000'000;
constexpr const auto& kAlgorithms = kAllAlgorithms;

Limit limit_of(Algorithm algorithm, std::int64_t maximum = 3, std::int64_t period_ms = 1000) {
  return make_limit(std::string(to_string(algorithm)), algorithm, maximum, period_ms);
}

// Every policy at once against the reference model: random operations (through the engine
// or the plain statements), overrides (through the engine or plain SQL), shadow mode
// switched on and off, time moving both ways. Every field of every answer is compared.
TEST_CASE("policies against the reference model", "[slow][policy][property]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  Model model;
  std::mt19937_64 random(6);
  auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  std::vector<Limit> limits;
  for (const Algorithm algorithm : kAlgorithms) {
    Limit limit = limit_of(algorithm, 4, 50);
    if (algorithm == Algorithm::token_bucket) limit.burst = 5;
    limit.block = std::chrono::milliseconds(25);  // lockouts, switched off and on below
    limits.push_back(limit);
    f.engine.define(limit);
    model.define(limit);
  }
  const std::vector<std::string> owners = {"a", "b", "c"};
  for (int step = 0; step < 4000; ++step) {
    const std::int64_t move = between(0, 9);
    f.clock.advance(move < 4 ? 0 : move < 8 ? between(1, 20) : -between(1, 30));
    const std::int64_t now = f.clock.get();
    Limit& limit = limits[static_cast<std::size_t>(between(0, 3))];
    const std::string& owner = owners[static_cast<std::size_t>(between(0, 2))];
    const std::int64_t cost = between(1, 6);
    const bool by_sql = between(0, 1) == 1;
    const std::int64_t what = between(0, 99);
    CAPTURE(step, limit.name, owner, cost, now - T, what, by_sql);
    if (what < 6) {
      Override override{between(0, 2) == 0 ? "*" : limit.name, owner};
      override.policy = static_cast<Policy>(between(0, 2));
      if (override.policy == Policy::maximum) {
        override.maximum = between(1, 8);
        if (limit.algorithm == Algorithm::token_bucket && override.limit != "*" && between(0, 1)) {
          override.burst = between(1, 9);
        }
      }
      by_sql ? f.raw.exec(plain_override_sql(override)) : f.engine.set_override(override);
      model.set_override(override);
      continue;
    }
    if (what < 9) {
      const std::string which = between(0, 1) ? "*" : limit.name;
      f.engine.remove_override(which, owner);
      model.remove_override(which, owner);
      continue;
    }
    if (what < 11) {
      limit.shadow = !limit.shadow;
      f.engine.define(limit);
      model.define(limit);
      continue;
    }
    if (what < 13) {
      limit.block =
          limit.block ? std::nullopt : std::optional<std::chrono::milliseconds>(between(1, 40));
      f.engine.define(limit);
      model.define(limit);
      continue;
    }
    const Operation operation = what < 50   ? Operation::consume
                                : what < 65 ? Operation::check
                                : what < 75 ? Operation::record
                                : what < 95 ? Operation::refund
                                            : Operation::reset;
    CAPTURE(detail::operation_name(operation));
    Result expected;
    Result actual;
    switch (operation) {
      case Operation::consume:
        expected = model.consume(limit.name, owner, cost, now);
        if (!by_sql) actual = f.engine.consume(limit.name, owner, cost);
        break;
      case Operation::check:
        expected = model.check(limit.name, owner, cost, now);
        if (!by_sql) actual = f.engine.check(limit.name, owner, cost);
        break;
      case Operation::record:
        expected = model.record(limit.name, owner, cost, now);
        if (!by_sql) actual = f.engine.record(limit.name, owner, cost);
        break;
      case Operation::refund:
        expected = model.refund(limit.name, owner, cost, now);
        if (!by_sql) actual = f.engine.refund(limit.name, owner, cost);
        break;
      case Operation::reset:
        expected = model.reset(limit.name, owner, now);
        if (!by_sql) actual = f.engine.reset(limit.name, owner);
        break;
    }
    if (by_sql) {
      actual = f.raw.run(operation, limit.algorithm, limit.name, owner,
                         operation == Operation::reset ? 1 : cost, now);
    }
    REQUIRE(actual == expected);
    if (step % 50 == 0) {
      const std::vector<Usage> engine_usage = f.engine.usage(limit.name);
      const std::vector<Usage> model_usage = model.usage(limit.name, now);
      REQUIRE(engine_usage.size() == model_usage.size());
      for (std::size_t i = 0; i < engine_usage.size(); ++i) {
        CHECK(engine_usage[i].owner == model_usage[i].owner);
        CHECK(engine_usage[i].used == model_usage[i].used);
        CHECK(engine_usage[i].remaining == model_usage[i].remaining);
        CHECK(engine_usage[i].denied == model_usage[i].denied);
        CHECK(engine_usage[i].shadow_denied == model_usage[i].shadow_denied);
        CHECK(engine_usage[i].reset_at_ms == model_usage[i].reset_at_ms);
        CHECK(engine_usage[i].blocked_until_ms == model_usage[i].blocked_until_ms);
      }
    }
  }
}

}  // namespace
}  // namespace quota::test
