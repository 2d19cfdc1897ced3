// A PostgreSQL server restarted while processes consume (docs/guarantees.md, "Sharing limits
// across hosts"): the calls that meet the outage fail cleanly with busy or io (or answer
// fail-open, with on_error called), the same Engine works again without being reopened, and
// every consume that was answered allowed is in the database afterwards.
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "postgresql/private_server.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr int kProcesses = 3;
constexpr int kThreads = 2;
constexpr int kWorkers = kProcesses * kThreads;
constexpr std::int64_t kWindowMaximum = 150;  // the fixed window fills during the test

// What one thread saw, in memory shared with the parent.
struct Tally {
  std::atomic<std::int64_t> allowed_log{0};        // consumes of "log" answered allowed
  std::atomic<std::int64_t> allowed_window{0};     // consumes of "window" answered allowed
  std::atomic<std::int64_t> failed{0};             // calls that threw busy or io
  std::atomic<std::int64_t> failed_busy{0};        // ...of which busy
  std::atomic<std::int64_t> wrong_failures{0};     // calls that threw anything else
  std::atomic<std::int64_t> fail_open_answers{0};  // allowed with Reason::store_unavailable
  std::atomic<std::int64_t> on_error_calls{0};
  std::atomic<std::int64_t> answered_after_outage{0};  // calls answered after a failure
  std::atomic<std::int64_t> recovered{0};  // 1 when the calls after the restart all worked
};

struct Shared {
  std::atomic<int> started{0};
  std::atomic<bool> stop{false};
  Tally tallies[kWorkers];
};

// One thread's loop: consumes on both limits until told to stop, then proves that the same
// engine answers (a check whose statement was prepared on the connection before the restart,
// and consumes).
void consume_through_outage(const std::string& uri, Shared& shared, Tally& tally, bool fail_open) {
  Options options;
  options.clock = [] { return std::int64_t{1'700'000'000'000}; };  // nothing expires
  options.migrate = false;
  if (fail_open) {
    options.failure_policy = FailurePolicy::fail_open;
    options.on_error = [&tally](const Error& error) {
      ++tally.on_error_calls;
      if (error.code() != ErrorCode::busy && error.code() != ErrorCode::io) ++tally.wrong_failures;
    };
  }
  Engine engine = Engine::open(uri, options);
  engine.check("log", "shared");  // prepared now, used again only after the restart
  ++shared.started;
  const auto count = [&](const Result& result, std::atomic<std::int64_t>& allowed) {
    if (result.reason == Reason::store_unavailable) {
      ++tally.fail_open_answers;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // as after an error
    } else {
      if (result.allowed) ++allowed;
      if (tally.failed + tally.fail_open_answers > 0) ++tally.answered_after_outage;
    }
  };
  while (!shared.stop) {
    try {
      count(engine.consume("log", "shared"), tally.allowed_log);
      count(engine.consume("window", "shared"), tally.allowed_window);
    } catch (const Error& error) {
      ++(error.code() == ErrorCode::busy || error.code() == ErrorCode::io ? tally.failed
                                                                          : tally.wrong_failures);
      if (error.code() == ErrorCode::busy) ++tally.failed_busy;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } catch (...) {
      ++tally.wrong_failures;
    }
  }
  try {
    const bool checked = engine.check("log", "shared").reason != Reason::store_unavailable;
    if (!checked) ++tally.fail_open_answers;
    const Result log = engine.consume("log", "shared");
    const Result window = engine.consume("window", "shared");
    count(log, tally.allowed_log);
    count(window, tally.allowed_window);
    if (checked && log.reason != Reason::store_unavailable &&
        window.reason != Reason::store_unavailable) {
      tally.recovered = 1;
    }
  } catch (...) {
  }
}

TEST_CASE("a PostgreSQL server restarted while processes consume loses no allowed consume",
          "[slow][postgresql][faults]") {
  PrivateServer server;
  const std::string uri = server.uri();
  {
    Engine engine = Engine::open(uri);
    engine.define(make_limit("log", Algorithm::sliding_log, 1'000'000, 86'400'000));
    engine.define(make_limit("window", Algorithm::fixed_window, kWindowMaximum, 86'400'000));
  }

  void* memory =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  Shared& shared = *new (memory) Shared();

  std::vector<int> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(fork_child([&, p] {
      // A test process killed outright takes its children with it: they would consume forever.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          Tally& tally = shared.tallies[p * kThreads + t];
          try {
            // The last process answers fail-open; the others fail closed.
            consume_through_outage(uri, shared, tally, p == kProcesses - 1);
          } catch (...) {
            ++tally.wrong_failures;
            ++shared.started;
          }
        });
      }
      for (auto& thread : threads) thread.join();
      return 0;
    }));
  }
  // Every thread consumes before the restart, during it and after it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (shared.started < kWorkers && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.restart();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  shared.stop = true;
  for (int child : children) CHECK(wait_child(child) == 0);

  std::int64_t allowed_log = 0;
  std::int64_t allowed_window = 0;
  std::int64_t failed = 0;
  for (int w = 0; w < kWorkers; ++w) {
    const Tally& tally = shared.tallies[w];
    const bool fail_open = w / kThreads == kProcesses - 1;
    CAPTURE(w, fail_open, tally.failed.load(), tally.failed_busy.load(),
            tally.fail_open_answers.load(), tally.on_error_calls.load(),
            tally.answered_after_outage.load());
    CHECK(tally.wrong_failures == 0);
    // Every engine's connection was ended by the restart: each met the outage at least once,
    // as an error (fail closed) or as a fail-open answer with on_error called.
    if (fail_open) {
      CHECK(tally.failed == 0);
      CHECK(tally.fail_open_answers > 0);
      CHECK(tally.on_error_calls == tally.fail_open_answers);
    } else {
      CHECK(tally.failed > 0);
      CHECK(tally.fail_open_answers == 0);
      CHECK(tally.on_error_calls == 0);
    }
    // ...and the same engine answered again, without being reopened.
    CHECK(tally.answered_after_outage > 0);
    CHECK(tally.recovered == 1);
    allowed_log += tally.allowed_log;
    allowed_window += tally.allowed_window;
    failed += tally.failed + tally.fail_open_answers;
  }

  Options options;
  options.clock = [] { return std::int64_t{1'700'000'000'000}; };
  Engine engine = Engine::open(uri, options);
  const Usage log = engine.owner_usage("log", "shared");
  const Usage window = engine.owner_usage("window", "shared");
  CAPTURE(allowed_log, allowed_window, failed, log.used, window.used);
  // Every consume answered allowed is recorded. A consume whose commit the restart cut off
  // before its answer came back may be recorded too: at most one per failed call (or
  // fail-open answer).
  CHECK(log.used >= allowed_log);
  CHECK(log.used <= allowed_log + failed);
  CHECK(window.used >= allowed_window);
  CHECK(window.used <= allowed_window + failed);
  CHECK(window.used <= kWindowMaximum);
  CHECK(allowed_log > 0);
  shared.~Shared();
  munmap(memory, sizeof(Shared));
}

}  // namespace
}  // namespace quota::test
