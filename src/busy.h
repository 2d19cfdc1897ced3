// A busy handler that waits out another connection's lock promptly.
#pragma once

#include <sqlite3.h>

#include <chrono>

namespace quota::detail {

// SQLite's default busy timeout sleeps in coarse steps (up to 100 ms), so a lock held for
// 50 us can cost a waiter a millisecond or more. This handler yields the processor for the
// first retries, then sleeps with a doubling backoff capped at 1 ms, until `timeout` has
// passed since the first retry of the current wait.
class BusyHandler {
 public:
  explicit BusyHandler(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  // Installs this handler on `db`; the handler must outlive the connection's use of it.
  void install(sqlite3* db);

 private:
  static int on_busy(void* self, int attempt);

  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point started_{};
};

}  // namespace quota::detail
