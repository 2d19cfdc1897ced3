// Crashes (guarantees): a process killed with SIGKILL at random moments while it consumes never
// leaves the file corrupt, and with synchronous=FULL every consume it was told was allowed is
// in the file; a process killed inside a migration leaves the schema as it was, and the next
// migrate completes it.
#include <SQLiteCpp/Database.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "quota/sqlite.h"
#include "sqlite/sqlite_store.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kDay = 86'400'000;
constexpr std::int64_t T = 19'675 * kDay;      // 2023-11-14T00:00:00Z, the start of a window
constexpr std::int64_t kHuge = 1'000'000'000;  // never reached: every consume is allowed

const std::array<Algorithm, 4> kAlgorithms = {Algorithm::sliding_log, Algorithm::fixed_window,
                                              Algorithm::sliding_window, Algorithm::token_bucket};

std::string limit_of(Algorithm algorithm) { return std::string(to_string(algorithm)); }

bool intact(const std::string& path) {
  RawDb db(path);
  return db.rows("PRAGMA integrity_check") == std::vector<std::vector<std::string>>{{"ok"}};
}

// The child: consumes for ever, round-robin over the algorithms, and after each allowed
// answer writes the algorithm's index as one byte to `report`. The clock stands still, so
// that every algorithm's usage is the number of consumes (no window ends, no token returns).
[[noreturn]] void consume_until_killed(const std::string& path, int report) {
  Options options;
  options.synchronous_full = true;
  options.clock = [] { return T; };
  try {
    Engine engine = Engine::open(path, options);
    for (;;) {
      for (std::size_t a = 0; a < kAlgorithms.size(); ++a) {
        if (!engine.consume(limit_of(kAlgorithms[a]), "u").allowed) _exit(2);
        const char index = static_cast<char>(a);
        if (write(report, &index, 1) != 1) _exit(3);
      }
    }
  } catch (...) {
    _exit(4);
  }
}

TEST_CASE("SIGKILL at random moments: the file stays intact and every reported consume is in it",
          "[crash]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  {
    Options options;
    options.clock = [] { return T; };
    Engine engine = Engine::open(path, options);
    for (const Algorithm algorithm : kAlgorithms) {
      engine.define(make_limit(limit_of(algorithm), algorithm, kHuge, kDay));
    }
  }
  std::mt19937 random(20240601);
  std::vector<std::int64_t> reported(kAlgorithms.size());
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    const int pid = fork_child([&]() -> int {
      close(ends[0]);
      consume_until_killed(path, ends[1]);
    });
    close(ends[1]);
    // Wait for the first round of reports (the child has opened the file and written with
    // every algorithm), then kill it at a random moment of its loop: anywhere in a statement,
    // a commit, or between a commit and its report.
    char index = 0;
    for (std::size_t first = 0; first < kAlgorithms.size(); ++first) {
      REQUIRE(read(ends[0], &index, 1) == 1);
      ++reported[static_cast<std::size_t>(index)];
    }
    const std::chrono::microseconds pause(std::uniform_int_distribution<int>(0, 20'000)(random));
    // Killed, never failed by itself.
    CHECK(kill_and_count_reports(pid, pause, ends[0], reported) == 128 + SIGKILL);

    REQUIRE(intact(path));
    // Every consume the child reported is in the file, and at most one more in all (its
    // commit done, its report not yet written).
    Options options;
    options.clock = [] { return T; };
    Engine engine = Engine::open(path, options);
    std::int64_t unreported = 0;
    for (std::size_t a = 0; a < kAlgorithms.size(); ++a) {
      CAPTURE(limit_of(kAlgorithms[a]));
      const auto usage = engine.usage(limit_of(kAlgorithms[a]));
      const std::int64_t used = usage.empty() ? 0 : usage[0].used;
      CHECK(used >= reported[a]);
      unreported += used - reported[a];
      reported[a] = used;  // the next round counts from what the file holds
    }
    CHECK(unreported <= 1);
  }
}

// Opens `path` on a connection of the test's own and migrates it through Engine{db}, with a
// progress handler that kills the process at SQLite's `kill_at`-th progress check (never for
// 0); returns the checks taken. SQLite counts a handler's N steps within each statement, so a
// kill "after N steps" would land only in a statement of N steps or more, never in a later
// migration made of smaller statements: the handler runs at every check and counts them
// across statements itself.
int migrate_counting_checks(const std::string& path, int kill_at, bool wal) {
  struct Checks {
    int seen = 0;
    int kill_at = 0;
  } checks{0, kill_at};
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec(wal ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode = DELETE");
  db.exec("PRAGMA synchronous = FULL");
  sqlite3_progress_handler(
      db.getHandle(), 1,
      [](void* data) -> int {
        auto* checks = static_cast<Checks*>(data);
        if (++checks->seen == checks->kill_at) raise(SIGKILL);
        return 0;
      },
      &checks);
  Options options;
  options.clock = [] { return T; };
  { Engine engine = quota::sqlite::attach(db, options); }
  sqlite3_progress_handler(db.getHandle(), 0, nullptr, nullptr);
  return checks.seen;
}

[[noreturn]] void migrate_and_die_after(const std::string& path, int steps, bool wal) {
  try {
    migrate_counting_checks(path, steps, wal);
    _exit(0);  // the migration finished before the kill
  } catch (...) {
    _exit(4);
  }
}

// Replaces the database at `to` (and its -wal and -shm files) with a copy of `from`'s.
void copy_database(const std::string& from, const std::string& to) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(to + suffix);
    if (std::filesystem::exists(from + suffix))
      std::filesystem::copy_file(from + suffix, to + suffix);
  }
}

TEST_CASE(
    "SIGKILL inside a migration leaves the previous version, and the next migrate completes "
    "it",
    "[slow][crash][migrations]") {
  const bool wal = GENERATE(true, false);
  CAPTURE(wal);
  TempDir dir;
  const std::string application = dir.file("application.db");
  {
    RawDb db(application);
    db.exec(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); "
        "INSERT INTO notes (body) VALUES ('mine')");
  }
  const std::string path = dir.file("app.db");
  const std::string resumed = dir.file("resumed.db");
  // What the file holds at each version reached: the first state seen at that version, which
  // every later kill that stops there must reproduce exactly.
  std::map<std::int64_t, std::string> at_version{{0, dump(application)}};
  // The checks a whole migration takes, so that kills can be spread over all of it.
  copy_database(application, path);
  const std::string counted = text_of_child(
      [&] { return std::to_string(migrate_counting_checks(path, /*kill_at*/ 0, wal)); });
  CAPTURE(counted);
  const int stride = std::max(std::stoi(counted) / 64, 1);
  int killed = 0;
  // Each round migrates a fresh copy of the application's database and kills it after 1, 2,
  // 4, 8... steps, then every 1/64 of the whole migration on, until a child gets through: a
  // migration that takes more than 1/64 of all the checks is killed inside at least once.
  for (int steps = 1;; steps = steps < stride ? steps * 2 : steps + stride) {
    CAPTURE(steps);
    copy_database(application, path);
    const int pid = fork_child([&]() -> int { migrate_and_die_after(path, steps, wal); });
    const int status = wait_child(pid);
    if (status == 0) break;
    REQUIRE(status == 128 + SIGKILL);
    ++killed;
    REQUIRE(intact(path));
    // A whole number of migrations applied, 1 to v, and exactly the state of version v: no
    // migration half-applied, and the application's rows as they were.
    std::int64_t version = 0;
    {
      RawDb db(path);
      const bool migrated =
          db.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'quota_migrations'") == 1;
      if (migrated) {
        version = db.integer("SELECT coalesce(max(version), 0) FROM quota_migrations");
        CHECK(db.integer("SELECT count(*) FROM quota_migrations") == version);
      }
      CHECK(db.rows("SELECT * FROM notes") == std::vector<std::vector<std::string>>{{"1", "mine"}});
    }
    CAPTURE(version);
    const std::string state = dump(path);
    const auto [seen, first] = at_version.emplace(version, state);
    CHECK(seen->second == state);
    // The next migrate completes it.
    copy_database(path, resumed);
    CHECK(Engine::open(resumed).schema_version() ==
          detail::latest_version(detail::built_in_sqlite_migrations()));
  }
  CHECK(killed > 5);
  // Kills landed inside every migration: each version before the latest was met on the way
  // (the latest only when a kill lands after its commit, in the few steps left after it).
  for (int version = 0; version < detail::latest_version(detail::built_in_sqlite_migrations());
       ++version) {
    CAPTURE(version);
    CHECK(at_version.count(version) == 1);
  }
  Engine engine = Engine::open(path);
  CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
}

}  // namespace
}  // namespace quota::test
