// A PostgreSQL failover survived (SPEC §12; docs/sharing-limits-across-hosts.md, "Surviving a
// failover"): a primary and a synchronous standby streaming from it, engines consuming through
// a multi-host connection string (host=PRIMARY,STANDBY target_session_attrs=read-write). The
// primary is stopped as in a crash and the standby promoted: every engine carries on against
// the new primary within a bounded time, without being reopened, and every consume answered
// allowed is in the new primary's state.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "postgresql/private_server.h"
#include "support.h"

namespace quota::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kEngines = 4;
constexpr auto kBound = std::chrono::seconds(30);  // a consume answered again after promotion

struct Tally {
  std::atomic<std::int64_t> allowed{0};  // consumes answered allowed
  std::atomic<std::int64_t> failed{0};   // calls that threw busy or io (outcome unknown)
  std::atomic<std::int64_t> wrong{0};    // calls that threw anything else
  std::atomic<std::int64_t> first_answer_after_promotion_ms{-1};
};

// The primary's pg_stat_replication shows the standby streaming as a synchronous standby.
// Polled: until the standby has caught up, the check's error is the answer "not yet" (exec
// would fail the test on the first poll).
bool standby_is_synchronous(const PrivateServer& primary) {
  return primary
      .try_exec(
          "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state = "
          "'sync' AND state = 'streaming') THEN RAISE EXCEPTION 'not yet'; END IF; END $$")
      .empty();
}

TEST_CASE("a PostgreSQL failover to a synchronous standby loses no allowed consume",
          "[slow][postgresql][faults][failover]") {
  PrivateServer primary;
  {
    Engine engine = Engine::open(primary.uri());
    engine.define(make_limit("calls", Algorithm::fixed_window, 1'000'000'000, 86'400'000));
  }
  PrivateServer::Setup as_standby;
  as_standby.standby_of = &primary;
  PrivateServer standby(as_standby);
  // Commits wait until the standby has flushed them: an answered consume is on both servers.
  primary.exec("ALTER SYSTEM SET synchronous_standby_names = '*'");
  primary.exec("SELECT pg_reload_conf()");
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!standby_is_synchronous(primary) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(standby_is_synchronous(primary));

  // libpq tries the hosts in order and keeps the first that accepts writes.
  const std::string location =
      "host=" + primary.dir() + "," + standby.dir() + " port=" + std::to_string(primary.port()) +
      "," + std::to_string(standby.port()) +
      " dbname=quota_test user=postgres target_session_attrs=read-write connect_timeout=2";

  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::atomic<std::int64_t> promoted_at_ms{-1};  // since `origin`, once the standby accepts writes
  const Clock::time_point origin = Clock::now();
  const auto since_origin_ms = [origin] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - origin).count();
  };
  std::vector<Tally> tallies(kEngines);
  std::vector<std::thread> threads;
  for (int e = 0; e < kEngines; ++e) {
    threads.emplace_back([&, e] {
      Tally& tally = tallies[e];
      Options options;
      options.clock = [] { return std::int64_t{1'700'000'000'000}; };  // one window throughout
      options.migrate = false;
      try {
        Engine engine = Engine::open(location, options);
        ++started;
        const std::string owner = "owner-" + std::to_string(e);
        while (!stop) {
          try {
            const Result result = engine.consume("calls", owner);
            if (result.allowed) ++tally.allowed;
            const std::int64_t promoted = promoted_at_ms;
            if (promoted >= 0 && tally.first_answer_after_promotion_ms < 0) {
              tally.first_answer_after_promotion_ms = since_origin_ms() - promoted;
            }
          } catch (const Error& error) {
            ++(error.code() == ErrorCode::busy || error.code() == ErrorCode::io ? tally.failed
                                                                                : tally.wrong);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }
      } catch (...) {
        ++tally.wrong;
        ++started;
      }
    });
  }
  while (started < kEngines) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // consumes on the primary

  primary.stop_immediately();
  standby.promote();
  promoted_at_ms = since_origin_ms();
  // Every engine answers again, against the new primary, within the bound.
  const auto carried_on = [&] {
    for (const Tally& tally : tallies) {
      if (tally.first_answer_after_promotion_ms < 0) return false;
    }
    return true;
  };
  const auto bound = Clock::now() + kBound;
  while (!carried_on() && Clock::now() < bound) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // consumes on the new primary
  stop = true;
  for (std::thread& thread : threads) thread.join();

  Options options;
  options.clock = [] { return std::int64_t{1'700'000'000'000}; };
  Engine engine = Engine::open(standby.uri(), options);
  for (int e = 0; e < kEngines; ++e) {
    const Tally& tally = tallies[e];
    const Usage usage = engine.owner_usage("calls", "owner-" + std::to_string(e));
    CAPTURE(e, tally.allowed.load(), tally.failed.load(), tally.wrong.load(),
            tally.first_answer_after_promotion_ms.load(), usage.used);
    CHECK(tally.wrong == 0);
    CHECK(tally.first_answer_after_promotion_ms >= 0);  // carried on within kBound
    // Every consume answered allowed is in the new primary's state; a consume whose commit
    // the crash cut off before its answer came back may be there too, at most one per failure.
    CHECK(usage.used >= tally.allowed);
    CHECK(usage.used <= tally.allowed + tally.failed);
    CHECK(tally.allowed > 0);
  }
}

}  // namespace
}  // namespace quota::test
