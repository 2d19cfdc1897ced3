// A busy handler that waits out another connection's lock promptly.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace quota::detail {

// SQLite's default busy timeout sleeps in coarse steps (up to 100 ms), so a lock held for
// 50 us can cost a waiter a millisecond or more. This handler yields the processor for the
// first retries, then sleeps with a doubling backoff capped at 128 us, until `timeout` has
// passed since the first retry of the current wait.
//
// The handler keeps no object alive: the timeout travels in SQLite's context pointer and the
// start of the current wait is per thread (a thread waits on one statement at a time). So a
// connection may outlive the Engine that installed the handler on it, as an application's
// own connection does.
class BusyHandler {
 public:
  explicit BusyHandler(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  // Installs the handler on `db`, replacing any other busy handler or timeout.
  void install(sqlite3* db) const;

  // How many waits on this thread have given up because the timeout had passed (the
  // handler's, or wait_out's). SQLite also answers busy without any wait (see wait_out): a
  // busy failure after which this count has not grown did not wait out the timeout.
  static std::uint64_t timeouts();

  // How long the `attempt`th retry (0, 1, ...) of one wait pauses: zero (a yield of the
  // processor) for the first kYields, then 16 us doubling up to kLongestPause.
  static std::chrono::microseconds pause(int attempt);
  static constexpr int kYields = 16;
  // 128 us rather than 1 ms: it shortens the slowest consume of two processes contending for
  // one owner (docs/performance-notes.md, "Figures behind the code's choices").
  static constexpr std::chrono::microseconds kLongestPause{128};

  // While one is alive, a wait on this thread gives up after `limit` even when the handler's
  // own timeout is longer (the shorter of the two wins). A checkpoint that holds the write
  // lock while it waits for readers uses it, so that other writers are not held up for the
  // whole busy timeout. Nests: the shortest limit alive wins.
  class WaitLimit {
   public:
    explicit WaitLimit(std::chrono::milliseconds limit);
    ~WaitLimit();
    WaitLimit(const WaitLimit&) = delete;
    WaitLimit& operator=(const WaitLimit&) = delete;

   private:
    std::chrono::milliseconds previous_;
  };

  // Runs `step`, and runs it again while it fails with SQLITE_BUSY or SQLITE_LOCKED, pausing
  // as a wait does, until the timeout has passed since the first run; then throws the last
  // failure (SQLite::Exception), so a busy error always means the whole timeout has passed.
  // SQLite answers busy at once, without calling any busy handler, where waiting could
  // deadlock or in steps that never wait: the switch to WAL, a read lock that a write needs
  // to upgrade while another connection writes, reading a schema another connection is
  // changing. Openers of a new file meet exactly these. Every wait of the handler inside
  // `step` ends by the same deadline.
  //
  // `step` must be safe to run again: it opens its own connection, or it leaves no
  // transaction open on `db` when it fails. When `db` is given and is inside a transaction
  // after a failure (the application's own), the failure is thrown at once.
  //
  // The one place where the library and quotactl wait out the opening of a file.
  void wait_out(const std::function<void()>& step, sqlite3* db = nullptr) const;

 private:
  static int on_busy(void* timeout_ms, int attempt);

  std::chrono::milliseconds timeout_;
};

}  // namespace quota::detail
