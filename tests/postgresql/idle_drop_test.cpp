// A connection the server dropped while idle (pg_terminate_backend, a restart,
// idle_session_timeout) is found dropped before the next request is sent, and made again: every
// call succeeds and counts (SPEC §12). Before, libpq still said CONNECTION_OK and the next call
// met the drop: it failed with busy, or was admitted uncounted under fail-open.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "postgresql/private_server.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr int kCalls = 5;

// How many of the server's backends carry `application_name`.
int backends_named(const PrivateServer& server, const std::string& application_name) {
  const std::string uri = server.uri();
  PGconn* connection = PQconnectdb(uri.c_str());
  REQUIRE(PQstatus(connection) == CONNECTION_OK);
  const std::string sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                          application_name + "'";
  PGresult* result = PQexec(connection, sql.c_str());
  REQUIRE(PQresultStatus(result) == PGRES_TUPLES_OK);
  const int count = std::stoi(PQgetvalue(result, 0, 0));
  PQclear(result);
  PQfinish(connection);
  return count;
}

TEST_CASE("a PostgreSQL connection dropped while idle is made again before the next request",
          "[slow][postgresql][idle]") {
  PrivateServer server;
  ManualClock clock;
  // fail_closed (the default), so that a request that met the drop throws, saying so.
  Options options = options_with(clock);
  options.failure_policy = FailurePolicy::fail_closed;
  std::string parameters = "application_name=quota_idle";
  const std::string how = GENERATE(as<std::string>(), "pg_terminate_backend", "restart",
                                   "idle_session_timeout");
  CAPTURE(how);
  if (how == "idle_session_timeout") parameters += "&options=-cidle_session_timeout%3D1000";
  Engine engine = Engine::open(server.uri("postgres", "", parameters), options);
  engine.define(make_limit("send", Algorithm::fixed_window, 100, 3'600'000));
  for (int call = 0; call < kCalls; ++call) {
    CAPTURE(call);
    if (how == "pg_terminate_backend") {
      // Returns once the backend has ended (the timeout argument waits for it).
      server.exec(
          "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE "
          "application_name = 'quota_idle'");
    } else if (how == "restart") {
      server.restart();
    } else {
      // The server ends the idle session after a second: wait until it has. (A second, not
      // less: the engine must not sit idle that long between the statements of one call,
      // even on a loaded machine, or the drop would cut a call rather than precede it.)
      while (backends_named(server, "quota_idle") > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    const Result result = engine.consume("send", "owner");
    CHECK(result.allowed);
    CHECK(result.reason == Reason::ok);
    CHECK(result.remaining == 100 - call - 1);
  }
  CHECK(engine.owner_usage("send", "owner").used == kCalls);
}

}  // namespace
}  // namespace quota::test
