// The SQL interface (docs/sql.md) on every backend: the statements that `quotactl sql` prints,
// run by a plain client of the database (tests/backend.h's PlainClient), interleaved with the
// engine on another connection, give the engine's answers, which are the reference model's.
// tests/sqlite/sqlite_sql_test.cpp holds what is about SQLite's C API and shell.
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

TEST_CASE("plain SQL and the engine, interleaved on one database, give the same answers",
          "[slow][sql][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  Model model;
  std::mt19937_64 random(42);
  auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  Limit bucket = make_limit("tb", Algorithm::token_bucket, 3, 20);
  bucket.burst = 4;
  for (const Limit& limit : {make_limit("log", Algorithm::sliding_log, 3, 20),
                             make_limit("win", Algorithm::fixed_window, 3, 20),
                             make_limit("sw", Algorithm::sliding_window, 3, 20), bucket}) {
    f.engine.define(limit);
    model.define(limit);
  }
  const std::vector<std::string> names = {"log", "win", "sw", "tb"};
  f.clock.set(T);
  for (int step = 0; step < 3000; ++step) {
    const std::int64_t move = between(0, 9);
    f.clock.advance(move < 4 ? 0 : move < 8 ? between(1, 12) : -between(1, 25));
    const std::string limit = names[static_cast<std::size_t>(between(0, 3))];
    const std::string owner = between(0, 1) ? "a" : "b";
    const Algorithm algorithm = model.limit(limit).algorithm;
    const std::int64_t cost = between(1, 5);
    const std::int64_t now = f.clock.get();
    const bool plain_sql = between(0, 1) == 1;
    const auto operation = static_cast<Operation>(between(0, 9) < 8 ? between(0, 2)
                                                  : between(0, 1)   ? 3
                                                                    : 4);
    CAPTURE(step, limit, owner, cost, now - T, detail::operation_name(operation), plain_sql);

    Result expected;
    switch (operation) {
      case Operation::check:
        expected = model.check(limit, owner, cost, now);
        break;
      case Operation::consume:
        expected = model.consume(limit, owner, cost, now);
        break;
      case Operation::record:
        expected = model.record(limit, owner, cost, now);
        break;
      case Operation::reset:
        expected = model.reset(limit, owner, now);
        break;
      case Operation::refund:
        expected = model.refund(limit, owner, cost, now);
        break;
    }
    Result actual;
    if (plain_sql) {
      actual = f.raw.run(operation, algorithm, limit, owner, cost, now);
    } else {
      switch (operation) {
        case Operation::check:
          actual = f.engine.check(limit, owner, cost);
          break;
        case Operation::consume:
          actual = f.engine.consume(limit, owner, cost);
          break;
        case Operation::record:
          actual = f.engine.record(limit, owner, cost);
          break;
        case Operation::reset:
          actual = f.engine.reset(limit, owner);
          break;
        case Operation::refund:
          actual = f.engine.refund(limit, owner, cost);
          break;
      }
    }
    REQUIRE(actual == expected);
    // And a check either way sees the same state.
    REQUIRE(f.raw.run(Operation::check, algorithm, limit, owner, 1, now) ==
            f.engine.check(limit, owner, 1));
  }
}

}  // namespace
}  // namespace quota::test
