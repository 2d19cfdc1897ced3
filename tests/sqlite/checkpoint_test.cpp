// The engine's automatic checkpoint (Options::restart_checkpoint, src/sqlite/checkpoint.h): on by
// default, and then the WAL is started over at the connection's wal_autocheckpoint threshold
// even while other processes keep writing; off, SQLite's own is left; a connection whose
// automatic checkpoint is off stays so; a reader that pins the WAL delays the restart without
// failing a consume; a wait limit cuts a wait short on its thread only.
#include "sqlite/checkpoint.h"

#include <SQLiteCpp/Database.h>
#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "quota/quota.h"
#include "quota/sqlite.h"
#include "sqlite/busy.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kPageSize = 4096;  // SQLite's default

Options restarting() {
  Options options = options_with(ManualClock());
  options.restart_checkpoint = true;
  return options;
}

// A file with one fixed_window limit of 1,000,000 a day, made by Engine::open (WAL mode).
void define_counter(const std::string& path) {
  Engine engine = Engine::open(path, options_with(ManualClock()));
  engine.define(make_limit("counter", Algorithm::fixed_window, 1'000'000, 86'400'000));
}

// The application's own connection with `PRAGMA wal_autocheckpoint = threshold` before the
// Engine is built on it, as the bench's contending processes build theirs.
struct AppConnection {
  explicit AppConnection(const std::string& path, int threshold)
      : db(path, SQLite::OPEN_READWRITE) {
    // As an application would: without a busy timeout its first statement fails at once
    // ("database is locked") when it meets another process recovering the WAL.
    db.setBusyTimeout(5000);
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA wal_autocheckpoint = " + std::to_string(threshold));
  }
  SQLite::Database db;
};

std::int64_t wal_size(const std::string& path) {
  const std::string wal = path + "-wal";
  return std::filesystem::exists(wal) ? static_cast<std::int64_t>(std::filesystem::file_size(wal))
                                      : 0;
}

TEST_CASE("with restart_checkpoint off the engine leaves SQLite's automatic checkpoint alone",
          "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  AppConnection app(path, 50);
  Options options = options_with(ManualClock());
  options.restart_checkpoint = false;
  Engine engine = quota::sqlite::attach(app.db, options);
  CHECK(app.db.execAndGet("PRAGMA wal_autocheckpoint").getInt() == 50);
  CHECK(engine.consume("counter", "u").allowed);
}

// Two processes consuming on one owner of `path` at the same time: each opens its engine with
// `open_engine()`, waits for the other, then runs `consumes` times `consume_one(engine)` (false:
// the child fails). Returns the WAL's size afterwards and checks that every consume counted.
template <typename Open, typename Consume>
std::int64_t wal_after_two_processes(const std::string& path, int consumes, Open open_engine,
                                     Consume consume_one) {
  int start[2];
  REQUIRE(pipe(start) == 0);
  int children[2];
  for (int& child : children) {
    child = fork_child([&] {
      close(start[1]);
      auto engine = open_engine();
      char byte;
      while (read(start[0], &byte, 1) > 0) {
      }
      for (int i = 0; i < consumes; ++i) {
        if (!consume_one(engine)) return 1;
      }
      return 0;
    });
  }
  close(start[0]);
  // Open while the children run, so that the last of them to close does not remove the WAL;
  // it waits out a child's recovery of the WAL, as they wait out each other.
  RawDb keeper(path);
  sqlite3_busy_timeout(keeper.handle(), 5000);
  REQUIRE(keeper.integer("SELECT count(*) FROM quota_limits") == 1);  // now it uses the WAL
  close(start[1]);                                                    // both start now
  for (const int child : children) CHECK(wait_child(child) == 0);
  CHECK(keeper.integer("SELECT sum(used) FROM quota_windows") == 2 * consumes);
  return wal_size(path);
}

// Each of the two processes' consumes: 40,000 commits of a page each, which SQLite's own
// checkpoint keeps nearly all in the WAL (about 39,500 pages, 160 MB, measured), since it
// never starts the WAL over while the two keep committing. The engine's starts it over at
// the threshold plus what the other process commits while the first step copies and syncs:
// a few hundred pages on a quiet machine, up to 11,000 while the rest of the suite ran beside.
constexpr int kContendedConsumes = 20'000;
constexpr std::int64_t kBoundedWalPages = 20'000;

TEST_CASE("with restart_checkpoint the WAL stays bounded while two processes keep consuming",
          "[checkpoint]") {
  // SQLite's automatic checkpoint (PASSIVE) never starts the WAL over while two processes keep
  // committing, so it grows without limit (to 190 MB in 2 s in quota-bench's contention case;
  // 28 MB here without the option).
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  constexpr int kThreshold = 100;
  const std::int64_t wal = wal_after_two_processes(
      path, kContendedConsumes,
      [&] {
        auto app = std::make_unique<AppConnection>(path, kThreshold);
        auto engine = std::make_unique<Engine>(quota::sqlite::attach(app->db, restarting()));
        return std::make_pair(std::move(app), std::move(engine));
      },
      [](auto& opened) { return opened.second->consume("counter", "shared").allowed; });
  CHECK(wal < kBoundedWalPages * kPageSize);
}

// An engine opened through the C API, closed with it.
struct CEngine {
  quota_engine* engine = nullptr;
  ~CEngine() { quota_close(engine); }
};

TEST_CASE("the C API's default checkpoint keeps the WAL bounded the same way",
          "[checkpoint][c_api]") {
  // quota_open's own connection, at SQLite's default threshold of 1000 pages: with SQLite's
  // own checkpoint the two processes' 2 x 8,000 commits stay in the WAL.
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  quota_options options;
  quota_options_init(&options);
  CHECK(options.restart_checkpoint == 1);  // on by default
  const std::int64_t wal = wal_after_two_processes(
      path, kContendedConsumes,
      [&] {
        auto opened = std::make_unique<CEngine>();
        if (quota_open(path.data(), path.size(), &options, &opened->engine) != QUOTA_OK) {
          std::_Exit(3);
        }
        return opened;
      },
      [](auto& opened) {
        quota_result result;
        return quota_consume(opened->engine, "counter", 7, "shared", 6, 1, &result) == QUOTA_OK &&
               result.allowed == 1;
      });
  CHECK(wal < kBoundedWalPages * kPageSize);
}

TEST_CASE("a connection whose automatic checkpoint is off keeps it off", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  AppConnection app(path, 0);
  Engine engine = quota::sqlite::attach(app.db, restarting());
  CHECK(app.db.execAndGet("PRAGMA wal_autocheckpoint").getInt() == 0);
  for (int i = 0; i < 1'200; ++i) REQUIRE(engine.consume("counter", "u").allowed);
  // Never checkpointed: the WAL holds every commit, past SQLite's default 1000 pages.
  CHECK(wal_size(path) > 1'000 * kPageSize);
}

TEST_CASE("by default the engine's checkpoint starts the WAL over at the connection's threshold",
          "[checkpoint]") {
  CHECK(Options{}.restart_checkpoint);
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  AppConnection app(path, 50);
  Engine engine = quota::sqlite::attach(app.db, options_with(ManualClock()));
  // The engine's hook replaced SQLite's, which is what the pragma reports; setting it again
  // would put SQLite's own back.
  CHECK(app.db.execAndGet("PRAGMA wal_autocheckpoint").getInt() == 0);
  for (int i = 0; i < 2'000; ++i) REQUIRE(engine.consume("counter", "u").allowed);
  CHECK(wal_size(path) < 200 * kPageSize);
}

TEST_CASE("a reader that pins the WAL delays the restart but fails no consume", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  AppConnection app(path, 50);
  Options options = restarting();
  options.busy_timeout = std::chrono::milliseconds(100);
  Engine engine = quota::sqlite::attach(app.db, options);
  RawDb reader(path);
  reader.exec("BEGIN");
  CHECK(reader.integer("SELECT count(*) FROM quota_limits") == 1);  // a snapshot, held
  for (int i = 0; i < 300; ++i) REQUIRE(engine.consume("counter", "u").allowed);
  CHECK(wal_size(path) > 200 * kPageSize);  // the reader kept every page
  reader.exec("COMMIT");
  // The restart is tried again within kRestartBackoff; then the WAL is started over.
  std::this_thread::sleep_for(detail::kRestartBackoff);
  const std::int64_t pinned = wal_size(path);
  for (int i = 0; i < 2'000; ++i) REQUIRE(engine.consume("counter", "u").allowed);
  CHECK(wal_size(path) < pinned + 10 * kPageSize);  // reused from its start, not grown
  RawDb check(path);
  CHECK(check.integer("SELECT sum(used) FROM quota_windows") == 2'300);
}

TEST_CASE("a wait limit cuts a wait short on its own thread only", "[checkpoint][busy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_counter(path);
  Engine engine = Engine::open(path, options_with(ManualClock()));  // the default 5 s timeout
  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");
  const auto started = std::chrono::steady_clock::now();
  {
    const detail::BusyHandler::WaitLimit limit(std::chrono::milliseconds(50));
    CHECK_THROWS_AS(engine.consume("counter", "u"), Error);
  }
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(50));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  holder.exec("ROLLBACK");
  CHECK(engine.consume("counter", "u").allowed);
}

}  // namespace
}  // namespace quota::test
