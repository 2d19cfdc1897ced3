// What the engine says for a statement the server cancelled (SQLSTATE 57014,
// statement_timeout) and for a read-only server or session (25006): what happened and what to
// do, each. Before, a statement timeout was reported as a server that could not be reached.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <string>

#include "postgresql/private_server.h"
#include "support.h"

namespace quota::test {
namespace {

template <typename Operation>
Error failure_of(Operation&& operation) {
  try {
    operation();
  } catch (const Error& error) {
    return error;
  }
  FAIL("the operation succeeded");
  throw;  // not reached
}

TEST_CASE("a statement cancelled by statement_timeout says so and what to do",
          "[postgresql][sqlstate]") {
  PrivateServer server;
  ManualClock clock;
  Engine engine =
      Engine::open(server.uri("postgres", "", "options=-cstatement_timeout%3D200"),
                   options_with(clock));
  engine.define(make_limit("send", Algorithm::fixed_window, 5, 60'000));
  // Another connection holds the state table: the consume waits, past statement_timeout
  // (200 ms) and well before lock_timeout (the busy timeout, 5 s).
  const std::string uri = server.uri();
  PGconn* holder = PQconnectdb(uri.c_str());
  REQUIRE(PQstatus(holder) == CONNECTION_OK);
  PQclear(PQexec(holder, "BEGIN; LOCK TABLE quota_windows IN ACCESS EXCLUSIVE MODE"));
  const Error error = failure_of([&] { engine.consume("send", "owner"); });
  CHECK(error.code() == ErrorCode::busy);
  CHECK_THAT(error.what(), Catch::Contains("cancelled the statement because it ran longer than "
                                           "statement_timeout") &&
                               Catch::Contains("nothing was changed") &&
                               Catch::Contains("ALTER ROLE ... SET statement_timeout") &&
                               Catch::Contains("SQLSTATE 57014") &&
                               !Catch::Contains("could not be reached"));
  PQclear(PQexec(holder, "ROLLBACK"));
  PQfinish(holder);
  // The connection stayed good: the next call works, and the cancelled one counted nothing.
  CHECK(engine.consume("send", "owner").remaining == 4);
}

TEST_CASE("a read-only server or session says so and what to do", "[postgresql][sqlstate]") {
  PrivateServer server;
  ManualClock clock;
  Engine::open(server.uri(), options_with(clock))
      .define(make_limit("send", Algorithm::fixed_window, 5, 60'000));
  Options options = options_with(clock);
  options.migrate = false;
  Engine engine = Engine::open(
      server.uri("postgres", "", "options=-cdefault_transaction_read_only%3Don"), options);
  const Error error = failure_of([&] { engine.consume("send", "owner"); });
  CHECK(error.code() == ErrorCode::io);
  CHECK_THAT(error.what(), Catch::Contains("server or session is read-only") &&
                               Catch::Contains("standby") &&
                               Catch::Contains("default_transaction_read_only") &&
                               Catch::Contains("target_session_attrs=read-write") &&
                               Catch::Contains("SQLSTATE 25006"));
}

}  // namespace
}  // namespace quota::test
