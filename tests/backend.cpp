#include "backend.h"

#include <sqlite3.h>
#if QUOTA_HAS_POSTGRESQL
#include <libpq-fe.h>
#endif

#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <thread>

#if QUOTA_HAS_POSTGRESQL
#include "postgresql/postgresql_store.h"
#endif
#include "sqlite/sqlite_store.h"

namespace quota::test {

const char* to_string(Backend backend) {
  return backend == Backend::sqlite ? "sqlite" : "postgresql";
}

std::string test_server_uri() {
  const char* uri = std::getenv("QUOTA_TEST_POSTGRES");
  if (!uri || !*uri) {
    FAIL(
        "QUOTA_TEST_POSTGRES is not set: run the tests through tools/test.sh, or start a "
        "server with `source tools/postgres.sh && postgres_start` first");
  }
  return uri;
}

#if QUOTA_HAS_POSTGRESQL
namespace {

void ignore_notice(void*, const char*) {}

void run_on_server(const std::string& uri, const std::string& sql) {
  PGconn* connection = PQconnectdb(uri.c_str());
  PQsetNoticeProcessor(connection, ignore_notice, nullptr);
  const bool connected = PQstatus(connection) == CONNECTION_OK;
  std::string error = connected ? "" : PQerrorMessage(connection);
  if (connected) {
    PGresult* result = PQexec(connection, sql.c_str());
    if (PQresultStatus(result) != PGRES_COMMAND_OK && PQresultStatus(result) != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(result);
    }
    PQclear(result);
  }
  PQfinish(connection);
  if (!error.empty()) FAIL("on the test server: " << sql << ": " << error);
}

}  // namespace
#endif

const std::vector<detail::Migration>& built_in_migrations([[maybe_unused]] Backend backend) {
#if QUOTA_HAS_POSTGRESQL
  if (backend == Backend::postgresql) return detail::built_in_postgresql_migrations();
#endif
  return detail::built_in_sqlite_migrations();
}

Backend each_backend() {
  return GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
}

TestDatabase::TestDatabase(Backend backend) : backend_(backend) {
  if (backend == Backend::sqlite) {
    location_ = dir_.file("quota.db");
    return;
  }
#if QUOTA_HAS_POSTGRESQL
  const std::string server = test_server_uri();
  std::random_device random;
  schema_ = "quota_test_" + std::to_string(random()) + std::to_string(random());
  run_on_server(server, "CREATE SCHEMA " + schema_);
  // Every connection of the test finds the engine's tables in the test's own schema.
  location_ = server + (server.find('?') == std::string::npos ? "?" : "&") +
              "options=-csearch_path%3D" + schema_;
#else
  FAIL("this build of quota has no PostgreSQL backend (QUOTA_POSTGRESQL=OFF)");
#endif
}

TestDatabase::~TestDatabase() {
#if QUOTA_HAS_POSTGRESQL
  if (schema_.empty()) return;
  PGconn* connection = PQconnectdb(test_server_uri().c_str());
  PQsetNoticeProcessor(connection, ignore_notice, nullptr);
  PQclear(PQexec(connection, ("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE").c_str()));
  PQfinish(connection);
#endif
}

void TestDatabase::exec(const std::string& sql) const {
  if (backend_ == Backend::sqlite) {
    RawDb(location_).exec(sql);
  } else {
#if QUOTA_HAS_POSTGRESQL
    run_on_server(location_, sql);
#else
    FAIL("this build of quota has no PostgreSQL backend (QUOTA_POSTGRESQL=OFF)");
#endif
  }
}

std::vector<std::vector<std::string>> TestDatabase::rows(const std::string& sql) const {
  if (backend_ == Backend::sqlite) return RawDb(location_).rows(sql);
#if !QUOTA_HAS_POSTGRESQL
  FAIL("this build of quota has no PostgreSQL backend (QUOTA_POSTGRESQL=OFF)");
  return {};
#else
  PGconn* connection = PQconnectdb(location_.c_str());
  PGresult* result = PQexec(connection, sql.c_str());
  std::vector<std::vector<std::string>> found;
  const bool ok = PQresultStatus(result) == PGRES_TUPLES_OK;
  const std::string error = PQresultErrorMessage(result);
  if (ok) {
    for (int r = 0; r < PQntuples(result); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < PQnfields(result); ++c) {
        std::string value = PQgetisnull(result, r, c) ? "NULL" : PQgetvalue(result, r, c);
        if (PQftype(result, c) == 16) value = value == "t" ? "1" : value == "f" ? "0" : value;
        row.push_back(std::move(value));
      }
      found.push_back(std::move(row));
    }
  }
  PQclear(result);
  PQfinish(connection);
  if (!ok) FAIL(sql << ": " << error);
  return found;
#endif
}

std::int64_t TestDatabase::integer(const std::string& sql) const {
  const auto found = rows(sql);
  REQUIRE(found.size() == 1);
  REQUIRE(found[0].size() == 1);
  return std::stoll(found[0][0]);
}

std::string TestDatabase::dump() const {
  if (backend_ == Backend::sqlite) return test::dump(location_);
  std::string text;
  for (const char* table :
       {"quota_limits", "quota_overrides", "quota_anchors", "quota_windows", "quota_log_owners",
        "quota_log", "quota_buckets", "quota_resets", "quota_migrations"}) {
    text += std::string(table) + "\n";
    for (const auto& row : rows(std::string("SELECT * FROM ") + table + " ORDER BY 1, 2")) {
      for (const auto& value : row) text += value + "|";
      text += "\n";
    }
  }
  return text;
}

void TestDatabase::migrate_before(int version) const {
  for (const auto& migration : built_in_migrations(backend_)) {
    if (migration.version >= version) break;
    exec(migration.sql);
    exec("INSERT INTO quota_migrations VALUES (" + std::to_string(migration.version) + ", '" +
         migration.name + "', '" + migration.checksum + "', 0)");
  }
}

Result run_statement(sqlite3* db, detail::Operation operation, detail::StatementKind kind,
                     const std::string& limit, const std::string& owner, std::int64_t cost,
                     std::int64_t now) {
  Result result;
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, detail::statement(operation, kind).c_str(), -1, &statement,
                             nullptr) == SQLITE_OK);
  auto bind = [&](const char* name, auto bind_one) {
    if (const int index = sqlite3_bind_parameter_index(statement, name)) bind_one(index);
  };
  bind(":limit", [&](int i) { sqlite3_bind_text(statement, i, limit.c_str(), -1, nullptr); });
  bind(":owner", [&](int i) { sqlite3_bind_text(statement, i, owner.c_str(), -1, nullptr); });
  bind(":cost", [&](int i) { sqlite3_bind_int64(statement, i, cost); });
  bind(":now", [&](int i) { sqlite3_bind_int64(statement, i, now); });
  const int status = sqlite3_step(statement);
  INFO(sqlite3_errmsg(db));
  REQUIRE(status == SQLITE_ROW);
  result.allowed = sqlite3_column_int64(statement, 0) != 0;
  result.reason =
      parse_reason(reinterpret_cast<const char*>(sqlite3_column_text(statement, 1))).value();
  result.remaining = sqlite3_column_int64(statement, 2);
  result.retry_after_ms = sqlite3_column_int64(statement, 3);
  result.reset_at_ms = sqlite3_column_int64(statement, 4);
  result.denied = sqlite3_column_int64(statement, 5);
  result.shadow_denied = sqlite3_column_int64(statement, 6) != 0;
  REQUIRE(sqlite3_step(statement) == SQLITE_DONE);
  sqlite3_finalize(statement);
  return result;
}

PlainClient::PlainClient(const TestDatabase& database) : backend_(database.backend()) {
  if (backend_ == Backend::sqlite) {
    sqlite_ = std::make_unique<RawDb>(database.location());
    return;
  }
#if QUOTA_HAS_POSTGRESQL
  postgresql_ = PQconnectdb(database.location().c_str());
  REQUIRE(PQstatus(postgresql_) == CONNECTION_OK);
  PQsetNoticeProcessor(postgresql_, ignore_notice, nullptr);
#else
  FAIL("this build of quota has no PostgreSQL backend (QUOTA_POSTGRESQL=OFF)");
#endif
}

PlainClient::~PlainClient() {
#if QUOTA_HAS_POSTGRESQL
  if (postgresql_) PQfinish(postgresql_);
#endif
}

void PlainClient::exec(const std::string& sql) {
  if (sqlite_) {
    sqlite_->exec(sql);
    return;
  }
#if QUOTA_HAS_POSTGRESQL
  PGresult* result = PQexec(postgresql_, sql.c_str());
  const ExecStatusType status = PQresultStatus(result);
  const std::string error = PQresultErrorMessage(result);
  PQclear(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) FAIL(sql << ": " << error);
#else
  FAIL("this build of quota has no PostgreSQL backend (QUOTA_POSTGRESQL=OFF)");
#endif
}

Result PlainClient::run(detail::Operation operation, detail::StatementKind kind,
                        const std::string& limit, const std::string& owner, std::int64_t cost,
                        std::int64_t now) {
  if (sqlite_) {
    return run_statement(sqlite_->handle(), operation, kind, limit, owner, cost, now);
  }
#if !QUOTA_HAS_POSTGRESQL
  FAIL("this build of quota has no PostgreSQL backend (QUOTA_POSTGRESQL=OFF)");
  return {};
#else
  Result result;
  const std::string cost_text = std::to_string(cost);
  const std::string now_text = std::to_string(now);
  const char* values[] = {limit.c_str(), owner.c_str(), cost_text.c_str(), now_text.c_str()};
  const Oid types[] = {25, 25, 20, 20};  // text, text, bigint, bigint
  PGresult* answer = PQexecParams(
      postgresql_, detail::statement(detail::kPostgresql, operation, kind).c_str(), 4, types,
      values, nullptr, nullptr, 0);
  INFO(PQresultErrorMessage(answer));
  const bool one_row = PQresultStatus(answer) == PGRES_TUPLES_OK && PQntuples(answer) == 1;
  if (one_row) {
    auto integer = [&](int column) { return std::stoll(PQgetvalue(answer, 0, column)); };
    auto truth = [&](int column) { return PQgetvalue(answer, 0, column)[0] == 't'; };
    result.allowed = truth(0);
    result.reason = parse_reason(PQgetvalue(answer, 0, 1)).value();
    result.remaining = integer(2);
    result.retry_after_ms = integer(3);
    result.reset_at_ms = integer(4);
    result.denied = integer(5);
    result.shadow_denied = truth(6);
  }
  PQclear(answer);
  REQUIRE(one_row);
  return result;
#endif
}

std::vector<Outcome> queue_behind_a_slow_request(Engine& engine,
                                                 const std::vector<BatchRequest>& requests,
                                                 std::chrono::milliseconds hold) {
  Hooks slow;
  slow.before_consume = [hold](const Request&) {
    std::this_thread::sleep_for(hold);
    return true;
  };
  engine.set_hooks("slow", slow);
  std::vector<Outcome> outcomes(requests.size());
  std::thread holder([&] { engine.consume("slow", "holder"); });
  std::this_thread::sleep_for(hold / 6);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      outcomes[i].caller = std::this_thread::get_id();
      try {
        outcomes[i].result = engine.consume(requests[i].limit, requests[i].owner, requests[i].cost);
      } catch (const std::exception& error) {
        outcomes[i].error = error.what();
      }
    });
    // In order: the first request is first in the queue.
    std::this_thread::sleep_for(hold / 60);
  }
  holder.join();
  for (std::thread& thread : threads) thread.join();
  engine.set_hooks("slow", {});
  return outcomes;
}

}  // namespace quota::test
