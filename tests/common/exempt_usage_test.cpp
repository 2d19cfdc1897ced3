// An exempt owner uses no quota (docs/concepts.md, "Policies"): its usage agrees with its
// answers, "2 of 2 left" and 0 used, whatever it recorded before the exemption, which counts
// again once the exemption is removed.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "backend.h"
#include "cli.h"
#include "quota/policy.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

TEST_CASE("an exempt owner's usage shows what its answers say: nothing used",
          "[policy][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(make_limit("send", Algorithm::sliding_log, 2, 60'000));
  REQUIRE(f.engine.consume("send", "u").allowed);  // recorded before the exemption
  f.engine.set_override({"send", "u", Policy::exempt});
  const Result answer = f.engine.consume("send", "u");
  CHECK(answer.remaining == 2);
  const Usage usage = f.engine.owner_usage("send", "u");
  CHECK(usage.used == 0);
  CHECK(usage.remaining == 2);
  CHECK(usage.capacity == 2);
  CHECK(f.engine.usage("send").empty());  // no owner uses anything
  const QuotactlRun usage_table =
      run_quotactl({"--db", f.database.location(), "usage", "--owner", "u"});
  REQUIRE(usage_table.status == 0);
  CHECK(usage_table.out.find("0/2") != std::string::npos);

  // Without the exemption, what it recorded counts again.
  f.engine.remove_override("send", "u");
  CHECK(f.engine.owner_usage("send", "u").used == 1);
  CHECK(f.engine.consume("send", "u").remaining == 0);
}

}  // namespace
}  // namespace quota::test
