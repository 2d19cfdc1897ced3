// Concurrency leases across processes: 8 quotactl processes at once acquire and release leases
// of one owner, on every backend. Two views say that at no moment do more than the maximum
// hold a lease: the test reads the leases table at random moments (a random pause of up to
// 2 ms between reads), and each holder records the interval in which it knew it held its lease
// (from just after its acquire answered to just before it asked to release), which lies
// within the lease's life: at no instant do more of those intervals overlap than the maximum.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend.h"
#include "quota/lease.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST_CASE("8 processes acquiring leases of one owner never hold more than the maximum",
          "[lease][processes][slow]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  constexpr std::int64_t kMaximum = 2;
  {
    Engine setup = Engine::open(database.location());
    Limit limit;
    limit.name = "uploads";
    limit.algorithm = Algorithm::concurrency;
    limit.maximum = kMaximum;
    limit.period = std::chrono::minutes(1);  // nothing expires during the test
    setup.define(limit);
  }
  const std::string quotactl =
      std::string(QUOTACTL_PATH) + " --db " + quoted(database.location());
  // Each process: 8 times, acquire; when granted, hold the lease a moment, print the
  // interval it held it ("held START END", wall-clock ns: START once the acquire answered,
  // END before the release is asked) and release.
  const std::string loop =
      "for i in 1 2 3 4 5 6 7 8; do "
      "id=$(" + quotactl + " --json lease acquire uploads u | "
      "sed -n 's/.*\"lease\":\"\\([0-9a-f]*\\)\".*/\\1/p'); "
      "if [ -n \"$id\" ]; then start=$(date +%s%N); sleep 0.00$((RANDOM % 10)); "
      "echo \"held $start $(date +%s%N)\"; " + quotactl + " lease release $id > /dev/null; fi; "
      "done";
  std::atomic<int> running{8};
  std::mutex intervals_mutex;
  std::vector<std::pair<std::int64_t, std::int64_t>> intervals;
  std::vector<std::thread> threads;
  for (int p = 0; p < 8; ++p) {
    threads.emplace_back([&] {
      FILE* pipe = popen(("bash -c " + quoted(loop)).c_str(), "r");
      if (pipe != nullptr) {
        char line[128];
        while (std::fgets(line, sizeof line, pipe) != nullptr) {
          std::istringstream words(line);
          std::string word;
          std::int64_t start = 0, end = 0;
          if (words >> word >> start >> end && word == "held") {
            std::lock_guard lock(intervals_mutex);
            intervals.emplace_back(start, end);
          }
        }
        pclose(pipe);
      }
      --running;
    });
  }
  // Read through an Engine of its own (which waits out SQLite's busy moments), the table's
  // unexpired leases at every read; the threads are joined whatever happens.
  std::int64_t most = 0;
  int samples = 0;
  std::string failure;
  std::mt19937 random(8);
  try {
    Engine reader = Engine::open(database.location());
    while (running > 0) {
      std::int64_t held = 0;
      for (const LeaseInfo& lease : reader.leases("uploads")) held += lease.cost;
      most = std::max(most, held);
      ++samples;
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, 2000)(random)));
    }
  } catch (const std::exception& error) {
    failure = error.what();
  }
  for (std::thread& thread : threads) thread.join();
  CAPTURE(samples, failure);
  CHECK(failure.empty());
  CHECK(samples > 0);
  CHECK(most <= kMaximum);
  // The holders' own intervals: a sweep over their starts and ends (a start before an end at
  // the same instant, so that touching intervals count as overlapping).
  std::vector<std::pair<std::int64_t, int>> moments;
  for (const auto& [start, end] : intervals) {
    CHECK(start <= end);
    moments.emplace_back(start, 0);
    moments.emplace_back(end, 1);
  }
  std::sort(moments.begin(), moments.end());
  std::int64_t at_once = 0, most_at_once = 0;
  for (const auto& [when, is_end] : moments) {
    at_once += is_end ? -1 : 1;
    most_at_once = std::max(most_at_once, at_once);
  }
  CAPTURE(intervals.size(), most_at_once);
  CHECK(intervals.size() > 0);
  CHECK(most_at_once <= kMaximum);
  CHECK(database.integer("SELECT count(*) FROM quota_leases") == 0);
}

}  // namespace
}  // namespace quota::test
