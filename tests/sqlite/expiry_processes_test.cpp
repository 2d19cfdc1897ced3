// Expiry without a scheduler across processes (Options::expire_interval, docs/operating.md):
// two processes, each with an engine that expires one SQLite file in the background, consume
// for the same owners in step; every answer stays exact (nothing live is deleted) and what
// has expired goes. The processes share their clock through shared memory, so that the test
// moves time for both.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "support.h"

namespace quota::test {
namespace {

using namespace std::chrono_literals;

constexpr int kProcesses = 2;
constexpr int kSteps = 10;
constexpr int kOwners = 10;
constexpr int kLimits = 2;  // "log" (sliding_log) and "win" (fixed_window), 5 per second
constexpr const char* kLimitNames[kLimits] = {"log", "win"};

// What the processes share: the clock, the step to take, and what each answered.
struct Shared {
  std::atomic<std::int64_t> now{1'700'000'000'000};
  std::atomic<int> step{-1};  // the step the children may take; kSteps: stop
  std::atomic<int> done[kSteps];
  std::atomic<int> allowed[kSteps][kProcesses][kLimits][kOwners];
  std::atomic<std::uint64_t> expiry_runs[kProcesses];
  std::atomic<std::uint64_t> gc_deleted[kProcesses];
  std::atomic<int> failed{0};
};

// One child: consumes 5 times for every owner of both limits at each step, and meanwhile
// publishes its expiry's counts until told to stop.
int child(Shared& shared, const std::string& path, int process) {
  Options options;
  options.clock = [&shared] { return shared.now.load(); };
  options.expire_interval = 1ms;
  Engine engine = Engine::open(path, options);
  const auto publish = [&] {
    const Metrics metrics = engine.metrics();
    shared.expiry_runs[process] = metrics.expiry_runs;
    shared.gc_deleted[process] = metrics.gc_deleted;
  };
  for (int step = 0; step < kSteps; ++step) {
    while (shared.step.load() < step) {
      publish();
      std::this_thread::sleep_for(1ms);
    }
    // Owners of this process and step alone, allowed once each: expired by the next step.
    const std::string fresh = "p" + std::to_string(process) + "-" + std::to_string(step) + "-";
    for (int limit = 0; limit < kLimits; ++limit) {
      for (int owner = 0; owner < kOwners; ++owner) {
        if (!engine.consume(kLimitNames[limit], fresh + std::to_string(owner)).allowed) {
          ++shared.failed;
        }
      }
    }
    for (int round = 0; round < 5; ++round) {
      for (int limit = 0; limit < kLimits; ++limit) {
        for (int owner = 0; owner < kOwners; ++owner) {
          shared.allowed[step][process][limit][owner] +=
              engine.consume(kLimitNames[limit], "o" + std::to_string(owner)).allowed;
        }
      }
    }
    ++shared.done[step];
  }
  while (shared.step.load() < kSteps) {
    publish();
    std::this_thread::sleep_for(1ms);
  }
  publish();
  return engine.metrics().expiry_failures == 0 ? 0 : 1;
}

// Waits until every child has published three passes more than now (what it published may
// lag one pass behind), so that a pass that began after this call has ended. Fails after a
// minute.
void await_passes(const Shared& shared) {
  std::uint64_t before[kProcesses];
  for (int p = 0; p < kProcesses; ++p) before[p] = shared.expiry_runs[p].load();
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  for (int p = 0; p < kProcesses; ++p) {
    while (shared.expiry_runs[p].load() < before[p] + 3) {
      REQUIRE(std::chrono::steady_clock::now() < give_up);
      std::this_thread::sleep_for(1ms);
    }
  }
}

}  // namespace

TEST_CASE("two processes expiring one SQLite file while both consume stay exact",
          "[expiry][sqlite]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  {
    Options setup;
    setup.expire_interval = 0ms;
    Engine engine = Engine::open(path, setup);
    engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
    engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  }
  void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
  REQUIRE(memory != MAP_FAILED);
  Shared& shared = *new (memory) Shared;  // never destroyed: its members are trivial to drop
  const std::unique_ptr<void, std::function<void(void*)>> mapping(
      memory, [](void* mapped) { munmap(mapped, sizeof(Shared)); });
  int pids[kProcesses];
  for (int p = 0; p < kProcesses; ++p) {
    pids[p] = fork_child([&, p] { return child(shared, path, p); });
  }
  // Stops the children and waits for them (also when a REQUIRE ends the test early): how
  // many did not exit 0.
  bool stopped = false;
  const auto stop = [&] {
    if (stopped) return 0;
    stopped = true;
    shared.step = kSteps;
    int failures = 0;
    for (const int pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      failures += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    return failures;
  };
  struct Guard {
    const std::function<int()> stop;
    ~Guard() { stop(); }
  } guard{stop};
  RawDb raw(path);
  for (int step = 0; step < kSteps; ++step) {
    shared.now = 1'700'000'000'000 + step * 2000;  // 2 periods: the last step's state expired
    shared.step = step;
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    while (shared.done[step].load() < kProcesses) {
      REQUIRE(std::chrono::steady_clock::now() < give_up);
      std::this_thread::sleep_for(1ms);
    }
    // Of an owner's 10 requests in this window exactly 5 were allowed, whichever process
    // asked and whatever the two expiries deleted meanwhile.
    for (int limit = 0; limit < kLimits; ++limit) {
      for (int owner = 0; owner < kOwners; ++owner) {
        int allowed = 0;
        for (int p = 0; p < kProcesses; ++p) allowed += shared.allowed[step][p][limit][owner];
        CAPTURE(step, kLimitNames[limit], owner);
        CHECK(allowed == 5);
      }
    }
  }
  await_passes(shared);
  // The last step's state is live and stays; every earlier step's owners have gone.
  const auto rows = [&](const std::string& table, const std::string& owners) {
    return raw.integer("SELECT count(*) FROM " + table + " WHERE owner LIKE '" + owners + "%'");
  };
  CHECK(rows("quota_windows", "p") == kProcesses * kOwners);
  CHECK(rows("quota_log_owners", "p") == kProcesses * kOwners);
  CHECK(rows("quota_windows", "o") == kOwners);
  shared.now += 10'000;
  await_passes(shared);
  CHECK(rows("quota_windows", "p") == 0);
  CHECK(rows("quota_log_owners", "p") == 0);
  CHECK(rows("quota_log", "p") == 0);
  // An owner with denials keeps its row (gc keeps what usage --by denied shows).
  CHECK(rows("quota_windows", "o") == kOwners);
  CHECK(shared.failed == 0);  // every fresh owner was allowed
  CHECK(stop() == 0);  // each child's expiry had no failed pass
  std::uint64_t deleted = 0;
  for (int p = 0; p < kProcesses; ++p) deleted += shared.gc_deleted[p];
  CHECK(deleted >= kProcesses * kOwners * kSteps);  // at least the fresh windows
}

}  // namespace quota::test
