// The same engine on every backend (docs/sharing-limits-across-hosts.md): random sequences of
// every operation and policy give the same answers on SQLite and on PostgreSQL; PostgreSQL
// admits exactly the maximum to many processes and threads at once.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <random>
#include <thread>
#include <vector>

#include "backend.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

struct Step {
  int operation;  // 0 consume, 1 check, 2 record, 3 refund, 4 reset
  std::string owner;
  std::int64_t cost;
  std::int64_t now;
};

std::string describe(const Result& result) {
  return std::to_string(result.allowed) + " " + std::string(to_string(result.reason)) + " " +
         std::to_string(result.remaining) + " " + std::to_string(result.retry_after_ms) + " " +
         std::to_string(result.reset_at_ms) + " " + std::to_string(result.denied) + " " +
         std::to_string(result.shadow_denied);
}

Result apply(Engine& engine, const std::string& limit, const Step& step) {
  switch (step.operation) {
    case 0:
      return engine.consume(limit, step.owner, step.cost);
    case 1:
      return engine.check(limit, step.owner, step.cost);
    case 2:
      return engine.record(limit, step.owner, step.cost);
    case 3:
      return engine.refund(limit, step.owner, step.cost);
    default:
      return engine.reset(limit, step.owner);
  }
}

TEST_CASE("every operation answers the same on SQLite and on PostgreSQL", "[slow][backends]") {
  const Algorithm algorithm =
      GENERATE(from_range(std::begin(kAllAlgorithms), std::end(kAllAlgorithms)));
  const bool shadow = GENERATE(false, true);
  CAPTURE(algorithm, shadow);
  TestDatabase sqlite(Backend::sqlite);
  TestDatabase postgresql(Backend::postgresql);
  ManualClock clock;
  Engine on_sqlite = Engine::open(sqlite.location(), options_with(clock));
  Engine on_postgresql = Engine::open(postgresql.location(), options_with(clock));

  Limit limit = algorithm == Algorithm::token_bucket ? make_bucket("l", 4, 1000, 6)
                                                     : make_limit("l", algorithm, 5, 1000);
  limit.shadow = shadow;
  for (Engine* engine : {&on_sqlite, &on_postgresql}) {
    engine->define(limit);
    engine->set_override({"l", "big", Policy::maximum, 9, std::nullopt});
    engine->set_override({"l", "free", Policy::exempt, std::nullopt, std::nullopt});
    engine->set_override({"*", "banned", Policy::deny, std::nullopt, std::nullopt});
  }
  std::mt19937_64 random(static_cast<std::uint64_t>(algorithm) * 2 + shadow);
  const std::vector<std::string> owners = {"a", "b", "big", "free", "banned"};
  std::int64_t now = T;
  for (int i = 0; i < 600; ++i) {
    Step step;
    const int kind = static_cast<int>(random() % 20);
    step.operation = kind < 11 ? 0 : kind < 14 ? 1 : kind < 16 ? 2 : kind < 19 ? 3 : 4;
    step.owner = owners[random() % owners.size()];
    step.cost = 1 + static_cast<std::int64_t>(random() % 3) + (random() % 25 == 0 ? 8 : 0);
    // Mostly forward by up to 400 ms; now and then back in time (the clock rule).
    now += random() % 10 == 0 ? -static_cast<std::int64_t>(random() % 700)
                              : static_cast<std::int64_t>(random() % 400);
    step.now = now;
    clock.set(now);
    CAPTURE(i, step.operation, step.owner, step.cost, step.now);
    const Result expected = apply(on_sqlite, "l", step);
    const Result actual = apply(on_postgresql, "l", step);
    REQUIRE(describe(actual) == describe(expected));
  }
  const auto usage_of = [](Engine& engine) {
    std::string text;
    for (const Usage& row : engine.usage("l")) {
      text += row.owner + " " + std::to_string(row.used) + " " + std::to_string(row.remaining) +
              " " + std::to_string(row.denied) + " " + std::to_string(row.reset_at_ms) + " " +
              std::to_string(row.shadow_denied) + " " + std::to_string(row.capacity) + "\n";
    }
    return text;
  };
  CHECK(usage_of(on_postgresql) == usage_of(on_sqlite));
}

TEST_CASE("gc deletes the same state on both backends and changes no answer", "[backends][gc]") {
  std::vector<std::string> answers[2];
  std::int64_t deleted[2] = {0, 0};
  std::int64_t left[2] = {0, 0};
  for (const Backend backend : kAllBackends) {
    const int b = backend == Backend::sqlite ? 0 : 1;
    EngineOn f(backend);
    f.clock.set(T);
    for (const Algorithm algorithm : kAllAlgorithms) {
      f.engine.define(algorithm == Algorithm::token_bucket
                          ? make_bucket(std::string(to_string(algorithm)), 4, 1000)
                          : make_limit(std::string(to_string(algorithm)), algorithm, 4, 1000));
    }
    std::mt19937_64 random(11);
    for (int i = 0; i < 400; ++i) {
      f.clock.advance(static_cast<std::int64_t>(random() % 60));
      const Algorithm algorithm = kAllAlgorithms[random() % 4];
      const std::string owner = "o" + std::to_string(random() % 30);
      if (random() % 5 == 0) {
        f.engine.record(std::string(to_string(algorithm)), owner, 1);
      } else {
        f.engine.consume(std::string(to_string(algorithm)), owner, 1);
      }
    }
    f.clock.advance(1500);  // most state is over by now, not all
    for (int i = 0; i < 5; ++i) f.engine.consume("sliding_log", "late" + std::to_string(i));
    std::vector<std::string> before;
    for (const Algorithm algorithm : kAllAlgorithms) {
      for (int o = 0; o < 30; ++o) {
        before.push_back(
            describe(f.engine.check(std::string(to_string(algorithm)), "o" + std::to_string(o))));
      }
    }
    deleted[b] = f.engine.gc(7);  // batches of 7 rows
    left[b] = f.database.integer(
        "SELECT (SELECT count(*) FROM quota_log) + (SELECT count(*) FROM quota_log_owners) + "
        "(SELECT count(*) FROM quota_windows) + (SELECT count(*) FROM quota_buckets)");
    for (const Algorithm algorithm : kAllAlgorithms) {
      for (int o = 0; o < 30; ++o) {
        answers[b].push_back(
            describe(f.engine.check(std::string(to_string(algorithm)), "o" + std::to_string(o))));
      }
    }
    CHECK(answers[b] == before);
  }
  CHECK(deleted[0] > 0);
  CHECK(deleted[1] == deleted[0]);
  CHECK(left[1] == left[0]);
  CHECK(answers[1] == answers[0]);
}

TEST_CASE(
    "PostgreSQL admits exactly the maximum to many processes and threads at once, and keeps "
    "every record",
    "[slow][backends][concurrency]") {
  const Algorithm algorithm =
      GENERATE(from_range(std::begin(kAllAlgorithms), std::end(kAllAlgorithms)));
  CAPTURE(algorithm);
  TestDatabase database(Backend::postgresql);
  constexpr std::int64_t kMaximum = 60;
  {
    Engine engine = Engine::open(database.location());
    // A period far longer than the test: nothing expires or refills while it runs.
    engine.define(algorithm == Algorithm::token_bucket
                      ? make_bucket("hot", kMaximum, 86'400'000)
                      : make_limit("hot", algorithm, kMaximum, 86'400'000));
  }
  constexpr int kProcesses = 4;
  constexpr int kThreads = 4;
  constexpr int kAttempts = 36;  // per thread and owner kind: 576 on "one", 48 on each of twelve
  std::vector<int> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(fork_child([&] {
      std::atomic<int> failures{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          try {
            Engine engine = Engine::open(database.location());
            for (int i = 0; i < kAttempts; ++i) {
              engine.consume("hot", "one");
              engine.consume("hot", "owner-" + std::to_string(i % 12));
              engine.record("hot", "recorded");
            }
          } catch (...) {
            ++failures;
          }
        });
      }
      for (auto& thread : threads) thread.join();
      return failures.load() == 0 ? 0 : 1;
    }));
  }
  for (int child : children) REQUIRE(wait_child(child) == 0);

  Engine engine = Engine::open(database.location());
  // One owner took 576 attempts: exactly the maximum was admitted and every denial counted.
  const Usage one = engine.owner_usage("hot", "one");
  CHECK(one.used == kMaximum);
  CHECK(one.denied == kProcesses * kThreads * kAttempts - kMaximum);
  // Every record is kept, far past the maximum.
  CHECK(engine.owner_usage("hot", "recorded").used == kProcesses * kThreads * kAttempts);
  // Twelve owners took 48 attempts each: every one admitted (48 <= 60) and recorded.
  for (int o = 0; o < 12; ++o) {
    const Usage row = engine.owner_usage("hot", "owner-" + std::to_string(o));
    CHECK(row.used == kProcesses * kThreads * kAttempts / 12);
    CHECK(row.denied == 0);
  }
}

}  // namespace
}  // namespace quota::test
