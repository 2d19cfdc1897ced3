// Engine::watch: one thread per Engine that reads the watched owners' usage when something
// may have changed it, and calls the watches' callbacks.
//
// What may change an owner's usage, and how the watcher learns of it:
//   - a write through this Engine: the engine pokes the hub (WatchHub::poke) after it;
//   - a write by another connection (another Engine, another process): the reader's marker
//     (PRAGMA data_version on SQLite, the current snapshot on PostgreSQL) differs from the one
//     seen last; it is asked every Options::watch_interval;
//   - time alone: next_change() computes from the owner's state the next instant its usage
//     changes if nothing is written, and the hub wakes at that instant of Options::clock.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "quota/engine.h"
#include "statements.h"

namespace quota::detail {

// What the hub asks of the database. Each call takes whatever lock its connection needs and
// releases it before returning.
class WatchReader {
 public:
  virtual ~WatchReader() = default;
  // Now, by Options::clock (or the server's clock).
  virtual std::int64_t now() = 0;
  // Changes whenever another connection may have committed a change; empty when no other
  // connection can (an in-memory database).
  virtual std::string marker() = 0;
  // The limit's statements' kind (src/statements.h), read afresh; nullopt when there is no
  // such limit.
  virtual std::optional<StatementKind> kind(std::string_view limit) = 0;
  // The owners with state of `limit`.
  virtual std::vector<std::string> owners(StatementKind kind, std::string_view limit) = 0;
  // `owner`'s usage at `at`, and the check of `cost` at `at`; nullopt when the limit is gone.
  virtual std::optional<std::pair<Usage, Result>> read(StatementKind kind, std::string_view limit,
                                                       std::string_view owner, std::int64_t cost,
                                                       std::int64_t at) = 0;
};

// The check of `cost` at a time: what next_change asks (a check changes nothing).
// Answers the owner's usage at `at` and the check of `cost` at `at`.
using Probe = std::function<std::pair<Usage, Result>(std::int64_t cost, std::int64_t at)>;

// The next instant after `now` at which `usage` (read at `now`) changes if nothing is
// written, or nullopt when it never does. One function per algorithm (src/watch.cpp).
std::optional<std::int64_t> next_change(Algorithm algorithm, const Usage& usage, std::int64_t now,
                                        const Probe& probe);

// One watch: its callback and what the hub last delivered to it.
struct Subscription {
  std::string limit;
  std::optional<std::string> owner;  // none: every owner
  WatchCallback callback;

  // The hub's own (its thread only).
  bool stale = true;  // to be read at the next look whatever else changed (new, or a read failed)
  std::map<std::string, Usage, std::less<>> delivered;
  std::map<std::string, std::int64_t, std::less<>> next;  // owner -> its next change
  std::optional<std::int64_t> next_at;                    // the earliest of `next`

  // Shared with the handle.
  std::mutex mutex;
  std::condition_variable idle;
  bool ended = false;
  bool running = false;
  std::thread::id runner;
  std::exception_ptr failure;

  // Calls the callback unless the watch has ended; false when it has (or ends now because
  // the callback threw).
  bool deliver(const Usage& usage);
  // Ends the watch, waiting for a call running on another thread.
  void end(std::exception_ptr why = nullptr) noexcept;
  bool active() noexcept;
};

// Writes through the engine closer together than this are read once: a busy Engine's
// consumes do not each cost a look.
inline constexpr std::chrono::milliseconds kPokeGap{5};

class WatchHub {
 public:
  WatchHub(std::unique_ptr<WatchReader> reader, std::chrono::milliseconds interval);
  ~WatchHub();  // stop()
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  void add(std::shared_ptr<Subscription> subscription);
  // Something was written through the engine: look again now.
  void poke();
  // Ends every watch and joins the thread.
  void stop() noexcept;

 private:
  void run();
  // Reads and delivers what changed for each subscription (each of them when `poked`);
  // returns the earliest next change that time alone makes.
  std::optional<std::int64_t> refresh(
      const std::vector<std::shared_ptr<Subscription>>& subscriptions, bool poked);
  void refresh_one(WatchReader& reader, Subscription& subscription, std::int64_t now);

  std::unique_ptr<WatchReader> reader_;
  std::chrono::milliseconds interval_;
  std::string marker_;

  std::mutex mutex_;
  std::condition_variable wake_;
  // Set by poke() without the lock, so that a burst of writes costs each one an atomic
  // exchange; only the first after a look takes the lock to wake the thread.
  std::atomic<bool> poked_{false};
  bool added_ = false;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Subscription>> subscriptions_;
  std::thread thread_;
};

}  // namespace quota::detail
