// What Engine::metrics() reports, counted as operations answer (src/metrics.cpp). Counting
// takes its own short lock, never the engine's; its budget is 2 % of a consume's instructions.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "quota/error.h"
#include "quota/metrics.h"
#include "quota/result.h"

namespace quota::detail {

class Counters {
 public:
  // One answer of consume, check or record for `limit`, and how long it took.
  void decided(std::string_view limit, const Result& result, std::chrono::nanoseconds took);
  // One such operation that threw `code`.
  void failed(ErrorCode code, std::chrono::nanoseconds took);
  // A group commit of `requests` requests (counted when more than one).
  void grouped(std::size_t requests);
  void collected(std::int64_t deleted);
  void expiry_ran(bool failed);

  Metrics snapshot() const;

 private:
  void measure(std::chrono::nanoseconds took);
  mutable std::mutex mutex_;
  Metrics metrics_;
};

// Measures an operation for `counters`: the time from construction.
class Measured {
 public:
  explicit Measured(Counters& counters)
      : counters_(counters), started_(std::chrono::steady_clock::now()) {}
  std::chrono::nanoseconds elapsed() const { return std::chrono::steady_clock::now() - started_; }
  Counters& counters() const { return counters_; }

 private:
  Counters& counters_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace quota::detail
