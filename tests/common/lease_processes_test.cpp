// Concurrency leases across processes: 8 quotactl processes at once acquire and release leases
// of one owner, while the test reads the leases table again and again; at no moment do the
// unexpired leases hold more than the maximum, on every backend.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "quota/lease.h"

namespace quota::test {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST_CASE("8 processes acquiring leases of one owner never hold more than the maximum",
          "[lease][processes]") {
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
  // Each process: 8 times, acquire; when granted, say so and release.
  const std::string loop =
      "for i in 1 2 3 4 5 6 7 8; do "
      "id=$(" + quotactl + " --json lease acquire uploads u | "
      "sed -n 's/.*\"lease\":\"\\([0-9a-f]*\\)\".*/\\1/p'); "
      "if [ -n \"$id\" ]; then echo granted; " + quotactl + " lease release $id > /dev/null; fi; "
      "done";
  std::atomic<int> running{8};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 8; ++p) {
    threads.emplace_back([&] {
      FILE* pipe = popen(("bash -c " + quoted(loop)).c_str(), "r");
      if (pipe != nullptr) {
        char line[64];
        while (std::fgets(line, sizeof line, pipe) != nullptr) {
          if (std::string(line) == "granted\n") ++granted;
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
  try {
    Engine reader = Engine::open(database.location());
    while (running > 0) {
      std::int64_t held = 0;
      for (const LeaseInfo& lease : reader.leases("uploads")) held += lease.cost;
      most = std::max(most, held);
      ++samples;
    }
  } catch (const std::exception& error) {
    failure = error.what();
  }
  for (std::thread& thread : threads) thread.join();
  CAPTURE(samples, failure);
  CHECK(failure.empty());
  CHECK(samples > 0);
  CHECK(most <= kMaximum);
  CHECK(granted > 0);
  CHECK(database.integer("SELECT count(*) FROM quota_leases") == 0);
}

}  // namespace
}  // namespace quota::test
