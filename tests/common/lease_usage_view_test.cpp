// The quota_usage view's rows of concurrency limits (migration 0015, generated from the lease
// check of src/sql/lease_statements.cpp) on every backend: the same figures as Engine::usage
// for each owner (used = units held by unexpired leases, remaining, denied, reset_at_ms = the
// last expiry, shadow_denied, blocked_until_ms), overrides and shadow mode included.
#include <catch2/catch.hpp>
#include <map>

#include "backend.h"
#include "quota/lease.h"
#include "quota/policy.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

Limit concurrency_limit(const std::string& name, std::int64_t maximum, std::int64_t ttl_ms) {
  Limit limit;
  limit.name = name;
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = milliseconds(ttl_ms);
  return limit;
}

std::string text(const std::optional<std::int64_t>& value) {
  return value ? std::to_string(*value) : "NULL";
}

// Each owner's row of Engine::usage(limit), as the view's columns read.
std::map<std::string, std::vector<std::string>> engine_rows(Engine& engine,
                                                            const std::string& limit) {
  std::map<std::string, std::vector<std::string>> rows;
  for (const Usage& usage : engine.usage(limit)) {
    rows[usage.owner] = {std::to_string(usage.used),          std::to_string(usage.remaining),
                         std::to_string(usage.denied),        std::to_string(usage.reset_at_ms),
                         std::to_string(usage.shadow_denied), text(usage.blocked_until_ms)};
  }
  return rows;
}

std::map<std::string, std::vector<std::string>> view_rows(const TestDatabase& database,
                                                          const std::string& limit) {
  std::map<std::string, std::vector<std::string>> rows;
  for (std::vector<std::string> row : database.rows(
           "SELECT owner, used, remaining, denied, reset_at_ms, shadow_denied, blocked_until_ms "
           "FROM quota_usage WHERE limit_name = '" + limit + "'")) {
    const std::string owner = row.front();
    row.erase(row.begin());
    rows[owner] = row;
  }
  return rows;
}

TEST_CASE("quota_usage shows concurrency limits' owners as Engine::usage does", "[lease][usage]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  // The view takes the database's own time, so the engine runs on the real clock here; the
  // leases live an hour, so nothing expires between the two readings.
  f.clock.set(system_clock_ms());
  Limit jobs = concurrency_limit("jobs", 3, 3'600'000);
  jobs.block = milliseconds(7'200'000);
  f.engine.define(jobs);
  f.engine.define(concurrency_limit("quiet", 2, 3'600'000));

  // a: two units of three held; b: full and denied, so blocked; big: an override of 10;
  // ops: exempt (shows nothing used); released: holds nothing and was never denied (no row).
  CHECK(f.engine.acquire_lease("jobs", "a", 2).allowed);
  for (int i = 0; i < 3; ++i) CHECK(f.engine.acquire_lease("jobs", "b").allowed);
  CHECK(f.engine.acquire_lease("jobs", "b").reason == Reason::rate_limited);
  f.engine.set_override({"jobs", "big", Policy::maximum, 10, std::nullopt});
  CHECK(f.engine.acquire_lease("jobs", "big", 4).allowed);
  f.engine.set_override({"jobs", "ops", Policy::exempt, std::nullopt, std::nullopt});
  CHECK(f.engine.acquire_lease("jobs", "ops").allowed);
  const LeaseResult gone = f.engine.acquire_lease("jobs", "released");
  CHECK(f.engine.release_lease(gone.lease));
  // Shadow mode: a would-be denial is counted apart.
  Limit quiet = concurrency_limit("quiet", 1, 3'600'000);
  quiet.shadow = true;
  f.engine.define(quiet);
  CHECK(f.engine.acquire_lease("quiet", "s").allowed);
  CHECK(f.engine.acquire_lease("quiet", "s").shadow_denied);

  const auto jobs_view = view_rows(f.database, "jobs");
  CHECK(jobs_view == engine_rows(f.engine, "jobs"));
  CHECK(jobs_view.size() == 3);  // a, b, big
  REQUIRE(jobs_view.count("b") == 1);
  CHECK(jobs_view.at("b")[0] == "3");  // used
  CHECK(jobs_view.at("b")[1] == "0");  // remaining
  CHECK(jobs_view.at("b")[2] == "1");  // denied
  CHECK(jobs_view.at("b")[5] != "NULL");  // blocked_until_ms
  REQUIRE(jobs_view.count("big") == 1);
  CHECK(jobs_view.at("big")[1] == "6");
  const auto quiet_view = view_rows(f.database, "quiet");
  CHECK(quiet_view == engine_rows(f.engine, "quiet"));
  REQUIRE(quiet_view.count("s") == 1);
  CHECK(quiet_view.at("s")[4] == "1");  // shadow_denied

  // A rate limit beside them still shows as before.
  f.engine.define(make_limit("api", Algorithm::fixed_window, 5, 3'600'000));
  f.engine.consume("api", "a");
  CHECK(view_rows(f.database, "api") == engine_rows(f.engine, "api"));
}

}  // namespace
}  // namespace quota::test
