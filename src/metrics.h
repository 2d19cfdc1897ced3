// What Engine::metrics() reports, counted as operations answer (src/metrics.cpp). Counting
// takes its own short lock, never the engine's; its budget is 2 % of a consume's instructions:
// one lookup of the limit's name, then array slots by operation and reason (no string built
// nor compared for them), and no allocation once a limit has been seen.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "quota/error.h"
#include "quota/metrics.h"
#include "quota/result.h"

namespace quota::detail {

// The operations decisions are counted under (Metrics::decisions); a new one (reserve,
// settle, ...) goes before `count` and gets its name in src/metrics.cpp's kOperationNames.
enum class Counted : std::uint8_t { consume, check, record, acquire, renew, wait, count };

class Counters {
 public:
  // The latency histograms' last bound is `busy_timeout`.
  explicit Counters(std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));

  // One answer of `operation` for `limit`, and how long it took.
  void decided(Counted operation, std::string_view limit, const Result& result,
               std::chrono::nanoseconds took);
  // Answers of one batch: results[i] for limit_of(i), all in `took`.
  template <typename LimitOf>
  void decided_all(Counted operation, const std::vector<Result>& results, LimitOf&& limit_of,
                   std::chrono::nanoseconds took) {
    std::lock_guard lock(mutex_);
    measure(operation, took);
    for (std::size_t i = 0; i < results.size(); ++i) count(operation, limit_of(i), results[i]);
  }
  // One such operation that threw `code`.
  void failed(Counted operation, ErrorCode code, std::chrono::nanoseconds took);
  // A group commit of `requests` requests (counted when more than one).
  void grouped(std::size_t requests);
  void collected(std::int64_t deleted);
  void expiry_ran(bool failed);

  Metrics snapshot() const;

 private:
  static constexpr std::size_t kOperations = static_cast<std::size_t>(Counted::count);
  // Every Reason, then shadow_denied.
  static constexpr std::size_t kOutcomes = static_cast<std::size_t>(Reason::lease_expired) + 2;
  using ByOutcome = std::array<std::uint64_t, kOutcomes>;
  using ByOperation = std::array<ByOutcome, kOperations>;
  struct Durations {
    std::vector<std::uint64_t> counts;  // bounds_.size() + 1, allocated at construction
    std::uint64_t count = 0;
    double sum_seconds = 0.0;
  };

  void measure(Counted operation, std::chrono::nanoseconds took);
  void count(Counted operation, std::string_view limit, const Result& result);

  std::vector<double> bounds_;  // seconds, the last one the busy timeout
  mutable std::mutex mutex_;
  std::map<std::string, ByOperation, std::less<>> decisions_;
  std::array<Durations, kOperations> durations_;
  std::uint64_t fail_open_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> errors_;
  std::uint64_t group_commits_ = 0;
  std::uint64_t group_commit_requests_ = 0;
  std::uint64_t gc_deleted_ = 0;
  std::uint64_t expiry_runs_ = 0;
  std::uint64_t expiry_failures_ = 0;
};

// Measures an operation for `counters`: the time from construction.
class Measured {
 public:
  Measured(Counters& counters, Counted operation)
      : counters_(counters), operation_(operation), started_(std::chrono::steady_clock::now()) {}
  std::chrono::nanoseconds elapsed() const { return std::chrono::steady_clock::now() - started_; }
  Counters& counters() const { return counters_; }
  Counted operation() const { return operation_; }

 private:
  Counters& counters_;
  Counted operation_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace quota::detail
