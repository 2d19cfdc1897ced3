// Two processes consuming on one owner of one file (WAL, synchronous=NORMAL), at the same time.
//
// The limit is a fixed_window of `maximum` per day and both processes' clocks stand still in
// one window, so exactly min(operations, maximum) consumes may be admitted whatever the
// interleaving: more would be a lost update, fewer a lost admission. Each process opens its
// own connection, builds an engine on it (quota::sqlite::attach) and then either keeps the
// engine's busy handler (Options::busy_timeout) and checkpoint (Options::restart_checkpoint,
// both defaults) or replaces them with SQLite's own (sqlite3_busy_timeout, as a user of SQLite
// would set it, and SQLite's automatic checkpoint of 1000 pages); both wait at most 5 s.
#include <SQLiteCpp/Database.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "bench.h"
#include "quota/sqlite.h"

namespace quota_bench {
namespace {

constexpr const char* kLimit = "contended";
constexpr const char* kOwner = "shared-owner";
constexpr std::int64_t kDayMs = 86'400'000;
constexpr std::int64_t kNowMs = 19'675 * kDayMs + 3'600'000;  // 2023-11-14 01:00 UTC
constexpr std::chrono::milliseconds kBusyTimeout{5000};
constexpr int kSqliteAutocheckpointPages = 1000;  // SQLite's default wal_autocheckpoint
const int kOpenFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;

quota::Options fixed_clock_options() {
  quota::Options options;
  options.clock = [] { return kNowMs; };
  options.busy_timeout = kBusyTimeout;
  return options;
}

// One process: waits until `start_fd` is closed by the parent, then consumes for the budget.
Measurement contend(const std::string& path, BusyWait wait, const Budget& budget, int start_fd) {
  SQLite::Database db(path, kOpenFlags);
  // Even this first statement reads the schema, which can meet the other process's lock
  // (e.g. its WAL checkpoint): wait as an application would, until the engine installs its
  // own handler.
  sqlite3_busy_timeout(db.getHandle(), static_cast<int>(kBusyTimeout.count()));
  db.exec("PRAGMA synchronous = NORMAL");
  quota::Engine engine = quota::sqlite::attach(db, fixed_clock_options());
  if (wait == BusyWait::sqlite_busy_timeout) {
    sqlite3_busy_timeout(db.getHandle(), static_cast<int>(kBusyTimeout.count()));
    sqlite3_wal_autocheckpoint(db.getHandle(), kSqliteAutocheckpointPages);
  }
  char byte;
  while (read(start_fd, &byte, 1) > 0) {
  }
  close(start_fd);

  return measure_consumes(engine, kLimit, kOwner, budget);
}

}  // namespace

const char* busy_wait_name(BusyWait wait) {
  return wait == BusyWait::engine ? "engine" : "sqlite_busy_timeout";
}

ContentionRun run_contention(BusyWait wait, const std::string& work_dir, const Budget& budget,
                             std::int64_t maximum) {
  const std::string path = work_dir + "/contention.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  const Measurement made = in_child(
      [&] {
        SQLite::Database db(path, kOpenFlags);
        db.exec("PRAGMA journal_mode = WAL");
        quota::Engine engine = quota::sqlite::attach(db, fixed_clock_options());
        engine.define({kLimit,
                       quota::Algorithm::fixed_window,
                       maximum,
                       std::chrono::milliseconds(kDayMs),
                       {}});
        return Measurement{};
      },
      nullptr);
  if (made.error[0]) throw std::runtime_error(made.error);

  int start[2];
  open_pipe(start);
  Child children[2];
  for (Child& child : children) {
    child = spawn([&] {
      close(start[1]);
      return contend(path, wait, budget, start[0]);
    });
  }
  close(start[0]);
  close(start[1]);  // both processes start now
  ContentionRun run;
  run.maximum = maximum;
  for (int i = 0; i < 2; ++i) {
    run.process[i] = collect(children[i], &run.peak_rss_kib[i]);
    if (run.process[i].error[0]) throw std::runtime_error(run.process[i].error);
  }
  return run;
}

}  // namespace quota_bench
