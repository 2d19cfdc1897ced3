// Expiry without a scheduler on PostgreSQL (Options::expire_interval, docs/operating.md): two
// engines expiring one database in the background while threads consume through both keep
// every answer exact: nothing live is deleted, and what has expired goes. (gc locks the
// state tables all at once or not at all: waiting for one while holding another deadlocked
// with the requests, which the server then aborted.)
#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "support.h"
#include "support/expiry_pass.h"

namespace quota::test {

using namespace std::chrono_literals;

TEST_CASE("two engines expiring one PostgreSQL database while both consume stay exact",
          "[slow][postgresql][expiry]") {
  TestDatabase database(Backend::postgresql);
  ManualClock clock;
  Options options = options_with(clock);
  options.expire_interval = 1ms;
  Engine first = Engine::open(database.location(), options);
  Engine second = Engine::open(database.location(), options);
  first.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  first.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  constexpr int kOwners = 20;
  constexpr int kSteps = 10;
  for (int step = 0; step < kSteps; ++step) {
    clock.set(1'700'000'000'000 + step * 2000);  // 2 periods apart
    // Two threads, one per engine, each asking 5 times for every owner of both limits: of
    // the 10 requests of an owner in this window exactly 5 are allowed, whatever the two
    // expiries delete meanwhile (the last window's rows, never this one's).
    std::vector<int> by_first(2 * kOwners, 0), by_second(2 * kOwners, 0);
    // Besides, each thread's owners of this step alone, allowed once each: their state has
    // expired by the next step, and goes.
    const auto consume = [&](Engine& engine, std::vector<int>& counts) {
      const std::string fresh = "f" + std::string(&engine == &first ? "a" : "b") +
                                std::to_string(step) + "-";
      for (int limit = 0; limit < 2; ++limit) {
        for (int owner = 0; owner < kOwners; ++owner) {
          REQUIRE(engine.consume(limit == 0 ? "log" : "win", fresh + std::to_string(owner))
                      .allowed);
        }
      }
      for (int round = 0; round < 5; ++round) {
        for (int limit = 0; limit < 2; ++limit) {
          for (int owner = 0; owner < kOwners; ++owner) {
            counts[static_cast<std::size_t>(limit * kOwners + owner)] +=
                engine.consume(limit == 0 ? "log" : "win", "o" + std::to_string(owner)).allowed;
          }
        }
      }
    };
    // An error of either thread is the test's failure, reported after both have ended.
    std::exception_ptr failure;
    std::thread other([&] {
      try {
        consume(second, by_second);
      } catch (...) {
        failure = std::current_exception();
      }
    });
    try {
      consume(first, by_first);
    } catch (...) {
      other.join();
      throw;
    }
    other.join();
    if (failure) std::rethrow_exception(failure);
    for (std::size_t i = 0; i < by_first.size(); ++i) {
      CAPTURE(step, i);
      REQUIRE(by_first[i] + by_second[i] == 5);
    }
  }
  await_expiry_pass(first);
  await_expiry_pass(second);
  // The last step's state is live and stays; every earlier step's owners have gone.
  const auto rows = [&](const std::string& table, const std::string& owners) {
    return database.integer("SELECT count(*) FROM " + table + " WHERE owner LIKE '" + owners +
                            "%'");
  };
  CHECK(rows("quota_windows", "f") == 2 * kOwners);
  CHECK(rows("quota_log_owners", "f") == 2 * kOwners);
  CHECK(rows("quota_windows", "o") == kOwners);
  CHECK(rows("quota_log_owners", "o") == kOwners);
  clock.advance(10'000);
  await_expiry_pass(first);
  await_expiry_pass(second);
  CHECK(rows("quota_windows", "f") == 0);
  CHECK(rows("quota_log_owners", "f") == 0);
  CHECK(rows("quota_log", "f") == 0);
  // An owner with denials keeps its row (gc keeps what usage --by denied shows).
  CHECK(rows("quota_windows", "o") == kOwners);
  const Metrics a = first.metrics();
  const Metrics b = second.metrics();
  CHECK(a.gc_deleted + b.gc_deleted >= 2 * kOwners * kSteps);  // at least the fresh windows
  CHECK(a.expiry_failures + b.expiry_failures == 0);
}

}  // namespace quota::test
