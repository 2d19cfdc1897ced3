// Expiry without a scheduler (Options::expire_interval, docs/operating.md): an Engine deletes
// expired state in the background on its own connection, so that state keyed by client
// addresses stays bounded; several engines doing it at once stay exact; the destructor stops
// it promptly.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support.h"
#include "support/expiry_pass.h"

namespace quota::test {
namespace {

using namespace std::chrono_literals;

Options expiring(const ManualClock& clock) {
  Options options = options_with(clock);
  options.expire_interval = 1ms;
  return options;
}

}  // namespace

TEST_CASE("200,000 addresses over an hour: expiry keeps only the live windows", "[expiry]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  Engine engine = Engine::open(path, expiring(clock));
  RawDb raw(path);
  engine.define(make_limit("per-ip", Algorithm::fixed_window, 10, 60'000));
  constexpr int kMinutes = 60;
  constexpr int kPerMinute = 200'000 / kMinutes + 1;  // 3,334 new addresses a minute
  const std::int64_t start = 1'700'000'040'000;       // a minute's start
  std::int64_t owners = 0;
  for (int minute = 0; minute < kMinutes; ++minute) {
    clock.set(start + minute * 60'000 + 30'000);
    std::vector<std::string> addresses;
    for (int i = 0; i < kPerMinute; ++i) addresses.push_back("10." + std::to_string(owners++));
    std::vector<BatchRequest> batch;
    for (const std::string& address : addresses) batch.push_back({"per-ip", address, 1});
    for (const Result& result : engine.consume_many(batch)) REQUIRE(result.allowed);
    await_expiry_pass(engine);
    // Only this minute's windows are live: every earlier one has been deleted.
    REQUIRE(raw.integer("SELECT count(*) FROM quota_windows") == kPerMinute);
  }
  CHECK(owners >= 200'000);
  clock.advance(60'000);
  await_expiry_pass(engine);
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 0);
  const Metrics metrics = engine.metrics();
  CHECK(metrics.gc_deleted == static_cast<std::uint64_t>(owners));
  CHECK(metrics.expiry_failures == 0);
}

TEST_CASE("several engines expiring one database at once keep every answer exact",
          "[expiry]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  std::vector<Engine> engines;
  for (int i = 0; i < 3; ++i) engines.push_back(Engine::open(path, expiring(clock)));
  engines[0].define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  engines[0].define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  // Each step: every engine consumes for the same owners; exactly 5 of each owner's requests
  // per window are allowed, whatever the expiry deletes meanwhile.
  for (int step = 0; step < 40; ++step) {
    clock.set(1'700'000'000'000 + step * 1000);
    for (const char* limit : {"log", "win"}) {
      for (int owner = 0; owner < 20; ++owner) {
        int allowed = 0;
        for (int i = 0; i < 9; ++i) {
          allowed += engines[static_cast<std::size_t>(i % 3)]
                         .consume(limit, "o" + std::to_string(owner))
                         .allowed;
        }
        REQUIRE(allowed == 5);
      }
    }
  }
  for (Engine& engine : engines) await_expiry_pass(engine);
  RawDb raw(path);
  // The last step's state stays: it is live.
  CHECK(raw.integer("SELECT count(*) FROM quota_windows") == 20);
  CHECK(raw.integer("SELECT count(*) FROM quota_log_owners") == 20);
  std::uint64_t deleted = 0;
  for (const Engine& engine : engines) deleted += engine.metrics().gc_deleted;
  CHECK(deleted > 0);
}

TEST_CASE("an engine's expiry is off at 0, and its destructor stops it promptly", "[expiry]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  {
    Options options = options_with(clock);
    options.expire_interval = 0ms;
    Engine engine = Engine::open(path, options);
    engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
    REQUIRE(engine.consume("win", "u").allowed);
    clock.advance(10'000);
    // No pass runs: a gc that the test runs finds the expired window still there.
    CHECK(engine.gc() == 1);
    CHECK(engine.metrics().expiry_runs == 0);
  }
  {
    // A day's interval: the destructor does not wait for it.
    Options options = options_with(clock);
    options.expire_interval = 24h;
    Engine engine = Engine::open(path, options);
  }
  SUCCEED("closed");
}

}  // namespace quota::test
