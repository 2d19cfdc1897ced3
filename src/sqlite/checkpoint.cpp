#include "sqlite/checkpoint.h"

#include <algorithm>
#include <cstdint>

#include "sqlite/busy.h"

namespace quota::detail {

namespace {

// The connection whose last restart was refused on this thread, and until when it rests.
thread_local sqlite3* refused_connection = nullptr;
thread_local std::chrono::steady_clock::time_point refused_until;

int on_commit(void* threshold, sqlite3* db, const char* schema, int pages) {
  if (pages < static_cast<int>(reinterpret_cast<std::intptr_t>(threshold))) return SQLITE_OK;
  const auto now = std::chrono::steady_clock::now();
  if (db == refused_connection && now < refused_until) return SQLITE_OK;
  // First the copying and its fsyncs, without the write lock: other writers go on meanwhile.
  // Refused only while another connection checkpoints, which restarts the WAL itself.
  if (sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr) !=
      SQLITE_OK) {
    return SQLITE_OK;
  }
  // Then, with the write lock, what others committed meanwhile (a few pages), and the restart.
  int restart_frames = -1;  // stays -1 when another connection is checkpointing: not refused
  int restart_status;
  {
    const BusyHandler::WaitLimit limit(kRestartWait);
    restart_status =
        sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_RESTART, &restart_frames, nullptr);
  }
  if (restart_status == SQLITE_BUSY && restart_frames >= 0) {
    refused_connection = db;
    refused_until = now + kRestartBackoff;
  }
  // The commit has succeeded whatever the checkpoint did; as with SQLite's own, a checkpoint
  // that failed is left to a later commit.
  return SQLITE_OK;
}

// PRAGMA wal_autocheckpoint: the threshold of SQLite's own automatic checkpoint, 0 when it is
// off or another hook replaced it.
int automatic_checkpoint_threshold(sqlite3* db) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA wal_autocheckpoint", -1, &statement, nullptr) != SQLITE_OK) {
    return 0;
  }
  const int threshold =
      sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int(statement, 0) : 0;
  sqlite3_finalize(statement);
  return threshold;
}

}  // namespace

void install_checkpoint(sqlite3* db) {
  const int threshold = automatic_checkpoint_threshold(db);
  if (threshold <= 0) return;
  // Half the threshold: the WAL keeps growing while the first step copies and syncs, and
  // stays within the threshold; and another process's writer, which the write lock does not
  // queue, gets it at the latest when this one pauses for a checkpoint.
  const std::intptr_t start = std::max(threshold / 2, 1);
  sqlite3_wal_hook(db, &on_commit, reinterpret_cast<void*>(start));
}

}  // namespace quota::detail
