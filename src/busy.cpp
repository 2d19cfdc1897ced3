#include "busy.h"

#include <algorithm>
#include <cstdint>
#include <thread>

namespace quota::detail {

namespace {
thread_local std::chrono::steady_clock::time_point wait_started;
thread_local std::chrono::milliseconds wait_limit = std::chrono::milliseconds::max();
}  // namespace

void BusyHandler::install(sqlite3* db) const {
  const auto timeout_ms = static_cast<std::uintptr_t>(std::max<std::int64_t>(timeout_.count(), 0));
  sqlite3_busy_handler(db, &BusyHandler::on_busy, reinterpret_cast<void*>(timeout_ms));
}

BusyHandler::WaitLimit::WaitLimit(std::chrono::milliseconds limit) { wait_limit = limit; }

BusyHandler::WaitLimit::~WaitLimit() { wait_limit = std::chrono::milliseconds::max(); }

std::chrono::microseconds BusyHandler::pause(int attempt) {
  if (attempt < kYields) return std::chrono::microseconds(0);
  const int doublings = std::min(attempt - kYields, 16);  // bounded, so the shift cannot overflow
  return std::min(std::chrono::microseconds(16 << doublings), kLongestPause);
}

int BusyHandler::on_busy(void* timeout_ms, int attempt) {
  const std::chrono::milliseconds timeout(reinterpret_cast<std::uintptr_t>(timeout_ms));
  const auto now = std::chrono::steady_clock::now();
  if (attempt == 0) wait_started = now;
  if (now - wait_started >= std::min(timeout, wait_limit)) return 0;  // give up: SQLITE_BUSY
  const std::chrono::microseconds wait = pause(attempt);
  if (wait.count() == 0) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(wait);
  }
  return 1;
}

}  // namespace quota::detail
