// Lockouts on concurrency limits (SPEC §13, migration 0014) on every backend: a denied acquire
// on a limit with a block locks the owner out as the other algorithms' blocks do (reason,
// retry_after_ms, denied, usage and usage --blocked), shadow mode and overrides as for them,
// quotactl's --block with --algo concurrency, and the migration upgrading a database in place.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "backend.h"
#include "migrations.h"
#include "quota/lease.h"
#include "quota/policy.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t T = 1'700'000'000'000;

// "uploads": at most `maximum` at once, leases of 10 s, a block of `block_ms` after a denial.
Limit blocking_uploads(std::int64_t block_ms, std::int64_t maximum = 1) {
  Limit limit;
  limit.name = "uploads";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = milliseconds(10'000);
  limit.block = milliseconds(block_ms);
  return limit;
}

QuotactlRun quotactl_on(const TestDatabase& db, std::vector<std::string> args) {
  args.insert(args.begin(), {"--db", db.location()});
  return run_quotactl(args);
}

std::int64_t leases_of(const TestDatabase& database, const std::string& owner) {
  return database.integer("SELECT count(*) FROM quota_leases WHERE owner = '" + owner + "'");
}

TEST_CASE("a denied acquire blocks the owner until t + block; every acquire is denied meanwhile",
          "[lease][lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(blocking_uploads(60'000));

  const LeaseResult held = f.engine.acquire_lease("uploads", "u");
  REQUIRE(held.allowed);
  f.clock.set(T + 10);
  const LeaseResult denial = f.engine.acquire_lease("uploads", "u");
  CHECK(denial.reason == Reason::rate_limited);  // the denial itself says why...
  CHECK(denial.retry_after_ms == 60'000);        // ...and waits at least the block
  CHECK(denial.denied == 1);
  CHECK(denial.lease.empty());

  // Released, the unit is free, but the owner stays blocked until T + 60010.
  CHECK(f.engine.release_lease(held.lease));
  f.clock.set(T + 20);
  const Result check = f.engine.check("uploads", "u");
  CHECK_FALSE(check.allowed);
  CHECK(check.reason == Reason::blocked);
  CHECK(check.remaining == 0);
  CHECK(check.retry_after_ms == 59'990);
  f.clock.set(T + 30);
  const LeaseResult blocked = f.engine.acquire_lease("uploads", "u");
  CHECK_FALSE(blocked.allowed);
  CHECK(blocked.reason == Reason::blocked);
  CHECK(blocked.retry_after_ms == 59'980);
  CHECK(blocked.remaining == 0);
  CHECK(blocked.denied == 2);
  CHECK(blocked.lease.empty());
  CHECK(leases_of(f.database, "u") == 0);
  // ...which neither took a lease nor moved the end.
  f.clock.set(T + 40);
  CHECK(f.engine.check("uploads", "u").retry_after_ms == 59'970);
  const Usage usage = f.engine.owner_usage("uploads", "u");
  CHECK(usage.blocked_until_ms == T + 60'010);
  CHECK(usage.remaining == 0);
  CHECK(usage.used == 0);
  CHECK(usage.denied == 2);
  const std::vector<Usage> locked_out = f.engine.usage("uploads", 0, UsageOrder::blocked);
  REQUIRE(locked_out.size() == 1);
  CHECK(locked_out[0].owner == "u");
  CHECK(locked_out[0].blocked_until_ms == T + 60'010);

  // Another owner is not blocked.
  CHECK(f.engine.acquire_lease("uploads", "v").allowed);

  // record still takes its lease, and answers blocked.
  const Result recorded = f.engine.record("uploads", "u");
  CHECK_FALSE(recorded.allowed);
  CHECK(recorded.reason == Reason::blocked);
  CHECK(leases_of(f.database, "u") == 1);
  CHECK(f.engine.release_lease(f.engine.leases("uploads", std::string_view("u")).at(0).lease));

  // A blocked wait is the longer of the block's and the leases' own.
  Limit longer = blocking_uploads(60'000);
  longer.period = milliseconds(86'400'000);
  f.engine.define(longer);
  f.clock.set(T + 50);
  f.engine.record("uploads", "u");  // a lease held until T + 1 day + 50
  CHECK(f.engine.check("uploads", "u").retry_after_ms == 86'400'000);
  CHECK(f.engine.release_lease(f.engine.leases("uploads", std::string_view("u")).at(0).lease));

  // The block ends at T + 60010 exactly.
  f.clock.set(T + 60'009);
  CHECK(f.engine.check("uploads", "u").reason == Reason::blocked);
  f.clock.set(T + 60'010);
  const LeaseResult after = f.engine.acquire_lease("uploads", "u");
  CHECK(after.allowed);
  CHECK(after.reason == Reason::ok);
  CHECK_FALSE(f.engine.owner_usage("uploads", "u").blocked_until_ms);
}

TEST_CASE("a lease block: cost over the capacity starts none; reset and dropping the block lift it",
          "[lease][lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(blocking_uploads(5000, 2));

  // cost_exceeds_capacity is no rate_limited denial: no block.
  CHECK(f.engine.acquire_lease("uploads", "u", 3).reason == Reason::cost_exceeds_capacity);
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
  CHECK(f.engine.acquire_lease("uploads", "u").reason == Reason::rate_limited);
  CHECK(f.engine.check("uploads", "u").reason == Reason::blocked);
  // Blocked, a cost over the capacity still never fits: -1, as the other algorithms answer.
  const LeaseResult never = f.engine.acquire_lease("uploads", "u", 3);
  CHECK(never.reason == Reason::blocked);
  CHECK(never.retry_after_ms == -1);

  // reset releases every lease and lifts the block.
  f.engine.reset("uploads", "u");
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);

  // A limit without a block ignores the owner's stored end (kept, not erased).
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
  CHECK(f.engine.acquire_lease("uploads", "u").reason == Reason::rate_limited);
  Limit unblocked = blocking_uploads(5000, 3);
  unblocked.block.reset();
  f.engine.define(unblocked);
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
  CHECK_FALSE(f.engine.owner_usage("uploads", "u").blocked_until_ms);
}

TEST_CASE("lease blocks: shadow mode never blocks, exempt is never blocked, deny is owner_denied",
          "[lease][lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  Limit shadow = blocking_uploads(60'000);
  shadow.shadow = true;
  f.engine.define(shadow);
  CHECK(f.engine.acquire_lease("uploads", "s").allowed);
  const LeaseResult would = f.engine.acquire_lease("uploads", "s");
  CHECK(would.allowed);
  CHECK(would.shadow_denied);
  CHECK(would.reason == Reason::rate_limited);
  CHECK(would.retry_after_ms == 10'000);  // the leases' own wait: shadow mode starts no block
  CHECK_FALSE(f.engine.owner_usage("uploads", "s").blocked_until_ms);

  // Enforcing: u is blocked; then in shadow mode its stored end is ignored.
  f.engine.define(blocking_uploads(60'000));
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
  CHECK(f.engine.acquire_lease("uploads", "u").reason == Reason::rate_limited);
  CHECK(f.engine.check("uploads", "u").reason == Reason::blocked);
  f.engine.define(shadow);
  CHECK(f.engine.check("uploads", "u").reason == Reason::rate_limited);
  f.engine.define(blocking_uploads(60'000));
  CHECK(f.engine.check("uploads", "u").reason == Reason::blocked);

  // An exempt owner is never blocked, even with a stored end.
  f.engine.set_override({"uploads", "u", Policy::exempt, std::nullopt, std::nullopt});
  const LeaseResult exempt = f.engine.acquire_lease("uploads", "u");
  CHECK(exempt.allowed);
  CHECK(exempt.reason == Reason::ok);
  CHECK(exempt.remaining == 1);
  CHECK_FALSE(f.engine.owner_usage("uploads", "u").blocked_until_ms);

  // A denied owner is owner_denied, never blocked.
  f.engine.set_override({"uploads", "banned", Policy::deny, std::nullopt, std::nullopt});
  const LeaseResult banned = f.engine.acquire_lease("uploads", "banned");
  CHECK(banned.reason == Reason::owner_denied);
  CHECK(banned.retry_after_ms == -1);
  CHECK(f.engine.check("uploads", "banned").reason == Reason::owner_denied);
  CHECK_FALSE(f.engine.owner_usage("uploads", "banned").blocked_until_ms);
}

TEST_CASE("a lease block: a caller whose clock is behind is told its own wait", "[lease][lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T + 5000);
  f.engine.define(blocking_uploads(30'000));
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
  CHECK(f.engine.acquire_lease("uploads", "u").retry_after_ms == 30'000);  // until T + 35000
  f.clock.set(T);  // behind the owner's remembered T + 5000: the wait is from T
  const LeaseResult behind = f.engine.acquire_lease("uploads", "u");
  CHECK(behind.reason == Reason::blocked);
  CHECK(behind.retry_after_ms == 35'000);
}

TEST_CASE("a concurrency limit takes a block; a bad one is refused and changes nothing",
          "[lease][lockout]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.engine.define(blocking_uploads(3'600'000));
  CHECK(f.engine.get("uploads")->block == milliseconds(3'600'000));
  CHECK(f.database.integer("SELECT block_ms FROM quota_limits WHERE name = 'uploads'") ==
        3'600'000);
  for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-5}, std::int64_t{31'622'400'001}}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(f.engine.define(blocking_uploads(bad)),
                      Catch::Contains("invalid block") && Catch::Contains("use 1 ms to 366 days"));
  }
  CHECK(f.engine.get("uploads")->block == milliseconds(3'600'000));
}

TEST_CASE("quotactl: limit set --algo concurrency --block, lease acquire and usage --by blocked",
          "[lease][lockout][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  const auto at = [&](std::int64_t ms, std::vector<std::string> args) {
    args.insert(args.begin(), {"--now", std::to_string(T + ms), "--json"});
    const QuotactlRun run = quotactl_on(db, args);
    INFO(run.err);
    REQUIRE((run.status == 0 || run.status == 1));
    return std::make_pair(run.status, nlohmann::json::parse(run.out));
  };
  REQUIRE(quotactl_on(db, {"migrate"}).status == 0);
  CHECK(at(0, {"limit", "set", "jobs", "--max", "1", "--ttl", "30s", "--block", "1h"})
            .second["block_ms"] == 3'600'000);
  // The readable line says so.
  const QuotactlRun shown = quotactl_on(db, {"limit", "get", "jobs"});
  CHECK(shown.status == 0);
  CHECK_THAT(shown.out, Catch::Contains("concurrency, blocks for 1h after a denial"));
  // Without --block or --no-block, the limit keeps its block.
  CHECK(at(0, {"limit", "set", "jobs", "--max", "1", "--ttl", "1m"}).second["block_ms"] ==
        3'600'000);
  CHECK(at(1, {"lease", "acquire", "jobs", "alice"}).first == 0);
  const auto denial = at(2, {"lease", "acquire", "jobs", "alice"});
  CHECK(denial.first == 1);
  CHECK(denial.second["reason"] == "rate_limited");
  const auto blocked = at(3, {"lease", "acquire", "jobs", "alice"});
  CHECK(blocked.first == 1);
  CHECK(blocked.second["reason"] == "blocked");
  CHECK(blocked.second["retry_after_ms"] == 3'600'000 - 1);
  const auto locked_out = at(4, {"usage", "jobs", "--by", "blocked"}).second;
  REQUIRE(locked_out.size() == 1);
  CHECK(locked_out[0]["owner"] == "alice");
  CHECK(locked_out[0]["blocked_until_ms"] == T + 2 + 3'600'000);
  // --no-block drops it.
  CHECK(at(5, {"limit", "set", "jobs", "--max", "1", "--ttl", "1m", "--no-block"})
            .second["block_ms"]
            .is_null());
  CHECK(at(6, {"usage", "jobs", "--by", "blocked"}).second.empty());

  // A bad --block is refused with exit 2, and changes nothing.
  const QuotactlRun bad =
      quotactl_on(db, {"limit", "set", "jobs", "--max", "1", "--ttl", "1m", "--block", "0s"});
  CHECK(bad.status == 2);
  CHECK_THAT(bad.err, Catch::Contains("--block"));
  CHECK(at(7, {"limit", "get", "jobs"}).second["block_ms"].is_null());
}

TEST_CASE("the concurrency lockout migration upgrades a database in place, keeping every row",
          "[lease][lockout][migrations]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  const auto& built_in = built_in_migrations(backend);
  db.migrate_before(14);
  // A build before it left a concurrency limit, an owner with a lease and two denials, and a
  // limit of each other kind with its override, written with plain SQL.
  db.exec(
      "INSERT INTO quota_limits (name, algorithm, maximum, period_ms) VALUES "
      "('uploads', 'concurrency', 1, 10000), ('api', 'fixed_window', 5, 1000)");
  db.exec("INSERT INTO quota_limits (name, algorithm, maximum, period_ms, block_ms) VALUES "
          "('login', 'sliding_log', 1, 1000, 60000)");
  db.exec(
      "INSERT INTO quota_overrides (limit_name, owner, policy, maximum) VALUES "
      "('api', 'big', 'maximum', 50)");
  db.exec(
      "INSERT INTO quota_leases (id, limit_name, owner, cost, expires_at_ms, acquired_at_ms) "
      "VALUES ('0123456789abcdef0123456789abcdef', 'uploads', 'u', 1, " +
      std::to_string(T + 10'000) + ", " + std::to_string(T) + ")");
  db.exec(
      "INSERT INTO quota_lease_owners (limit_name, owner, maximum, period_ms, cost, seen_ms, "
      "denied, shadow_denied) VALUES ('uploads', 'u', 1, 10000, 1, " +
      std::to_string(T) + ", 2, 0)");
  const auto limits = "SELECT name, algorithm, maximum, period_ms, block_ms, plain "
                      "FROM quota_limits ORDER BY name";
  const auto before = db.rows(limits);

  ManualClock clock;
  clock.set(T + 10);
  Engine engine = Engine::open(db.location(), options_with(clock));
  CHECK(engine.schema_version() == built_in.back().version);
  CHECK(db.rows(limits) == before);
  CHECK(db.rows("SELECT owner, denied, blocked_until_ms FROM quota_lease_owners") ==
        std::vector<std::vector<std::string>>{{"u", "2", "NULL"}});
  // The lease still counts, and the owner keeps its denials.
  const LeaseResult full = engine.acquire_lease("uploads", "u");
  CHECK(full.reason == Reason::rate_limited);
  CHECK(full.denied == 3);
  // The block now fits a concurrency limit.
  Limit limit = *engine.get("uploads");
  limit.block = milliseconds(1000);
  engine.define(limit);
  CHECK(engine.acquire_lease("uploads", "u").reason == Reason::rate_limited);
  CHECK(engine.check("uploads", "u").reason == Reason::blocked);
  // The triggers on quota_limits came back: removing a limit removes its state and overrides,
  // and the plain flag follows the limit.
  CHECK(db.integer("SELECT plain FROM quota_limits WHERE name = 'uploads'") == 0);
  engine.remove("api");
  CHECK(db.integer("SELECT count(*) FROM quota_overrides WHERE limit_name = 'api'") == 0);
  engine.remove("uploads");
  CHECK(db.integer("SELECT count(*) FROM quota_leases") == 0);
  CHECK(db.integer("SELECT count(*) FROM quota_lease_owners") == 0);
  Limit plain = make_limit("login", Algorithm::sliding_log, 1, 1000);
  engine.define(plain);
  CHECK(db.integer("SELECT plain FROM quota_limits WHERE name = 'login'") == 1);
}

}  // namespace
}  // namespace quota::test
