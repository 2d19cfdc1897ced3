// Expiry without a scheduler (Options::expire_interval): a thread of the Engine's that runs
// gc's bounded batches every interval on a connection of its own (src/expiry.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "quota/engine.h"

namespace quota::detail {

class Expiry {
 public:
  // Every `interval`, runs gc on the Engine that `open` returns (opened at the first pass, on
  // this thread, and again after a pass that failed), and tells `ran` how many rows it
  // deleted (or that the pass failed: nullopt). The first pass comes one interval after the
  // start.
  Expiry(std::function<Engine()> open, std::chrono::milliseconds interval,
         std::function<void(std::optional<std::int64_t> deleted)> ran);
  // Stops the thread: a pass under way ends after its current batch, a wait at once.
  ~Expiry();
  Expiry(const Expiry&) = delete;
  Expiry& operator=(const Expiry&) = delete;

 private:
  void run(const std::stop_token& stop);

  std::function<Engine()> open_;
  std::chrono::milliseconds interval_;
  std::function<void(std::optional<std::int64_t>)> ran_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: started once the members it uses exist
};

}  // namespace quota::detail
