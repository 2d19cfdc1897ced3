// What an Engine::watch callback saw, for the test thread to wait on (tests of watches).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "quota/engine.h"

namespace quota::test {

// What a callback saw, for the test thread to wait on.
class Seen {
 public:
  void add(const Usage& usage) {
    {
      std::lock_guard lock(mutex_);
      usages_.push_back(usage);
      threads_.insert(std::this_thread::get_id());
    }
    changed_.notify_all();
  }
  // Waits until `accept` holds for one of the usages seen (up to `timeout`).
  bool wait_for(const std::function<bool(const Usage&)>& accept,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout,
                             [&] { return std::any_of(usages_.begin(), usages_.end(), accept); });
  }
  bool wait_used(std::string_view owner, std::int64_t used,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return wait_for([&](const Usage& u) { return u.owner == owner && u.used == used; }, timeout);
  }
  // Waits until `accept` holds for `count` of the usages seen (up to `timeout`).
  bool wait_count(const std::function<bool(const Usage&)>& accept, std::size_t count,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      return static_cast<std::size_t>(std::count_if(usages_.begin(), usages_.end(), accept)) >=
             count;
    });
  }
  std::vector<Usage> all() const {
    std::lock_guard lock(mutex_);
    return usages_;
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return usages_.size();
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    usages_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Usage> usages_;
  std::set<std::thread::id> threads_;
};

}  // namespace quota::test
