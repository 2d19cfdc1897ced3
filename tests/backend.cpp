#include "backend.h"

#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

namespace quota::test {

const char* to_string(Backend backend) {
  return backend == Backend::sqlite ? "sqlite" : "postgresql";
}

std::string test_server_uri() {
  const char* uri = std::getenv("QUOTA_TEST_POSTGRES");
  if (!uri || !*uri) {
    FAIL("QUOTA_TEST_POSTGRES is not set: run the tests through tools/test.sh, or start a "
         "server with `source tools/postgres.sh && postgres_start` first");
  }
  return uri;
}

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

TestDatabase::TestDatabase(Backend backend) : backend_(backend) {
  if (backend == Backend::sqlite) {
    location_ = dir_.file("quota.db");
    return;
  }
  const std::string server = test_server_uri();
  std::random_device random;
  schema_ = "quota_test_" + std::to_string(random()) + std::to_string(random());
  run_on_server(server, "CREATE SCHEMA " + schema_);
  // Every connection of the test finds the engine's tables in the test's own schema.
  location_ = server + (server.find('?') == std::string::npos ? "?" : "&") +
              "options=-csearch_path%3D" + schema_;
}

TestDatabase::~TestDatabase() {
  if (schema_.empty()) return;
  PGconn* connection = PQconnectdb(test_server_uri().c_str());
  PQsetNoticeProcessor(connection, ignore_notice, nullptr);
  PQclear(PQexec(connection, ("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE").c_str()));
  PQfinish(connection);
}

void TestDatabase::exec(const std::string& sql) const {
  if (backend_ == Backend::sqlite) {
    RawDb(location_).exec(sql);
  } else {
    run_on_server(location_, sql);
  }
}

}  // namespace quota::test
