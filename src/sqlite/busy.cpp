#include "sqlite/busy.h"

#include <SQLiteCpp/Exception.h>

#include <algorithm>
#include <cstdint>
#include <thread>

namespace quota::detail {

namespace {
thread_local std::chrono::steady_clock::time_point wait_started;
thread_local std::chrono::milliseconds wait_limit = std::chrono::milliseconds::max();
// The end of the current wait_out on this thread: no wait of the handler goes past it.
thread_local std::chrono::steady_clock::time_point wait_deadline =
    std::chrono::steady_clock::time_point::max();
// The waits on this thread that gave up because the busy timeout had passed.
thread_local std::uint64_t timed_out = 0;

bool is_busy(const SQLite::Exception& error) {
  const int code = error.getErrorCode() & 0xFF;
  return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}
}  // namespace

void BusyHandler::install(sqlite3* db) const {
  const auto timeout_ms = static_cast<std::uintptr_t>(std::max<std::int64_t>(timeout_.count(), 0));
  sqlite3_busy_handler(db, &BusyHandler::on_busy, reinterpret_cast<void*>(timeout_ms));
}

BusyHandler::WaitLimit::WaitLimit(std::chrono::milliseconds limit) : previous_(wait_limit) {
  wait_limit = std::min(limit, previous_);
}

BusyHandler::WaitLimit::~WaitLimit() { wait_limit = previous_; }

void BusyHandler::wait_out(const std::function<void()>& step, sqlite3* db) const {
  using std::chrono::steady_clock;
  const auto now = steady_clock::now();
  // A timeout too long to add to the clock never ends.
  const auto deadline = timeout_ < std::chrono::duration_cast<std::chrono::milliseconds>(
                                       steady_clock::time_point::max() - now)
                            ? now + timeout_
                            : steady_clock::time_point::max();
  struct Restore {
    steady_clock::time_point previous = wait_deadline;
    ~Restore() { wait_deadline = previous; }
  } restore;
  wait_deadline = std::min(deadline, restore.previous);
  for (int attempt = 0;; ++attempt) {
    try {
      step();
      return;
    } catch (const SQLite::Exception& error) {
      const bool in_transaction = db != nullptr && sqlite3_get_autocommit(db) == 0;
      if (!is_busy(error) || in_transaction) throw;
      if (steady_clock::now() >= wait_deadline) {
        ++timed_out;
        throw;
      }
    }
    const auto pause_end = std::min(steady_clock::now() + pause(kYields + attempt), wait_deadline);
    std::this_thread::sleep_until(pause_end);
  }
}

std::uint64_t BusyHandler::timeouts() { return timed_out; }

std::chrono::microseconds BusyHandler::pause(int attempt) {
  if (attempt < kYields) return std::chrono::microseconds(0);
  const int doublings = std::min(attempt - kYields, 16);  // bounded, so the shift cannot overflow
  return std::min(std::chrono::microseconds(16 << doublings), kLongestPause);
}

int BusyHandler::on_busy(void* timeout_ms, int attempt) {
  const std::chrono::milliseconds timeout(reinterpret_cast<std::uintptr_t>(timeout_ms));
  const auto now = std::chrono::steady_clock::now();
  if (attempt == 0) wait_started = now;
  if (now - wait_started >= std::min(timeout, wait_limit) || now >= wait_deadline) {
    // A shorter WaitLimit's end is not the timeout's.
    if (now - wait_started >= timeout || now >= wait_deadline) ++timed_out;
    return 0;  // give up: SQLITE_BUSY
  }
  const std::chrono::microseconds wait = pause(attempt);
  if (wait.count() == 0) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(wait);
  }
  return 1;
}

}  // namespace quota::detail
