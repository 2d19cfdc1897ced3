// Fuzz target: random operation sequences, the engine against the reference model.
//
// The input describes one limit and a sequence of operations on it, run on an in-memory
// engine and on the model of tests/model.h side by side; every field of every Result, and
// the usage listing, must agree. Layout (bytes):
//   0  algorithm (mod 4)        1  maximum (1-8)
//   2  period (1, 3, 7, 10, 60 or 1000 ms)
//   3  token bucket burst (0: none, else 1-10)
//   then 3 bytes per operation: what, a, b
//     what % 8: 0-1 consume, 2 check (and compare the usage), 3 record, 4 reset, each for
//                owner a % 3 with cost 1 + b % (capacity + 2);
//               5 the clock moves by (signed) a x (1 + b % 16) ms, backwards too (not below 0);
//               6 redefine the maximum (1 + a % 8) and a bucket's burst (b % 11, 0: none),
//                 keeping the algorithm and its state;
//               7 change the algorithm to a % 4 (the state goes).
// A disagreement aborts with both answers on stderr. The engine is opened once, and each
// input's limit is removed at its end, state and all.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "model.h"
#include "support.h"

namespace {

using quota::Algorithm;
using quota::Limit;
using quota::Result;

constexpr std::int64_t kStart = 1'700'000'000'000;
constexpr std::int64_t kPeriods[] = {1, 3, 7, 10, 60, 1000};
constexpr Algorithm kAlgorithms[] = {Algorithm::sliding_log, Algorithm::fixed_window,
                                     Algorithm::sliding_window, Algorithm::token_bucket};

Limit limit_of(Algorithm algorithm, std::int64_t maximum, std::int64_t period, std::uint8_t burst) {
  Limit limit = quota::test::make_limit("l", algorithm, maximum, period);
  if (algorithm == Algorithm::token_bucket && burst % 11 != 0) limit.burst = burst % 11;
  return limit;
}

void agree(const char* what, std::int64_t now, const Result& engine, const Result& model) {
  if (engine == model) return;
  std::cerr << what << " at " << now - kStart << ": engine " << engine << ", model " << model
            << '\n';
  std::abort();
}

void agree_on_usage(quota::Engine& engine, const quota::test::Model& model, std::int64_t now) {
  const auto actual = engine.usage("l");
  const auto expected = model.usage("l", now);
  if (quota::test::same_usage(actual, expected)) return;
  std::cerr << "usage at " << now - kStart << " disagrees: engine " << actual.size()
            << " rows, model " << expected.size() << '\n';
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  Algorithm algorithm = kAlgorithms[data[0] % 4];
  const std::int64_t period = kPeriods[data[2] % 6];
  Limit limit = limit_of(algorithm, 1 + data[1] % 8, period, data[3]);

  // One engine for every input (migrating a new database for each would cost more than the
  // input itself); each input's limit is removed with its state at the end.
  static quota::test::ManualClock clock;
  static quota::Engine engine = quota::Engine::open(":memory:", quota::test::options_with(clock));
  clock.set(kStart);
  quota::test::Model model;
  engine.define(limit);
  model.define(limit);

  for (std::size_t at = 4; at + 3 <= size && at < 4 + 3 * 400; at += 3) {
    const std::uint8_t what = data[at] % 8, a = data[at + 1], b = data[at + 2];
    const std::string owner = "o" + std::to_string(a % 3);
    const std::int64_t cost = 1 + b % (limit.capacity() + 2);
    const std::int64_t now = clock.get();
    switch (what) {
      case 0:
      case 1:
        agree("consume", now, engine.consume("l", owner, cost),
              model.consume("l", owner, cost, now));
        break;
      case 2:
        agree("check", now, engine.check("l", owner, cost), model.check("l", owner, cost, now));
        agree_on_usage(engine, model, now);
        break;
      case 3:
        agree("record", now, engine.record("l", owner, cost), model.record("l", owner, cost, now));
        break;
      case 4:
        agree("reset", now, engine.reset("l", owner), model.reset("l", owner, now));
        break;
      case 5:
        clock.set(std::max<std::int64_t>(0, now + static_cast<std::int8_t>(a) * (1 + b % 16)));
        break;
      case 6:
        limit = limit_of(algorithm, 1 + a % 8, period, b);
        engine.define(limit);
        model.define(limit);
        break;
      case 7:
        algorithm = kAlgorithms[a % 4];
        limit = limit_of(algorithm, limit.maximum, period, b);
        engine.define(limit);
        model.define(limit);
        break;
    }
  }
  engine.remove("l");
  return 0;
}
