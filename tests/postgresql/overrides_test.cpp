// The engine's own statements on PostgreSQL, where its type inference differs from SQLite's.
#include <catch2/catch.hpp>

#include "backend.h"
#include "support.h"

namespace quota::test {
namespace {

TEST_CASE("Engine::overrides without a limit works on PostgreSQL", "[postgresql][policy]") {
  // Regression: overrides() with no limit sent a NULL parameter that PostgreSQL could not type
  // ("could not determine data type of parameter $1") and failed with io.
  TestDatabase database(Backend::postgresql);
  Engine engine = Engine::open(database.location());
  engine.define(make_limit("api"));
  engine.set_override({"api", "vip", Policy::exempt, std::nullopt, std::nullopt});
  engine.set_override(
      {std::string(kEveryLimit), "banned", Policy::deny, std::nullopt, std::nullopt});
  const std::vector<Override> every = engine.overrides();
  REQUIRE(every.size() == 2);
  CHECK(every[0].limit == "*");
  CHECK(every[0].owner == "banned");
  CHECK(every[1].limit == "api");
  CHECK(engine.overrides("api").size() == 1);
  CHECK(engine.overrides("other").empty());
}

}  // namespace
}  // namespace quota::test
