// Batches on a file under faults: a full disk fails every request of the batch whose commit
// it stops and keeps every answered one; a process killed at random moments while threads
// share its Engine (group commit on and off) or while it calls consume_many, with
// synchronous_full, never loses a consume it answered.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kDay = 86'400'000;
constexpr std::int64_t T = 19'675 * kDay;
constexpr std::int64_t kHuge = 1'000'000'000;  // never reached: every consume is allowed

std::string limit_of(Algorithm algorithm) { return std::string(to_string(algorithm)); }

void define_every_algorithm(const std::string& path) {
  Options options;
  options.clock = [] { return T; };
  Engine engine = Engine::open(path, options);
  for (const Algorithm algorithm : kAllAlgorithms) {
    engine.define(make_limit(limit_of(algorithm), algorithm, kHuge, kDay));
  }
}

// In a child whose files may not grow past their size + `room`: 16 threads on one Engine
// (group commit) consume for new owners until the disk is full. Returns the owners whose
// consume was answered allowed with reason ok, one a line, then "failed N" (errors or
// store_unavailable answers), or how the child failed.
std::string fill_the_disk_from_threads(const std::string& path, Options options, std::size_t room) {
  return text_of_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    const rlim_t size = std::filesystem::file_size(path) + room;
    const rlimit limit{size, size};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return std::string("setrlimit failed");
    options.clock = [] { return T; };
    Engine engine = Engine::open(path, std::move(options));
    std::mutex mutex;
    std::string answered;
    std::atomic<int> failed{0};
    std::atomic<bool> full{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20'000 && failed < 64; ++i) {
          const std::string owner = "n" + std::to_string(t) + "_" + std::to_string(i);
          try {
            const Result result = engine.consume("fixed_window", owner);
            if (result.reason == Reason::store_unavailable) {
              ++failed;
              continue;
            }
            std::lock_guard lock(mutex);
            answered += owner + "\n";
          } catch (const Error& error) {
            if (error.code() != ErrorCode::io) return;
            ++failed;
          }
        }
        (void)full;
      });
    }
    for (std::thread& thread : threads) thread.join();
    return answered + "failed " + std::to_string(failed.load());
  });
}

TEST_CASE("a full disk under group commit: every answered consume is kept, no failed one",
          "[batch][faults]") {
  const bool fail_open = GENERATE(false, true);
  CAPTURE(fail_open);
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_every_algorithm(path);
  Options options;
  options.synchronous_full = true;
  if (fail_open) options.failure_policy = FailurePolicy::fail_open;
  const std::string outcome = fill_the_disk_from_threads(path, options, 256 * 1024);
  const std::size_t last = outcome.rfind("failed ");
  REQUIRE(last != std::string::npos);
  INFO(outcome.substr(last));
  CHECK(std::stoi(outcome.substr(last + 7)) > 0);
  std::set<std::string> answered;
  for (std::size_t at = 0; at < last;) {
    const std::size_t end = outcome.find('\n', at);
    answered.insert(outcome.substr(at, end - at));
    at = end + 1;
  }
  // Enough answers before the disk filled for the comparison below to mean something: about
  // 50 under the sanitizers' slower threads, hundreds otherwise.
  CHECK(answered.size() > 10);
  RawDb db(path);
  CHECK(db.rows("PRAGMA integrity_check") == std::vector<std::vector<std::string>>{{"ok"}});
  std::set<std::string> stored;
  for (const auto& row : db.rows("SELECT owner FROM quota_windows WHERE owner LIKE 'n%'")) {
    stored.insert(row.at(0));
  }
  // Never an answer before the commit that keeps it, and a failed commit kept nothing.
  CHECK(stored == answered);
}

// The child: `threads` threads sharing one Engine consume for ever (lone consumes, or
// consume_many of `batch` requests), round-robin over the algorithms, each on an owner of
// its own, and after each allowed answer write the algorithm's index as one byte to `report`.
[[noreturn]] void consume_until_killed(const std::string& path, int report, int threads,
                                       bool group_commit, std::size_t batch) {
  Options options;
  options.synchronous_full = true;
  options.group_commit = group_commit;
  options.clock = [] { return T; };
  try {
    Engine engine = Engine::open(path, options);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&engine, report, batch, owner = "u" + std::to_string(t)] {
        try {
          for (;;) {
            for (std::size_t a = 0; a < std::size(kAllAlgorithms); ++a) {
              const std::string limit = limit_of(kAllAlgorithms[a]);
              std::size_t allowed = 0;
              if (batch == 0) {
                allowed = engine.consume(limit, owner).allowed ? 1 : 0;
              } else {
                const std::vector<BatchRequest> requests(batch, BatchRequest{limit, owner, 1});
                for (const Result& result : engine.consume_many(requests))
                  allowed += result.allowed;
              }
              const std::string bytes(allowed, static_cast<char>(a));
              if (write(report, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
                _exit(3);
              }
            }
          }
        } catch (...) {
          _exit(4);
        }
      });
    }
    for (std::thread& worker : workers) worker.join();
  } catch (...) {
  }
  _exit(4);
}

TEST_CASE("SIGKILL 50 times while threads consume, batched and not: no answered consume lost",
          "[slow][batch][crash]") {
  struct Mode {
    const char* name;
    int threads;
    bool group_commit;
    std::size_t batch;
  };
  const Mode mode = GENERATE(Mode{"group commit, 8 threads", 8, true, 0},
                             Mode{"one commit per consume, 8 threads", 8, false, 0},
                             Mode{"consume_many of 10, 2 threads", 2, true, 10});
  CAPTURE(mode.name);
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_every_algorithm(path);
  std::mt19937 random(20261125);
  std::vector<std::int64_t> reported(std::size(kAllAlgorithms));
  constexpr int kRounds = 50;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    const int pid = fork_child([&]() -> int {
      close(ends[0]);
      consume_until_killed(path, ends[1], mode.threads, mode.group_commit, mode.batch);
    });
    close(ends[1]);
    // The first report: the child has opened the file and committed; then a kill at a random
    // moment, anywhere in a statement, a commit, or between a commit and its report.
    char index = 0;
    REQUIRE(read(ends[0], &index, 1) == 1);
    ++reported[static_cast<std::size_t>(index)];
    const std::chrono::microseconds pause(std::uniform_int_distribution<int>(0, 8'000)(random));
    // Killed, never failed by itself.
    CHECK(kill_and_count_reports(pid, pause, ends[0], reported) == 128 + SIGKILL);

    RawDb db(path);
    REQUIRE(db.rows("PRAGMA integrity_check") == std::vector<std::vector<std::string>>{{"ok"}});
    Options options;
    options.clock = [] { return T; };
    Engine engine = Engine::open(path, options);
    for (std::size_t a = 0; a < std::size(kAllAlgorithms); ++a) {
      CAPTURE(limit_of(kAllAlgorithms[a]));
      std::int64_t used = 0;
      for (const Usage& usage : engine.usage(limit_of(kAllAlgorithms[a]))) used += usage.used;
      // Every consume the child was answered is in the file (a few more may be: committed,
      // their report not yet written).
      CHECK(used >= reported[a]);
      reported[a] = used;  // the next round counts from what the file holds
    }
  }
}

}  // namespace
}  // namespace quota::test
