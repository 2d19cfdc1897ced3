// quota_limits.plain (and migration 0016's quota_limits.overridden, set under the same lock)
// on PostgreSQL when two hosts change the configuration at once
// (migrations/postgresql/0010_plain_flag.sql): a limit inserted while another transaction
// inserts its first override, and the last override deleted while another is inserted, end
// with the flag the committed rows call for, in either order of commit. The second
// transaction's trigger waits for the first's advisory lock (seen in pg_locks, not timed) and
// then reads what the first committed; without that lock each would read the other's rows as
// absent and the limit would stay plain with an override.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "backend.h"

namespace quota::test {
namespace {

// One connection of a host, usable from any thread: errors are returned, not reported.
class Host {
 public:
  explicit Host(const std::string& uri) : connection_(PQconnectdb(uri.c_str())) {}
  ~Host() { PQfinish(connection_); }
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;
  bool connected() const { return PQstatus(connection_) == CONNECTION_OK; }
  // Runs `sql`; the error's message, or empty.
  std::string exec(const std::string& sql) {
    PGresult* result = PQexec(connection_, sql.c_str());
    const ExecStatusType status = PQresultStatus(result);
    std::string error;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      error = sql + ": " + PQresultErrorMessage(result);
    }
    PQclear(result);
    return error;
  }

 private:
  PGconn* connection_;
};

// Waits until a transaction waits for an advisory lock: the second host's trigger, queued
// behind the first's transaction. Gives up after a minute (the test then fails below).
bool someone_waits_for_the_flag(const TestDatabase& database) {
  for (int attempt = 0; attempt < 6000; ++attempt) {
    if (database.integer("SELECT count(*) FROM pg_locks "
                         "WHERE locktype = 'advisory' AND NOT granted") > 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::int64_t plain(const TestDatabase& database, const std::string& name) {
  return database.integer("SELECT CASE WHEN plain THEN 1 ELSE 0 END FROM quota_limits "
                          "WHERE name = '" + name + "'");
}

struct Race {
  const char* setup;   // run before, committed
  const char* first;   // the transaction that commits first
  const char* second;  // the one that starts while the first is open
  const char* limit;
  std::int64_t expected;
};

TEST_CASE("the plain flag is exact when two hosts change limits and overrides at once",
          "[plain][postgresql][concurrency]") {
  const Race races[] = {
      // A limit and its first override, each before the other.
      {"", "INSERT INTO quota_limits (name, algorithm, maximum, period_ms) "
           "VALUES ('a', 'fixed_window', 1, 1000)",
       "INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('a', 'u', 'deny')",
       "a", 0},
      {"", "INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('a', 'u', 'deny')",
       "INSERT INTO quota_limits (name, algorithm, maximum, period_ms) "
       "VALUES ('a', 'fixed_window', 1, 1000)",
       "a", 0},
      // The last override deleted while another is inserted, each before the other.
      {"INSERT INTO quota_limits (name, algorithm, maximum, period_ms) "
       "VALUES ('a', 'fixed_window', 1, 1000); "
       "INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('a', 'u', 'deny')",
       "DELETE FROM quota_overrides WHERE owner = 'u'",
       "INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('a', 'v', 'exempt')",
       "a", 0},
      {"INSERT INTO quota_limits (name, algorithm, maximum, period_ms) "
       "VALUES ('a', 'fixed_window', 1, 1000); "
       "INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('a', 'u', 'deny')",
       "INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('*', 'v', 'exempt')",
       "DELETE FROM quota_overrides WHERE owner = 'u'",
       "a", 0},
      // Both overrides gone: plain again.
      {"INSERT INTO quota_limits (name, algorithm, maximum, period_ms) "
       "VALUES ('a', 'fixed_window', 1, 1000); "
       "INSERT INTO quota_overrides (limit_name, owner, policy) "
       "VALUES ('a', 'u', 'deny'), ('*', 'v', 'deny')",
       "DELETE FROM quota_overrides WHERE owner = 'u'",
       "DELETE FROM quota_overrides WHERE owner = 'v'",
       "a", 1},
  };
  for (const Race& race : races) {
    CAPTURE(race.setup, race.first, race.second);
    TestDatabase database(Backend::postgresql);
    { Engine migrated = Engine::open(database.location()); }
    if (*race.setup != '\0') database.exec(race.setup);
    Host first(database.location());
    Host second(database.location());
    REQUIRE(first.connected());
    REQUIRE(second.connected());
    REQUIRE(first.exec("BEGIN") == "");
    REQUIRE(first.exec(race.first) == "");
    std::string second_error;
    std::thread other([&] {
      second_error = second.exec("BEGIN");
      if (second_error.empty()) second_error = second.exec(race.second);
      if (second_error.empty()) second_error = second.exec("COMMIT");
    });
    const bool waited = someone_waits_for_the_flag(database);
    const std::string commit_error = first.exec("COMMIT");
    other.join();
    CHECK(waited);
    CHECK(commit_error == "");
    CHECK(second_error == "");
    CHECK(plain(database, race.limit) == race.expected);
    CHECK(plain(database, race.limit) ==
          database.integer("SELECT CASE WHEN plain THEN 1 ELSE 0 END FROM quota_limits_plain "
                           "WHERE name = '" + std::string(race.limit) + "'"));
    // Migration 0016's overridden flag, set under the same lock: here, the opposite of plain.
    CHECK(database.integer("SELECT CASE WHEN overridden THEN 1 ELSE 0 END FROM quota_limits "
                           "WHERE name = '" + std::string(race.limit) + "'") ==
          1 - race.expected);
  }
}

}  // namespace
}  // namespace quota::test
