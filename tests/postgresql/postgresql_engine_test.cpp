// The engine on PostgreSQL alone (docs/sharing-limits-across-hosts.md): the server's clock as
// the one time authority, and the application's own libpq connection and transactions.
#include <libpq-fe.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "backend.h"
#include "postgresql/postgresql_store.h"
#include "quota/postgresql.h"
#include "quota/quota.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kMinutes = 60'000;

TEST_CASE("with the server's clock, hosts whose clocks disagree by minutes share one time",
          "[postgresql][clock]") {
  TestDatabase database(Backend::postgresql);
  Options behind;
  behind.clock = [] { return system_clock_ms() - 5 * kMinutes; };
  Options ahead;
  ahead.clock = [] { return system_clock_ms() + 5 * kMinutes; };
  SECTION("each host's own clock (the default): the windows follow the callers' clocks") {
    Engine slow = Engine::open(database.location(), behind);
    slow.define(make_limit("w", Algorithm::fixed_window, 3, 1000));
    const std::int64_t before = system_clock_ms();
    const Result answer = slow.consume("w", "fresh");
    // The window is the one of a clock five minutes behind.
    CHECK(answer.reset_at_ms < before - 4 * kMinutes);
  }
  SECTION("the server's clock: both hosts see the same windows, at the real time") {
    behind.server_clock = true;
    ahead.server_clock = true;
    Engine slow = Engine::open(database.location(), behind);
    Engine fast = Engine::open(database.location(), ahead);
    slow.define(make_limit("w", Algorithm::fixed_window, 3, 60'000));
    const std::int64_t before = system_clock_ms();
    const Result first = slow.consume("w", "u");
    const Result second = fast.consume("w", "u");
    const std::int64_t after = system_clock_ms();
    // The server runs on this machine, so its clock is this machine's.
    CHECK(first.reset_at_ms > before);
    CHECK(first.reset_at_ms <= after + 60'000);
    CHECK(second.remaining == 1);
    // consume_all and usage ask the server for the time first.
    slow.define(make_limit("v", Algorithm::fixed_window, 3, 60'000));
    const Decision both = fast.consume_all({"w", "v"}, "u");
    CHECK(both.result.allowed);
    const std::vector<Usage> rows = slow.usage("w");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].used == 3);
    CHECK(rows[0].reset_at_ms == first.reset_at_ms);
    CHECK(!fast.consume("w", "u").allowed);
  }
}

struct Connection {
  explicit Connection(const std::string& uri) : handle(PQconnectdb(uri.c_str())) {
    REQUIRE(PQstatus(handle) == CONNECTION_OK);
  }
  ~Connection() { PQfinish(handle); }
  void exec(const char* sql) {
    PGresult* result = PQexec(handle, sql);
    const ExecStatusType status = PQresultStatus(result);
    PQclear(result);
    REQUIRE((status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK));
  }
  PGconn* handle;
};

TEST_CASE("an engine on the application's libpq connection takes part in its transaction",
          "[postgresql][transactions]") {
  TestDatabase database(Backend::postgresql);
  ManualClock clock;
  Connection application(database.location());
  Engine engine = quota::postgresql::attach(application.handle, options_with(clock));
  engine.define(make_limit("l", Algorithm::sliding_log, 3, 1000));

  application.exec("BEGIN");
  CHECK(engine.consume("l", "u").allowed);
  CHECK(engine.consume("l", "u").remaining == 1);
  application.exec("ROLLBACK");
  CHECK(engine.owner_usage("l", "u").used == 0);

  application.exec("BEGIN");
  CHECK(engine.consume("l", "u").allowed);
  // A multi-limit consume makes its savepoint inside the application's transaction.
  engine.define(make_limit("m", Algorithm::token_bucket, 3, 1000));
  application.exec("COMMIT");
  application.exec("BEGIN");
  CHECK(engine.consume_all({"l", "m"}, "u").result.allowed);
  application.exec("COMMIT");
  CHECK(engine.owner_usage("l", "u").used == 2);
  CHECK(engine.owner_usage("m", "u").used == 1);

  // A connection that is not open is refused.
  PGconn* closed = PQconnectdb("postgresql://nobody@/nothing?host=/nonexistent");
  CHECK_THROWS_AS(quota::postgresql::attach(closed, {}), Error);
  PQfinish(closed);
}

TEST_CASE("hosts opening a new PostgreSQL database at once apply each migration once",
          "[postgresql][migrations]") {
  TestDatabase database(Backend::postgresql);
  const auto& migrations = detail::built_in_postgresql_migrations();
  const int latest = migrations.back().version;
  constexpr int kOpeners = 6;
  std::vector<int> children;
  for (int i = 0; i < kOpeners; ++i) {
    children.push_back(fork_child([&] {
      Engine engine = Engine::open(database.location());
      return engine.schema_version() == latest ? 0 : 1;
    }));
  }
  for (int child : children) CHECK(wait_child(child) == 0);
  CHECK(database.integer("SELECT count(*) FROM quota_migrations") ==
        static_cast<std::int64_t>(migrations.size()));
  CHECK(database.integer("SELECT max(version) FROM quota_migrations") == latest);
}

TEST_CASE("the C API opens a PostgreSQL URI like a file", "[postgresql][c_api]") {
  TestDatabase database(Backend::postgresql);
  quota_options options;
  quota_options_init(&options);
  quota_engine* engine = nullptr;
  const std::string& uri = database.location();
  REQUIRE(quota_open(uri.c_str(), uri.size(), &options, &engine) == QUOTA_OK);
  REQUIRE(quota_define(engine, "send", 4, QUOTA_FIXED_WINDOW, 2, 60000, QUOTA_NO_BURST) ==
          QUOTA_OK);
  quota_result result{};
  CHECK(quota_consume(engine, "send", 4, "u", 1, 1, &result) == QUOTA_OK);
  CHECK(result.allowed == 1);
  CHECK(quota_consume(engine, "send", 4, "u", 1, 1, &result) == QUOTA_OK);
  CHECK(quota_consume(engine, "send", 4, "u", 1, 1, &result) == QUOTA_OK);
  CHECK(result.allowed == 0);
  CHECK(result.retry_after_ms > 0);
  quota_close(engine);
  CHECK(database.integer("SELECT used FROM quota_windows WHERE owner = 'u'") == 2);
}

}  // namespace
}  // namespace quota::test
