// The backends a test can run on, and a fresh database of each for one test.
//
// Tests that go through Engine or quotactl and hold on every backend take a Backend from
// GENERATE(kAllBackends) and open their engine on a TestDatabase of it: a file in a folder of
// its own for SQLite, a schema of its own in the test server for PostgreSQL. The test command
// (tools/test.sh) starts that server and names it in $QUOTA_TEST_POSTGRES; without it a
// PostgreSQL test fails, saying how to start one.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "migrations.h"
#include "quota/engine.h"
#include "statements.h"
#include "support.h"

struct pg_conn;  // libpq's PGconn

namespace quota::test {

enum class Backend { sqlite, postgresql };

// Every backend this build has: SQLite alone in a build without PostgreSQL
// (QUOTA_POSTGRESQL=OFF), where tests/postgresql/ is not compiled.
#if QUOTA_HAS_POSTGRESQL
inline constexpr Backend kAllBackends[] = {Backend::sqlite, Backend::postgresql};
#else
inline constexpr Backend kAllBackends[] = {Backend::sqlite};
#endif

const char* to_string(Backend backend);

// In a test case: runs it once per backend (Catch's GENERATE over kAllBackends) and returns
// this run's. Call it once per test case, and CAPTURE what it returns.
Backend each_backend();

class TestDatabase {
 public:
  explicit TestDatabase(Backend backend);
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  Backend backend() const { return backend_; }
  // What Engine::open and quotactl --db take: a file's path, or a connection URI.
  const std::string& location() const { return location_; }
  // Runs `sql` on the database outside any engine (PostgreSQL: in the test's schema).
  void exec(const std::string& sql) const;
  // Rows of `sql`, every value as text ("NULL" for NULL; PostgreSQL's booleans as 1 and 0).
  std::vector<std::vector<std::string>> rows(const std::string& sql) const;
  // The single value of `sql` as an integer.
  std::int64_t integer(const std::string& sql) const;
  // Every row of every quota_* table, ordered, to prove that an operation changed nothing.
  std::string dump() const;
  // Applies this backend's built-in migrations before `version`, recording each in
  // quota_migrations, as a build before that migration left the database.
  void migrate_before(int version) const;

 private:
  Backend backend_;
  TempDir dir_;
  std::string schema_;
  std::string location_;
};

// The built-in migrations of `backend`, by version.
const std::vector<detail::Migration>& built_in_migrations(Backend backend);

// The URI of the test server's database ($QUOTA_TEST_POSTGRES); fails the test without it.
std::string test_server_uri();

// The statement of (operation, kind) run on a plain SQLite connection, as any SQLite client
// would run it; fails the test when it returns no row or fails. An Algorithm stands for its
// general statements (a limit without a calendar period).
Result run_statement(sqlite3* db, detail::Operation operation, detail::StatementKind kind,
                     const std::string& limit, const std::string& owner, std::int64_t cost,
                     std::int64_t now);
inline Result run_statement(sqlite3* db, detail::Operation operation, Algorithm algorithm,
                            const std::string& limit, const std::string& owner,
                            std::int64_t cost, std::int64_t now) {
  return run_statement(db, operation, detail::kind_of(algorithm), limit, owner, cost, now);
}

// A plain SQL client of a TestDatabase, outside any engine, as an application in another
// language would be: it runs the statements that `quotactl sql` prints (src/statements.cpp,
// in the database's dialect) with the four parameters bound, and any other SQL.
class PlainClient {
 public:
  explicit PlainClient(const TestDatabase& database);
  ~PlainClient();
  PlainClient(const PlainClient&) = delete;
  PlainClient& operator=(const PlainClient&) = delete;

  // The statement of (operation, kind) for the request; fails the test when it returns no
  // row or fails. An Algorithm stands for its general statements, as in run_statement.
  Result run(detail::Operation operation, detail::StatementKind kind, const std::string& limit,
             const std::string& owner, std::int64_t cost, std::int64_t now);
  Result run(detail::Operation operation, Algorithm algorithm, const std::string& limit,
             const std::string& owner, std::int64_t cost, std::int64_t now) {
    return run(operation, detail::kind_of(algorithm), limit, owner, cost, now);
  }
  void exec(const std::string& sql);

 private:
  Backend backend_;
  std::unique_ptr<RawDb> sqlite_;
  struct pg_conn* postgresql_ = nullptr;
};

// A fresh database of `backend` with an Engine on it (its clock standing still until the test
// moves it) and a plain client beside it: the per-backend fixture of tests/common/.
struct EngineOn {
  explicit EngineOn(Backend backend)
      : database(backend),
        engine(Engine::open(database.location(), options_with(clock))),
        raw(database) {}
  TestDatabase database;
  ManualClock clock;
  Engine engine;
  PlainClient raw;
};

// Every state row's key, "table|limit|owner[|at_ms]", to compare sets of rows: of a
// TestDatabase, or of a RawDb.
template <typename Database>
std::set<std::string> state_keys(Database& db) {
  std::set<std::string> keys;
  for (const auto& row : db.rows("SELECT limit_name, owner, at_ms FROM quota_log")) {
    keys.insert("quota_log|" + row[0] + "|" + row[1] + "|" + row[2]);
  }
  for (const char* table : {"quota_log_owners", "quota_windows", "quota_buckets"}) {
    for (const auto& row : db.rows(std::string("SELECT limit_name, owner FROM ") + table)) {
      keys.insert(std::string(table) + "|" + row[0] + "|" + row[1]);
    }
  }
  return keys;
}

// The scene of the group commit tests: a thread holds `engine` for `hold` inside a
// before_consume hook of limit "slow" (which must exist) while each of `requests` arrives, in
// order, from a thread of its own, and queues; the next thread to get the connection runs
// them as one batch (Options::group_commit). Returns each request's answer or error, and
// the thread that asked.
struct Outcome {
  std::optional<Result> result;
  std::string error;
  std::thread::id caller;
};
std::vector<Outcome> queue_behind_a_slow_request(Engine& engine,
                                                 const std::vector<BatchRequest>& requests,
                                                 std::chrono::milliseconds hold);

}  // namespace quota::test
