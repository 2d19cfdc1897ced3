// Opening a PostgreSQL database that cannot be used (docs/sharing-limits-across-hosts.md):
// no server, a wrong password, TLS options, no schema, a schema newer than the build. Each is
// a clear Error that says what to do, changes nothing, and never contains a password.
#include <libpq-fe.h>

#include <catch2/catch.hpp>

#include "backend.h"
#include "postgresql/private_server.h"
#include "support.h"

namespace quota::test {
namespace {

// The error Engine::open throws for `uri`; fails the test when it opens.
Error open_failure(const std::string& uri, Options options = {}) {
  try {
    Engine::open(uri, options);
  } catch (const Error& error) {
    return error;
  }
  FAIL("Engine::open succeeded on " << uri);
  throw;  // not reached
}

Options without_migrations() {
  Options options;
  options.migrate = false;
  return options;
}

// The rows of `sql` on `uri`, every value as text and each row on a line: a fingerprint of
// what a failed opening must have left alone.
std::string rows_of(const std::string& uri, const std::string& sql) {
  PGconn* connection = PQconnectdb(uri.c_str());
  REQUIRE(PQstatus(connection) == CONNECTION_OK);
  PGresult* result = PQexec(connection, sql.c_str());
  const bool ok = PQresultStatus(result) == PGRES_TUPLES_OK;
  std::string text = ok ? "" : PQresultErrorMessage(result);
  for (int r = 0; ok && r < PQntuples(result); ++r) {
    for (int c = 0; c < PQnfields(result); ++c) {
      text += (c ? "|" : "") +
              std::string(PQgetisnull(result, r, c) ? "NULL" : PQgetvalue(result, r, c));
    }
    text += "\n";
  }
  PQclear(result);
  PQfinish(connection);
  REQUIRE(ok);
  return text;
}

// Every table, column and view of the test's schema, and every applied migration when there
// is the table.
std::string schema_fingerprint(const std::string& uri) {
  std::string text = rows_of(uri,
                             "SELECT table_name, column_name, data_type FROM "
                             "information_schema.columns WHERE table_schema = current_schema() "
                             "ORDER BY 1, 2");
  if (rows_of(uri, "SELECT to_regclass('quota_migrations') IS NOT NULL") == "t\n") {
    text += rows_of(uri, "SELECT * FROM quota_migrations ORDER BY version");
  }
  return text;
}

TEST_CASE("opening a PostgreSQL URI where no server runs is an io error that names what to check",
          "[postgresql][faults]") {
  TempDir no_server;  // a socket folder in which no server listens
  const std::string password = "Absent-server-Pw-5";
  const std::string host = "host=" + no_server.path().string();
  for (const std::string& uri :
       {"postgresql://quota_user:" + password + "@/quota_test?" + host,
        "postgresql://quota_user@/quota_test?" + host + "&password=" + password,
        "postgres://quota_user@/quota_test?password=" + password + "&" + host}) {
    CAPTURE(uri);
    const Error error = open_failure(uri);
    CHECK(error.code() == ErrorCode::io);
    CHECK_THAT(error.what(), Catch::Contains("cannot connect to PostgreSQL") &&
                                 Catch::Contains("check that the server runs") &&
                                 Catch::Contains(no_server.path().string()));
    CHECK_THAT(error.what(), !Catch::Contains(password));
  }
}

TEST_CASE("a PostgreSQL password with characters a URI must encode is never printed",
          "[postgresql][faults][security]") {
  // Regression: a password holding an unencoded '/' or '?' ("user:Se/cret@...") escaped the
  // mask, and the message printed the URI with the whole password in it.
  TempDir no_server;
  const std::string query = "/quota_test?host=" + no_server.path().string();
  SECTION("percent-encoded, or with characters libpq reads as part of the password") {
    for (const std::string& password : {std::string("Se%2Fcret-77"), std::string("Se%40cret-77"),
                                        std::string("Se?cret-77"), std::string("Se#cret-77")}) {
      const std::string uri = "postgresql://quota_user:" + password + "@" + query;
      CAPTURE(uri);
      const Error error = open_failure(uri);
      CHECK(error.code() == ErrorCode::io);
      CHECK_THAT(error.what(),
                 Catch::Contains("check that the server runs") && !Catch::Contains("cret-77"));
    }
  }
  SECTION("with an unencoded '/' or '@', which libpq would split: refused before connecting") {
    for (const std::string& password : {std::string("Se/cret-77"), std::string("Se@cret-77")}) {
      const std::string uri = "postgresql://quota_user:" + password + "@" + query;
      CAPTURE(uri);
      const Error error = open_failure(uri);
      CHECK(error.code() == ErrorCode::invalid_argument);
      CHECK_THAT(error.what(), Catch::Contains("%40") && Catch::Contains("%2F") &&
                                   !Catch::Contains("cret-77") && !Catch::Contains("Se"));
    }
  }
  SECTION("an '@' in the query is not taken for the password's end") {
    const std::string uri = "postgresql://quota_user:Pw-77x@" + query + "&application_name=me@work";
    const Error error = open_failure(uri);
    CHECK(error.code() == ErrorCode::io);
    CHECK_THAT(error.what(), !Catch::Contains("Pw-77x") && Catch::Contains("me@work"));
  }
}

TEST_CASE("a wrong PostgreSQL password is an io error that shows neither password",
          "[postgresql][faults][security]") {
  const std::string right = "Right-Pw-7731";
  PrivateServer server({false, "local all quota_user scram-sha-256"});
  server.exec("CREATE ROLE quota_user LOGIN PASSWORD '" + right + "'");
  server.exec("CREATE SCHEMA quota_user_schema AUTHORIZATION quota_user");
  server.exec("CREATE SCHEMA empty_schema AUTHORIZATION quota_user");
  const std::string in_schema = "options=-csearch_path%3Dquota_user_schema";

  // A wrong password, in the user-info and as a parameter, plain and percent-encoded.
  {
    // "wr%40ng" is how a URI spells "wr@ng": neither spelling may come back.
    for (const std::string& wrong : {std::string("Wrong-Pw-4410"), std::string("wr%40ng-Pw-99")}) {
      for (const std::string& uri :
           {server.uri("quota_user", wrong, in_schema),
            server.uri("quota_user", "", in_schema + "&password=" + wrong)}) {
        CAPTURE(uri);
        const Error error = open_failure(uri);
        CHECK(error.code() == ErrorCode::io);
        CHECK_THAT(error.what(), Catch::Contains("password authentication failed") &&
                                     Catch::Contains("check that the server runs") &&
                                     Catch::Contains("password"));
        CHECK_THAT(error.what(),
                   !Catch::Contains(wrong) && !Catch::Contains("wr@ng") && !Catch::Contains(right));
      }
    }
  }

  // The right password opens, migrates and consumes.
  {
    Engine engine = Engine::open(server.uri("quota_user", right, in_schema));
    engine.define(make_limit("api", Algorithm::fixed_window, 2, 60'000));
    CHECK(engine.consume("api", "alice").allowed);
    CHECK(engine.consume("api", "alice").allowed);
    CHECK_FALSE(engine.consume("api", "alice").allowed);
  }

  // A schema without the tables, reached with a password, names quotactl migrate.
  {
    for (const std::string& uri :
         {server.uri("quota_user", right, "options=-csearch_path%3Dempty_schema"),
          server.uri("quota_user", "", "options=-csearch_path%3Dempty_schema&password=" + right)}) {
      CAPTURE(uri);
      const Error error = open_failure(uri, without_migrations());
      CHECK(error.code() == ErrorCode::not_migrated);
      CHECK_THAT(error.what(), Catch::Contains("quotactl migrate") && !Catch::Contains(right));
    }
  }
}

TEST_CASE("the TLS options of a PostgreSQL URI reach libpq", "[postgresql][security]") {
  PrivateServer server({true, ""});  // on the loopback address too, without TLS
  const std::string password = "Tls-Pw-2218";
  const std::string tcp = "postgresql://postgres:" + password +
                          "@127.0.0.1:" + std::to_string(server.port()) + "/quota_test";

  // With sslmode=require, against a server without TLS fails with libpq's own reason.
  {
    const Error error = open_failure(tcp + "?sslmode=require");
    CHECK(error.code() == ErrorCode::io);
    CHECK_THAT(error.what(), Catch::Contains("server does not support SSL, but SSL was required"));
    CHECK_THAT(error.what(), !Catch::Contains(password));
  }
  // With sslmode=disable, over the same address connects.
  {
    Engine engine = Engine::open(tcp + "?sslmode=disable");
    CHECK(engine.schema_version() > 0);
  }
  // A value libpq does not know is refused by libpq.
  {
    const Error error = open_failure(tcp + "?sslmode=sometimes");
    CHECK(error.code() == ErrorCode::io);
    CHECK_THAT(error.what(), Catch::Contains("invalid sslmode value: \"sometimes\"") &&
                                 !Catch::Contains(password));
  }
  // Over a Unix socket libpq uses no TLS and ignores sslmode.
  CHECK_NOTHROW(Engine::open(server.uri("postgres", "", "sslmode=require")));
}

TEST_CASE("a PostgreSQL schema without the tables is not_migrated and stays empty",
          "[postgresql][migrations]") {
  TestDatabase database(Backend::postgresql);
  const Error error = open_failure(database.location(), without_migrations());
  CHECK(error.code() == ErrorCode::not_migrated);
  CHECK_THAT(error.what(), Catch::Contains("run `quotactl migrate`"));
  CHECK(schema_fingerprint(database.location()).empty());
}

TEST_CASE("a PostgreSQL schema newer than the build is refused and left alone",
          "[postgresql][migrations]") {
  TestDatabase database(Backend::postgresql);
  {
    Engine engine = Engine::open(database.location());
    engine.define(make_limit("api"));
  }
  const int latest = Engine::open(database.location()).schema_version();
  database.exec("INSERT INTO quota_migrations (version, name, checksum, applied_at_ms) VALUES (" +
                std::to_string(latest + 1) + ", 'from_a_newer_build', 'x', 0)");
  const std::string before = schema_fingerprint(database.location());
  for (const Options& options : {Options{}, without_migrations()}) {
    const Error error = open_failure(database.location(), options);
    CHECK(error.code() == ErrorCode::schema_too_new);
    CHECK_THAT(error.what(), Catch::Contains("schema version " + std::to_string(latest + 1)) &&
                                 Catch::Contains("knows only up to " + std::to_string(latest)) &&
                                 Catch::Contains("newer build"));
  }
  CHECK(schema_fingerprint(database.location()) == before);
  CHECK(rows_of(database.location(), "SELECT name FROM quota_limits") == "api\n");
}

}  // namespace
}  // namespace quota::test
