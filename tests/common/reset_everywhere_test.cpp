// Forgetting an owner on every limit at once (Engine::reset_everywhere, quota_reset_everywhere,
// `quotactl reset '*' OWNER`), on every backend: every limit's state of that owner goes, in
// one transaction, and no other owner's; the answer names each limit where something was
// forgotten.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "quota/quota.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

constexpr std::int64_t kHour = 3'600'000;

QuotactlRun quotactl_on(const TestDatabase& database, std::vector<std::string> args) {
  return run_quotactl_at(database.location(), 1'700'000'000'000, std::move(args));
}

// Three limits of different algorithms, u1 and u2 using each and u1 denied on `send`.
void use_every_limit(Engine& engine) {
  engine.define(make_limit("send", Algorithm::sliding_log, 2, kHour));
  engine.define(make_limit("api", Algorithm::fixed_window, 5, kHour));
  engine.define(make_bucket("login", 3, kHour));
  for (const char* owner : {"u1", "u2"}) {
    for (const char* limit : {"send", "api", "login"}) engine.consume(limit, owner);
  }
  engine.consume("send", "u1");
  REQUIRE_FALSE(engine.consume("send", "u1").allowed);
}

void require_forgotten(Engine& engine, const std::string& owner) {
  for (const char* limit : {"api", "login", "send"}) {
    const Usage usage = engine.owner_usage(limit, owner);
    CHECK(usage.used == 0);
    CHECK(usage.denied == 0);
  }
}

void require_kept(Engine& engine, const std::string& owner) {
  for (const char* limit : {"api", "login", "send"}) CHECK(engine.owner_usage(limit, owner).used == 1);
}

}  // namespace

TEST_CASE("reset_everywhere forgets the owner on every limit and names each",
          "[engine][reset]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  use_every_limit(on.engine);
  CHECK(on.engine.reset_everywhere("u1") == std::vector<std::string>{"api", "login", "send"});
  require_forgotten(on.engine, "u1");
  require_kept(on.engine, "u2");
  CHECK(on.engine.consume("send", "u1").remaining == 1);
  // An owner without state: nothing forgotten, no limit named.
  CHECK(on.engine.reset_everywhere("nobody").empty());

  const std::string before = on.database.dump();
  CHECK_THROWS_AS(on.engine.reset_everywhere(""), Error);
  CHECK_THROWS_WITH(on.engine.reset_everywhere(std::string(1025, 'o')),
                    Catch::Contains("owner"));
  CHECK(on.database.dump() == before);
}

TEST_CASE("reset_everywhere on a database without limits resets none", "[engine][reset]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  CHECK(on.engine.reset_everywhere("u1").empty());
}

TEST_CASE("quotactl reset '*' OWNER forgets the owner everywhere, text and JSON",
          "[quotactl][reset]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  use_every_limit(on.engine);

  SECTION("text: one line naming each limit") {
    const QuotactlRun outcome = quotactl_on(on.database, {"reset", "*", "u1"});
    INFO(outcome.err);
    CHECK(outcome.status == 0);
    CHECK(outcome.out == "reset u1 on 3 limits: api, login, send\n");
  }
  SECTION("JSON: the owner and the limits reset") {
    const QuotactlRun outcome = quotactl_on(on.database, {"reset", "*", "u1", "--json"});
    INFO(outcome.err);
    CHECK(outcome.status == 0);
    CHECK(nlohmann::json::parse(outcome.out) ==
          nlohmann::json{{"owner", "u1"}, {"reset", {"api", "login", "send"}}});
  }
  require_forgotten(on.engine, "u1");
  require_kept(on.engine, "u2");

  const std::string before = on.database.dump();
  const QuotactlRun bad = quotactl_on(on.database, {"reset", "*", ""});
  CHECK(bad.status == 2);
  CHECK(bad.out.empty());
  CHECK_THAT(bad.err, Catch::StartsWith("quotactl: error: ") && Catch::Contains("owner"));
  CHECK(on.database.dump() == before);
}

TEST_CASE("quota_reset_everywhere: the C API's reset of every limit", "[c_api][reset]") {
  EngineOn on(Backend::sqlite);
  use_every_limit(on.engine);
  quota_engine* engine = nullptr;
  const std::string& path = on.database.location();
  REQUIRE(quota_open(path.data(), path.size(), nullptr, &engine) == QUOTA_OK);
  size_t limits = 0;
  CHECK(quota_reset_everywhere(engine, "u1", 2, &limits) == QUOTA_OK);
  CHECK(limits == 3);
  CHECK(quota_reset_everywhere(engine, "u2", 2, nullptr) == QUOTA_OK);
  CHECK(quota_reset_everywhere(engine, "", 0, &limits) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(limits == 3);  // a failed call leaves it unchanged
  quota_close(engine);
  require_forgotten(on.engine, "u1");
  require_forgotten(on.engine, "u2");
}

}  // namespace quota::test
