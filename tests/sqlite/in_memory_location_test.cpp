// A database in memory (src/location.h's in_memory): the one answer that Engine::open (no
// background expiry) and src/open_store.cpp (no file to look for) both take, for every
// spelling SQLite opens in memory.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "location.h"
#include "support.h"

namespace quota::test {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kInMemory = {
    ":memory:", "file::memory:", "file::memory:?cache=shared", "file:quota_a?mode=memory",
    "file:quota_b?cache=shared&mode=memory", "file:quota_c?mode=%6Demory", "file:%3Amemory%3A"};

}  // namespace

TEST_CASE("the locations SQLite opens in memory are classified in memory, files are not",
          "[location][expiry]") {
  for (const std::string& location : kInMemory) {
    CAPTURE(location);
    const detail::Location classified = detail::classify_location(location);
    CHECK(classified.kind == detail::Location::Kind::sqlite_path);
    CHECK(classified.in_memory);
  }
  for (const std::string location :
       {"app.db", "/tmp/:memory:", "./:memory:", "file:app.db", "file:app.db?mode=rwc",
        "file:app.db?xmode=memory", "file:///:memory:", "memory", "FILE::memory:"}) {
    CAPTURE(location);
    CHECK_FALSE(detail::classify_location(location).in_memory);
  }
  CHECK_FALSE(detail::classify_location("postgresql://u@h/db").in_memory);
  CHECK_FALSE(detail::classify_location("host=h dbname=mode=memory").in_memory);
}

TEST_CASE("an engine on a database in memory runs no background expiry", "[expiry]") {
  TempDir dir;
  ManualClock clock;
  Options options = options_with(clock);
  options.expire_interval = 1ms;
  std::vector<Engine> in_memory;
  for (const std::string& location : kInMemory) {
    in_memory.push_back(Engine::open(location, options));
    in_memory.back().define(make_limit("win", Algorithm::fixed_window, 5, 1000));
    REQUIRE(in_memory.back().consume("win", "u").allowed);
  }
  // A file's engine with the same interval: while it ends ten passes, an expiry thread of any
  // in-memory engine would have ended some too (each of its passes would fail: a connection of
  // its own finds another, empty database).
  Engine file = Engine::open(dir.file("quota.db"), options);
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (file.metrics().expiry_runs < 10) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(1ms);
  }
  for (std::size_t i = 0; i < in_memory.size(); ++i) {
    CAPTURE(kInMemory[i]);
    const Metrics metrics = in_memory[i].metrics();
    CHECK(metrics.expiry_runs == 0);
    CHECK(metrics.expiry_failures == 0);
    // The state is the engine's own and stays until its own gc.
    clock.advance(10'000);
    CHECK(in_memory[i].gc() == 1);
  }
}

}  // namespace quota::test
