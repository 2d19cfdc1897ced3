#include "busy.h"

#include <algorithm>
#include <thread>

namespace quota::detail {

void BusyHandler::install(sqlite3* db) { sqlite3_busy_handler(db, &BusyHandler::on_busy, this); }

int BusyHandler::on_busy(void* self, int attempt) {
  auto* handler = static_cast<BusyHandler*>(self);
  const auto now = std::chrono::steady_clock::now();
  if (attempt == 0) handler->started_ = now;
  if (now - handler->started_ >= handler->timeout_) return 0;  // give up: SQLITE_BUSY
  constexpr int kYields = 16;
  if (attempt < kYields) {
    std::this_thread::yield();
  } else {
    const int doublings = std::min(attempt - kYields, 6);
    std::this_thread::sleep_for(std::chrono::microseconds(16 << doublings));  // 16 us .. 1 ms
  }
  return 1;
}

}  // namespace quota::detail
