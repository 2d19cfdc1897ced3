// The least-privilege role of docs/postgresql-roles.sql: created by that very script (through
// psql, as an operator runs it), it can check, consume, record, refund, reset, read usage and
// collect garbage on every algorithm, and cannot define, change or remove limits or overrides
// or migrate: those fail with an Error that says what to do, and change nothing.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "postgresql/private_server.h"
#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

// Runs docs/postgresql-roles.sql with psql as the tables' owner (postgres).
void run_roles_script(const PrivateServer& server, const TempDir& scratch) {
  const std::string output = scratch.file("psql.out");
  const std::string command = "psql '" + server.uri() + "' -X -q -v ON_ERROR_STOP=1 " +
                              "-v role=quota_app -v schema=quota_shared -f " +
                              QUOTA_SOURCE_DIR "/docs/postgresql-roles.sql >" + output + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(output);
  std::stringstream text;
  text << in.rdbuf();
  INFO("psql said: " << text.str());
  REQUIRE(status == 0);
}

std::string describe(const std::vector<Limit>& limits) {
  std::string text;
  for (const Limit& limit : limits) {
    text += limit.name + " " + std::string(to_string(limit.algorithm)) + " " +
            std::to_string(limit.maximum) + " " + std::to_string(limit.period.count()) + " " +
            std::to_string(limit.burst.value_or(-1)) + "\n";
  }
  return text;
}

std::string describe(const std::vector<Override>& overrides) {
  std::string text;
  for (const Override& entry : overrides) {
    text += entry.limit + " " + entry.owner + " " + std::string(to_string(entry.policy)) + " " +
            std::to_string(entry.maximum.value_or(-1)) + "\n";
  }
  return text;
}

// The error `operation` throws; fails the test when it throws none.
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

TEST_CASE("the least-privilege role of docs/postgresql-roles.sql consumes and cannot configure",
          "[postgresql][security]") {
  PrivateServer server;
  TempDir scratch;
  ManualClock clock;
  clock.set(T);
  server.exec("CREATE SCHEMA quota_shared");
  const std::string shared_schema = "options=-csearch_path%3Dquota_shared";
  Engine owner = Engine::open(server.uri("postgres", "", shared_schema), options_with(clock));
  for (const Algorithm algorithm : kAllAlgorithms) {
    const std::string name(to_string(algorithm));
    owner.define(algorithm == Algorithm::token_bucket ? make_bucket(name, 5, 60'000)
                                                      : make_limit(name, algorithm, 5, 60'000));
  }
  owner.set_override({"fixed_window", "vip", Policy::maximum, 10, std::nullopt});
  owner.set_override(
      {std::string(kEveryLimit), "banned", Policy::deny, std::nullopt, std::nullopt});
  // An operator who revoked PUBLIC's default EXECUTE on functions: the script's grants
  // still give the role what it calls.
  server.exec("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA quota_shared FROM PUBLIC");
  run_roles_script(server, scratch);
  run_roles_script(server, scratch);  // again, as after a migration: the role exists already

  Options options = options_with(clock);
  options.migrate = false;
  Engine app = Engine::open(server.uri("quota_app", "", shared_schema), options);
  const std::string limits_before = describe(owner.list());
  const std::string overrides_before = describe(owner.overrides());

  // Every operation of a consuming host works, on every algorithm.
  {
    for (const Algorithm algorithm : kAllAlgorithms) {
      const std::string limit(to_string(algorithm));
      CAPTURE(limit);
      CHECK(app.consume(limit, "alice").allowed);
      CHECK(app.consume(limit, "alice", 2).remaining == 2);
      CHECK(app.check(limit, "alice", 3).allowed == false);
      CHECK(app.record(limit, "alice").remaining == 1);
      CHECK(app.refund(limit, "alice", 2).remaining == 3);
      CHECK(app.consume(limit, "banned").reason == Reason::owner_denied);
      const Usage usage = app.owner_usage(limit, "alice");
      CHECK(usage.used == 2);
      CHECK(usage.denied == 0);
      CHECK(owner.owner_usage(limit, "alice").used == 2);  // the owner sees the same rows
      const std::vector<Usage> rows = app.usage(limit, 10);
      REQUIRE(rows.size() == 2);  // alice, and banned with its one denial
      CHECK(rows.front().owner == "alice");
      CHECK(app.reset(limit, "alice").allowed);
      CHECK(app.owner_usage(limit, "alice").used == 0);
      CHECK(app.consume(limit, "alice", 5).allowed);
      CHECK_FALSE(app.consume(limit, "alice").allowed);
    }
    CHECK(app.consume("fixed_window", "vip", 10).allowed);  // the override is read
    CHECK(app.consume_all({"fixed_window", "sliding_log"}, "carol").result.allowed);
    CHECK(app.get("sliding_log").has_value());
    CHECK(app.list().size() == 4);
    CHECK(app.overrides().size() == 2);
    clock.advance(3'600'000);
    CHECK(app.gc() > 0);  // everything has expired: gc deletes it as this role
    CHECK(app.owner_usage("sliding_log", "alice").used == 0);
  }

  // Defining, overriding and removing fail with what to do, and change nothing.
  {
    const auto expect_refused = [](const Error& error, const std::string& table) {
      CHECK(error.code() == ErrorCode::permission_denied);
      CHECK_THAT(error.what(), Catch::Contains("lacks a privilege") &&
                                   Catch::Contains("permission denied for table " + table) &&
                                   Catch::Contains("as the owner") &&
                                   Catch::Contains("docs/postgresql-roles.sql"));
    };
    expect_refused(failure_of([&] { app.define(make_limit("new_limit")); }), "quota_limits");
    expect_refused(failure_of([&] {
                     app.define(make_limit("fixed_window", Algorithm::fixed_window, 500, 60'000));
                   }),
                   "quota_limits");
    expect_refused(failure_of([&] { app.remove("sliding_log"); }), "quota_limits");
    expect_refused(
        failure_of([&] {
          app.set_override({"sliding_log", "alice", Policy::exempt, std::nullopt, std::nullopt});
        }),
        "quota_overrides");
    expect_refused(failure_of([&] { app.remove_override("fixed_window", "vip"); }),
                   "quota_overrides");
    CHECK(describe(owner.list()) == limits_before);
    CHECK(describe(owner.overrides()) == overrides_before);
    CHECK(app.consume("sliding_log", "alice").allowed);  // the engine goes on working
  }

  // A role whose grants are incomplete for consuming is a configuration error, not an
  // outage: fail_open fails closed on it, and never calls on_error.
  {
    Options open_options = options;
    open_options.failure_policy = FailurePolicy::fail_open;
    int replaced = 0;
    open_options.on_error = [&](const Error&) { ++replaced; };
    Engine failing_open = Engine::open(server.uri("quota_app", "", shared_schema), open_options);
    server.exec("REVOKE SELECT, INSERT, UPDATE ON quota_shared.quota_windows FROM quota_app");
    for (const auto& operation : std::vector<std::function<Result()>>{
             [&] { return failing_open.consume("fixed_window", "dave"); },
             [&] { return failing_open.check("fixed_window", "dave"); },
             [&] { return failing_open.record("fixed_window", "dave"); }}) {
      const Error refused = failure_of(operation);
      CHECK(refused.code() == ErrorCode::permission_denied);
      CHECK_THAT(refused.what(), Catch::Contains("permission denied for table quota_windows") &&
                                     Catch::Contains("docs/postgresql-roles.sql"));
    }
    CHECK(replaced == 0);
    // The limits whose tables the role may still use answer as before.
    CHECK(failing_open.consume("sliding_log", "dave").reason == Reason::ok);
    run_roles_script(server, scratch);  // the grants again: the same engine consumes
    CHECK(failing_open.consume("fixed_window", "dave").reason == Reason::ok);
    CHECK(replaced == 0);
  }

  // The role cannot migrate: a schema without the tables stays empty.
  {
    server.exec("CREATE SCHEMA quota_empty");
    server.exec("GRANT USAGE ON SCHEMA quota_empty TO quota_app");
    const std::string empty = server.uri("quota_app", "", "options=-csearch_path%3Dquota_empty");
    const Error refused = failure_of([&] { Engine::open(empty); });
    CHECK(refused.code() == ErrorCode::permission_denied);
    CHECK_THAT(refused.what(), Catch::Contains("lacks a privilege") &&
                                   Catch::Contains("permission denied for schema quota_empty"));
    const Error not_migrated = failure_of([&] { Engine::open(empty, options); });
    CHECK(not_migrated.code() == ErrorCode::not_migrated);
    // Not even quota_migrations was left behind.
    const std::string as_owner = server.uri("postgres", "", "options=-csearch_path%3Dquota_empty");
    CHECK(failure_of([&] { Engine::open(as_owner, options); }).code() == ErrorCode::not_migrated);
  }
}

}  // namespace
}  // namespace quota::test
