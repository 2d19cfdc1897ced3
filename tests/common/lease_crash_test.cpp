// Lease holders that crash (SPEC §13: "a lease whose holder died is freed by its expiry"), on
// every backend: child processes acquire leases and are killed with SIGKILL while they hold
// them, so no release ever comes. Every slot stays held up to the last millisecond before its
// lease's expires_at_ms and is free at exactly expires_at_ms, never earlier: as check and
// acquire_lease answer, as Engine::leases lists, and as the quota_leases table holds. The
// clock is one the test moves: a number in memory shared with the children (Options::clock
// reads it), so that each answer can be checked to the millisecond.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "quota/lease.h"
#include "quota/quota.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;
constexpr std::int64_t kTtl = 10'000;
constexpr std::int64_t kMaximum = 5;

// A clock in memory shared by the test and the children it forks.
class SharedClock {
 public:
  SharedClock() {
    void* memory = mmap(nullptr, sizeof(std::atomic<std::int64_t>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
    now_ = new (memory) std::atomic<std::int64_t>(T);
  }
  ~SharedClock() { munmap(now_, sizeof(std::atomic<std::int64_t>)); }
  SharedClock(const SharedClock&) = delete;
  SharedClock& operator=(const SharedClock&) = delete;

  void set(std::int64_t ms) { now_->store(ms); }
  std::int64_t get() const { return now_->load(); }
  Options options() const {
    Options options;
    std::atomic<std::int64_t>* now = now_;
    options.clock = [now] { return now->load(); };
    return options;
  }

 private:
  std::atomic<std::int64_t>* now_ = nullptr;
};

// What a holder reports once it holds its lease: "<id> <expires_at_ms>\n".
struct Held {
  int pid = 0;
  std::string id;
  std::int64_t cost = 0;
  std::int64_t expires_at_ms = 0;
};

// Forks a holder that acquires a lease of `cost` on ("jobs", "u"), reports it on a pipe, and
// waits to be killed (it never releases). Returns once the lease is held.
Held hold_until_killed(const TestDatabase& database, const SharedClock& clock, std::int64_t cost) {
  int ends[2];
  REQUIRE(pipe(ends) == 0);
  Held held;
  held.cost = cost;
  held.pid = fork_child([&]() -> int {
    close(ends[0]);
    Engine engine = Engine::open(database.location(), clock.options());
    const LeaseResult lease = engine.acquire_lease("jobs", "u", cost);
    if (!lease.allowed || lease.lease.empty()) return 2;
    const std::string line = lease.lease + " " + std::to_string(lease.expires_at_ms) + "\n";
    if (write(ends[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 3;
    for (;;) pause();  // holding, until SIGKILL
  });
  close(ends[1]);
  std::string line;
  char c = 0;
  while (read(ends[0], &c, 1) == 1 && c != '\n') line += c;
  close(ends[0]);
  const std::size_t space = line.find(' ');
  REQUIRE(space != std::string::npos);  // the child acquired (or it failed: see its exit)
  held.id = line.substr(0, space);
  held.expires_at_ms = std::stoll(line.substr(space + 1));
  return held;
}

std::int64_t rows_unexpired(const TestDatabase& database, std::int64_t now) {
  return database.integer("SELECT coalesce(sum(cost), 0) FROM quota_leases WHERE "
                          "limit_name = 'jobs' AND owner = 'u' AND expires_at_ms > " +
                          std::to_string(now));
}

// The location a killed child opens: on PostgreSQL with an application_name of its own, so
// that gone_from_server can wait for the server to end its connection.
std::string child_location(const TestDatabase& database, const std::string& name) {
  if (database.backend() != Backend::postgresql) return database.location();
  return database.location() + "&application_name=" + name;
}

// On PostgreSQL a statement the killed child sent may still commit after the kill, until the
// server notices the client is gone: wait (at most 10 s) for its connection to end.
void gone_from_server(const TestDatabase& database, const std::string& name) {
  if (database.backend() != Backend::postgresql) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (database.integer("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                          name + "'") > 0) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool listed(Engine& engine, const std::string& id) {
  for (const LeaseInfo& lease : engine.leases("jobs")) {
    if (lease.lease == id) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("leases of killed holders are held until their expiry and free at it, never earlier",
          "[lease][crash][slow]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  SharedClock clock;
  Engine engine = Engine::open(database.location(), clock.options());
  Limit limit;
  limit.name = "jobs";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = kMaximum;
  limit.period = std::chrono::milliseconds(kTtl);
  engine.define(limit);

  // Four holders take every slot (costs 1, 2, 1, 1) at T, T + 1000, T + 1000 and T + 2500:
  // two leases expire at the same moment.
  std::vector<Held> holders;
  const std::vector<std::pair<std::int64_t, std::int64_t>> takes = {
      {T, 1}, {T + 1000, 2}, {T + 1000, 1}, {T + 2500, 1}};
  for (const auto& [at, cost] : takes) {
    clock.set(at);
    holders.push_back(hold_until_killed(database, clock, cost));
    CHECK(holders.back().expires_at_ms == at + kTtl);
  }
  clock.set(T + 3000);
  CHECK_FALSE(engine.check("jobs", "u", 1).allowed);
  // Every holder dies without a word.
  for (const Held& held : holders) {
    REQUIRE(kill(held.pid, SIGKILL) == 0);
    CHECK(wait_child(held.pid) == 128 + SIGKILL);
  }

  // At each expiry E, in order: at E - 1 the units of the leases expiring at E are still
  // held (an acquire that needs them is denied and told to wait exactly 1 ms), and at E they
  // are free (the same acquire is granted; its lease is released again at once).
  std::vector<std::int64_t> expiries;
  for (const Held& held : holders) expiries.push_back(held.expires_at_ms);
  std::sort(expiries.begin(), expiries.end());
  expiries.erase(std::unique(expiries.begin(), expiries.end()), expiries.end());
  for (const std::int64_t expiry : expiries) {
    CAPTURE(expiry - T);
    std::int64_t held_before = 0, freed = 0;
    for (const Held& held : holders) {
      if (held.expires_at_ms >= expiry) held_before += held.cost;
      if (held.expires_at_ms == expiry) freed += held.cost;
    }
    const std::int64_t need = kMaximum - held_before + freed;  // fits only once they are freed

    clock.set(expiry - 1);
    CHECK(rows_unexpired(database, expiry - 1) == held_before);
    const Result before = engine.check("jobs", "u", need);
    CHECK_FALSE(before.allowed);
    CHECK(before.remaining == kMaximum - held_before);
    CHECK(before.retry_after_ms == 1);
    CHECK(before.reset_at_ms == expiries.back());
    const LeaseResult denied = engine.acquire_lease("jobs", "u", need);
    CHECK_FALSE(denied.allowed);
    CHECK(denied.reason == Reason::rate_limited);
    CHECK(denied.retry_after_ms == 1);
    CHECK(denied.lease.empty());
    for (const Held& held : holders) {
      CHECK(listed(engine, held.id) == (held.expires_at_ms > expiry - 1));
    }

    clock.set(expiry);
    CHECK(rows_unexpired(database, expiry) == held_before - freed);
    CHECK(engine.check("jobs", "u", need).allowed);
    const LeaseResult granted = engine.acquire_lease("jobs", "u", need);
    CHECK(granted.allowed);
    CHECK(granted.remaining == 0);
    CHECK(granted.expires_at_ms == expiry + kTtl);
    for (const Held& held : holders) {
      CHECK(listed(engine, held.id) == (held.expires_at_ms > expiry));
      if (held.expires_at_ms == expiry) CHECK_FALSE(engine.release_lease(held.id));
    }
    CHECK(engine.release_lease(granted.lease));
  }
  CHECK(engine.check("jobs", "u", kMaximum).allowed);
  CHECK(engine.leases("jobs").empty());
}

TEST_CASE("a holder killed at a random moment of its acquire-release loop frees its slot at the "
          "lease's expiry",
          "[lease][crash][slow]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  SharedClock clock;
  Engine engine = Engine::open(database.location(), clock.options());
  Limit limit;
  limit.name = "jobs";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = 1;
  limit.period = std::chrono::milliseconds(kTtl);
  engine.define(limit);
  std::mt19937 random(28);
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    clock.set(T + round * 100'000);
    const std::string application = "quota_killed_" + std::to_string(getpid()) + "_" +
                                    std::to_string(round);
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    // The clock stands still while the child runs: each of its leases expires at now + TTL.
    const int pid = fork_child([&]() -> int {
      close(ends[0]);
      Engine child = Engine::open(child_location(database, application), clock.options());
      for (;;) {
        const LeaseResult lease = child.acquire_lease("jobs", "u");
        if (!lease.allowed) return 2;
        const char zero = 0;  // kill_and_count_reports counts it as reported[0]
        if (write(ends[1], &zero, 1) != 1) return 3;
        if (!child.release_lease(lease.lease)) return 4;
      }
    });
    close(ends[1]);
    char byte = 0;
    REQUIRE(read(ends[0], &byte, 1) == 1);  // it runs
    std::vector<std::int64_t> reported(1);
    const std::chrono::microseconds pause(std::uniform_int_distribution<int>(0, 20'000)(random));
    CHECK(kill_and_count_reports(pid, pause, ends[0], reported) == 128 + SIGKILL);
    gone_from_server(database, application);

    // Killed between an acquire and its release, or not: the slot is held until now + TTL
    // at most, and free from then on.
    const std::int64_t now = clock.get();
    const std::int64_t held = rows_unexpired(database, now);
    CHECK(held <= 1);
    clock.set(now + kTtl - 1);
    CHECK(rows_unexpired(database, now + kTtl - 1) == held);
    const Result before = engine.check("jobs", "u", 1);
    CHECK(before.allowed == (held == 0));
    CHECK(before.retry_after_ms == (held == 0 ? 0 : 1));
    clock.set(now + kTtl);
    CHECK(rows_unexpired(database, now + kTtl) == 0);
    const LeaseResult granted = engine.acquire_lease("jobs", "u");
    CHECK(granted.allowed);
    CHECK(engine.release_lease(granted.lease));
  }
}

}  // namespace quota::test
