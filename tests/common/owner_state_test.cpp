// Every row that names an owner, of every family and the idempotency keys (the registry of
// src/sql/families.h), on every backend: the owner view and `status` count them, reset and
// reset '*' forget them, and the registry lists every quota_* table of the schema.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "backend.h"
#include "quota/admin.h"
#include "quota/quota.h"
#include "sql/families.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

constexpr std::int64_t kHour = 3'600'000;

Limit conns() {
  Limit limit;
  limit.name = "conns";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = 3;
  limit.period = std::chrono::milliseconds(30'000);
  return limit;
}

QuotactlRun quotactl_on(const TestDatabase& database, std::vector<std::string> args) {
  return run_quotactl_at(database.location(), 1'700'000'000'000, std::move(args));
}

// The rows naming `owner` in every table of the registry that holds an owner's rows.
std::int64_t rows_naming(const TestDatabase& database, const std::string& owner) {
  std::int64_t rows = 0;
  for (const detail::sql::StateTable* table : detail::sql::owner_tables()) {
    rows += database.integer(std::string("SELECT count(*) FROM ") + table->name +
                             " WHERE owner = '" + owner + "'");
  }
  return rows;
}

std::int64_t rows_of(const TestDatabase& database, const char* table, const std::string& limit,
                     const std::string& owner) {
  return database.integer(std::string("SELECT count(*) FROM ") + table + " WHERE limit_name = '" +
                          limit + "' AND owner = '" + owner + "'");
}

// alice and bob with state of every family on their limits, leases and keys: "msgs"
// (sliding_log, keyed), "api" (fixed_window), "login" (token_bucket), "conns" (concurrency,
// a lease taken with a key and one without); "idle" is a limit neither uses.
void use_every_family(Engine& engine) {
  engine.define(make_limit("msgs", Algorithm::sliding_log, 5, kHour));
  engine.define(make_limit("api", Algorithm::fixed_window, 5, kHour));
  engine.define(make_bucket("login", 3, kHour));
  engine.define(conns());
  engine.define(make_limit("idle", Algorithm::sliding_window, 5, kHour));
  for (const std::string owner : {"alice", "bob"}) {
    REQUIRE(engine.consume("msgs", owner, 1, "k1").allowed);
    REQUIRE(engine.consume("api", owner).allowed);
    REQUIRE(engine.consume("login", owner, 1, "k2").allowed);
    REQUIRE(engine.acquire_lease("conns", owner, 1, "k3").allowed);
    REQUIRE(engine.acquire_lease("conns", owner).allowed);
  }
}

std::vector<std::string> limits_of(const std::vector<Usage>& rows) {
  std::vector<std::string> names;
  for (const Usage& row : rows) names.push_back(row.limit);
  return names;
}

}  // namespace

TEST_CASE("every quota_* table of the schema is a family's state, the keys or a named other",
          "[registry]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  const std::string tables =
      backend == Backend::sqlite
          ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'quota\\_%' "
            "ESCAPE '\\' ORDER BY name"
          : "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' AND table_name LIKE 'quota\\_%' "
            "ORDER BY table_name";
  std::set<std::string> listed;
  for (const detail::sql::StateTable* table : detail::sql::owner_tables()) {
    CHECK(listed.insert(table->name).second);  // listed once
  }
  std::set<std::string> others;
  for (const detail::sql::OtherTable& table : detail::sql::other_tables()) {
    CHECK(listed.count(table.name) == 0);
    others.insert(table.name);
  }
  std::set<std::string> present;
  for (const auto& row : on.database.rows(tables)) {
    const std::string& name = row.at(0);
    present.insert(name);
    INFO(name << " is a quota_* table of the " << to_string(backend)
              << " schema that src/sql/families.cpp does not list: add it to a family's state, "
                 "or to the other tables with what it holds");
    CHECK((listed.count(name) == 1 || others.count(name) == 1));
  }
  REQUIRE(present.size() > 5);
  // Each state table of the registry is in the schema (the others may be one dialect's).
  for (const std::string& name : listed) {
    CAPTURE(name);
    CHECK(present.count(name) == 1);
  }
  // Each algorithm is in exactly one family.
  for (Algorithm algorithm :
       {Algorithm::sliding_log, Algorithm::fixed_window, Algorithm::sliding_window,
        Algorithm::token_bucket, Algorithm::concurrency}) {
    int families = 0;
    for (const detail::sql::Family& family : detail::sql::families()) {
      for (Algorithm member : family.algorithms) families += member == algorithm ? 1 : 0;
    }
    CAPTURE(to_string(algorithm));
    CHECK(families == 1);
  }
}

TEST_CASE("the owner view shows a concurrency limit where the owner holds only leases",
          "[engine][usage][lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  on.engine.define(conns());
  on.engine.define(make_limit("api", Algorithm::fixed_window, 5, kHour));
  REQUIRE(on.engine.acquire_lease("conns", "alice", 2).allowed);
  const std::vector<Usage> rows = on.engine.owner_usage("alice");
  REQUIRE(limits_of(rows) == std::vector<std::string>{"conns"});
  CHECK(rows[0].used == 2);
  CHECK(rows[0].remaining == 1);

  const QuotactlRun outcome = quotactl_on(on.database, {"usage", "--owner", "alice", "--json"});
  INFO(outcome.err);
  REQUIRE(outcome.status == 0);
  const nlohmann::json shown = nlohmann::json::parse(outcome.out);
  REQUIRE(shown.size() == 1);
  CHECK(shown[0]["limit"] == "conns");
  CHECK(shown[0]["used"] == 2);
}

TEST_CASE("status counts every row naming an owner: leases and idempotency keys too",
          "[admin][status][lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  on.engine.define(conns());
  on.engine.define(make_limit("api", Algorithm::fixed_window, 5, kHour));
  REQUIRE(on.engine.acquire_lease("conns", "alice").allowed);  // a lease and its owner's row
  REQUIRE(on.engine.consume("api", "alice", 1, "k").allowed);  // a window and a key
  CHECK(admin::summarize(on.database.location()).state_rows == 4);
  const QuotactlRun outcome = quotactl_on(on.database, {"status", "--json"});
  INFO(outcome.err);
  REQUIRE(outcome.status == 0);
  CHECK(nlohmann::json::parse(outcome.out)["state_rows"] == 4);
}

TEST_CASE("reset_everywhere leaves no row naming the owner and names the limits it touched",
          "[engine][reset][lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  use_every_family(on.engine);
  on.engine.set_override({"api", "alice", Policy::maximum, 9});
  const std::int64_t bob = rows_naming(on.database, "bob");
  REQUIRE(rows_naming(on.database, "alice") == bob);
  REQUIRE(on.database.integer("SELECT count(*) FROM quota_idempotency WHERE owner = 'alice'") == 3);

  // "idle" had nothing of alice's: it is not named.
  CHECK(on.engine.reset_everywhere("alice") ==
        std::vector<std::string>{"api", "conns", "login", "msgs"});
  CHECK(rows_naming(on.database, "alice") == 0);
  CHECK(rows_naming(on.database, "bob") == bob);
  // Its overrides (an operator's configuration) stay.
  CHECK(on.database.integer("SELECT count(*) FROM quota_overrides WHERE owner = 'alice'") == 1);
  // A key forgotten is a new request: charged again, not replayed.
  const Result again = on.engine.consume("msgs", "alice", 1, "k1");
  CHECK(again.remaining == 4);
  CHECK(on.engine.owner_usage("msgs", "alice").used == 1);
  // Forgotten again: only where something was left.
  CHECK(on.engine.reset_everywhere("alice") == std::vector<std::string>{"msgs"});
}

TEST_CASE("reset_everywhere of an owner with nothing anywhere answers an empty list",
          "[engine][reset]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  use_every_family(on.engine);
  const std::string before = on.database.dump();
  CHECK(on.engine.reset_everywhere("nobody-at-all").empty());
  CHECK(on.database.dump() == before);

  SECTION("quotactl, text") {
    const QuotactlRun outcome = quotactl_on(on.database, {"reset", "*", "nobody-at-all"});
    INFO(outcome.err);
    CHECK(outcome.status == 0);
    CHECK(outcome.out == "nothing to reset: nobody-at-all has no state on any limit\n");
  }
  SECTION("quotactl, JSON") {
    const QuotactlRun outcome = quotactl_on(on.database, {"reset", "*", "nobody-at-all", "--json"});
    INFO(outcome.err);
    CHECK(outcome.status == 0);
    CHECK(nlohmann::json::parse(outcome.out) ==
          nlohmann::json{{"owner", "nobody-at-all"}, {"reset", nlohmann::json::array()}});
  }
  SECTION("quotactl names only the limits where something was forgotten") {
    const QuotactlRun outcome = quotactl_on(on.database, {"reset", "*", "alice"});
    INFO(outcome.err);
    CHECK(outcome.status == 0);
    CHECK(outcome.out == "reset alice on 4 limits: api, conns, login, msgs\n");
  }
  SECTION("the C API counts the limits where something was forgotten") {
    quota_engine* engine = nullptr;
    const std::string& location = on.database.location();
    REQUIRE(quota_open(location.data(), location.size(), nullptr, &engine) == QUOTA_OK);
    size_t limits = 99;
    CHECK(quota_reset_everywhere(engine, "nobody", 6, &limits) == QUOTA_OK);
    CHECK(limits == 0);
    CHECK(quota_reset_everywhere(engine, "bob", 3, &limits) == QUOTA_OK);
    CHECK(limits == 4);
    quota_close(engine);
    CHECK(rows_naming(on.database, "bob") == 0);
  }
  CHECK(on.database.dump().find("nobody") == std::string::npos);
}

TEST_CASE("reset NAME OWNER forgets the owner's leases and keys on that limit only",
          "[engine][reset][lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  use_every_family(on.engine);
  const auto keys = [&](const char* limit, const char* owner) {
    return rows_of(on.database, "quota_idempotency", limit, owner);
  };
  REQUIRE(keys("conns", "alice") == 1);
  REQUIRE(keys("msgs", "alice") == 1);
  REQUIRE(rows_of(on.database, "quota_leases", "conns", "alice") == 2);

  SECTION("the library") {
    const Result reset = on.engine.reset("conns", "alice");
    CHECK(reset.allowed);
    CHECK(reset.remaining == 3);
    // A retried acquire with the forgotten key takes a new lease.
    const LeaseResult again = on.engine.acquire_lease("conns", "alice", 1, "k3");
    CHECK(again.allowed);
    CHECK_FALSE(again.replayed);
    CHECK(rows_of(on.database, "quota_leases", "conns", "alice") == 1);
    on.engine.reset("msgs", "alice");
    CHECK(keys("msgs", "alice") == 0);
    CHECK(rows_of(on.database, "quota_log", "msgs", "alice") == 0);
  }
  SECTION("quotactl") {
    const QuotactlRun outcome = quotactl_on(on.database, {"reset", "conns", "alice", "--json"});
    INFO(outcome.err);
    CHECK(outcome.status == 0);
    CHECK(keys("conns", "alice") == 0);
    CHECK(rows_of(on.database, "quota_leases", "conns", "alice") == 0);
    CHECK(rows_of(on.database, "quota_lease_owners", "conns", "alice") == 0);
  }
  CHECK(keys("conns", "bob") == 1);
  CHECK(keys("login", "alice") == 1);
  CHECK(rows_of(on.database, "quota_leases", "conns", "bob") == 2);
}

}  // namespace quota::test
