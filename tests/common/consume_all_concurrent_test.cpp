// consume_all under contention, on every backend: connections that consume a rate limit and a
// concurrency limit at once (and release every lease they are given) are admitted only when
// every limit was charged and the lease was answered; connections that open afresh for each
// call, as quotactl's processes do, are never refused as busy while the timeout has not
// passed.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "quota/lease.h"

namespace quota::test {
namespace {

void define_rate(Engine& engine, const std::string& name) {
  Limit limit;
  limit.name = name;
  limit.algorithm = Algorithm::fixed_window;
  limit.maximum = 1'000'000;
  limit.period = std::chrono::hours(1);
  engine.define(limit);
}

void define_slots(Engine& engine, const std::string& name, std::int64_t maximum) {
  Limit limit;
  limit.name = name;
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = std::chrono::seconds(30);  // nothing expires during the test
  engine.define(limit);
}

TEST_CASE(
    "consume_all of a rate limit and a concurrency limit from 8 connections admits only "
    "what it charged on both, with the lease",
    "[consume_all][lease][concurrency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    define_rate(setup, "ar");
    define_slots(setup, "ac", 2);
  }
  constexpr int kThreads = 8;
  constexpr int kCalls = 150;
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> denied{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  const auto fail = [&](std::string what) {
    std::lock_guard lock(failures_mutex);
    failures.push_back(std::move(what));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        Engine engine = Engine::open(database.location());
        for (int i = 0; i < kCalls; ++i) {
          const Decision decision = engine.consume_all({"ar", "ac"}, "owner");
          if (!decision.result.allowed) {
            ++denied;
            if (!decision.leases.empty()) fail("a denial answered a lease");
            continue;
          }
          ++admitted;
          if (decision.leases.size() != 1 || decision.leases.front().limit != "ac") {
            fail("an allowance answered " + std::to_string(decision.leases.size()) +
                 " leases, not ac's one");
          }
          for (const LeaseGrant& lease : decision.leases) {
            if (!engine.release_lease(lease.lease)) fail("a lease given was not held");
          }
        }
      } catch (const std::exception& error) {
        fail(error.what());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CAPTURE(failures);
  CHECK(failures.empty());
  CHECK(admitted + denied == kThreads * kCalls);
  CHECK(admitted > 0);
  Engine engine = Engine::open(database.location());
  // Every admission charged the rate limit, and no lease is held by nobody.
  CHECK(engine.owner_usage("ar", "owner").used == admitted);
  CHECK(engine.leases("ac").empty());
  // Only the deciding limit (ac, the one that can deny) counts the denials.
  CHECK(engine.owner_usage("ac", "owner").denied == denied);
  CHECK(engine.owner_usage("ar", "owner").denied == 0);
}

TEST_CASE("consume_all from connections opened afresh for each call is never refused as busy",
          "[consume_all][concurrency][busy]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    define_rate(setup, "ar");
    define_rate(setup, "ar2");
    define_slots(setup, "ac", 1'000'000);
  }
  const std::vector<std::string_view> limits = GENERATE(std::vector<std::string_view>{"ar", "ar2"},
                                                        std::vector<std::string_view>{"ar", "ac"});
  CAPTURE(limits);
  constexpr int kThreads = 8;
  constexpr int kCalls = 12;
  std::atomic<std::int64_t> admitted{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        try {
          // A new connection reads the limits' definitions first, inside the call's
          // transaction, as each quotactl process does.
          Engine engine = Engine::open(database.location());
          if (engine.consume_all(limits, "owner").result.allowed) ++admitted;
        } catch (const std::exception& error) {
          std::lock_guard lock(failures_mutex);
          failures.emplace_back(error.what());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CAPTURE(failures);
  CHECK(failures.empty());
  CHECK(admitted == kThreads * kCalls);
  Engine engine = Engine::open(database.location());
  for (const std::string_view limit : limits) {
    CHECK(engine.owner_usage(limit, "owner").used == admitted);
  }
}

}  // namespace
}  // namespace quota::test
