// Expiry without a scheduler: see src/expiry.h and Options::expire_interval.
//
// Several engines, in one process or many, may each run it on one database: every batch of
// gc decides what is dead inside its own short write transaction (src/gc.cpp), so two passes
// at once only find less to delete, never delete a row that matters.
#include "expiry.h"

#include <optional>
#include <utility>

namespace quota::detail {
namespace {

// Thrown from gc's progress callback to end a pass when the engine closes.
struct Stopped {};

// Rows examined per batch, as `quotactl gc` does by default: a batch holds the write lock
// for about a millisecond.
constexpr std::size_t kBatchRows = 1000;

}  // namespace

Expiry::Expiry(std::function<Engine()> open, std::chrono::milliseconds interval,
               std::function<void(std::optional<std::int64_t>)> ran)
    : open_(std::move(open)),
      interval_(interval),
      ran_(std::move(ran)),
      thread_([this](const std::stop_token& stop) { run(stop); }) {}

Expiry::~Expiry() {
  thread_.request_stop();
  thread_.join();
}

void Expiry::run(const std::stop_token& stop) {
  std::optional<Engine> engine;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, stop, interval_, [] { return false; }) || stop.stop_requested()) {
        return;
      }
    }
    std::optional<std::int64_t> deleted;
    try {
      if (!engine) engine.emplace(open_());
      deleted = engine->gc(kBatchRows, [&](const GcProgress&) {
        if (stop.stop_requested()) throw Stopped{};
      });
    } catch (const Stopped&) {
      return;
    } catch (...) {
      // Busy, or the database gone for a while: a new connection at the next pass.
      engine.reset();
    }
    if (stop.stop_requested()) return;
    ran_(deleted);
  }
}

}  // namespace quota::detail
