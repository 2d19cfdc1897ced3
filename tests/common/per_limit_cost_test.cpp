// A cost per limit in consume_all, check_all and acquire_all (Charge::cost; quotactl's
// `consume tokens=500,requests OWNER`, SPEC §6), on every backend: each limit is charged its
// own cost, a denial charges none, an idempotency key's request includes the costs, and a bad
// cost is refused before anything runs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend.h"
#include "quota/quota.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

constexpr std::int64_t kHour = 3'600'000;

// The error `action` throws: its code and message (code nullopt when it throws none).
template <typename Action>
std::pair<std::optional<ErrorCode>, std::string> error_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return {error.code(), error.what()};
  }
  return {std::nullopt, ""};
}

// tokens (1000 an hour), requests (10 an hour) and slots (3 at once, held an hour).
void define_limits(Engine& engine) {
  engine.define(make_limit("tokens", Algorithm::fixed_window, 1000, kHour));
  engine.define(make_limit("requests", Algorithm::fixed_window, 10, kHour));
  Limit slots = make_limit("slots", Algorithm::concurrency, 3, kHour);
  engine.define(slots);
}

}  // namespace

TEST_CASE("consume_all charges each limit its own cost, and the call's cost to the others",
          "[policy][per_limit_cost]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  define_limits(engine);
  std::vector<std::int64_t> hook_costs;
  Hooks hooks;
  hooks.before_consume = [&](const Request& request) {
    hook_costs.push_back(request.cost);
    return true;
  };
  engine.set_hooks("tokens", hooks);

  const Decision first = engine.consume_all({{"tokens", "u", 500}, {"requests", "u"}}, 2);
  CHECK(first.result.allowed);
  CHECK(engine.owner_usage("tokens", "u").used == 500);
  CHECK(engine.owner_usage("requests", "u").used == 2);
  CHECK(hook_costs == std::vector<std::int64_t>{500});

  // 600 more tokens do not fit: nothing is charged, tokens decides and counts the denial.
  const Decision denied = engine.consume_all({{"tokens", "u", 600}, {"requests", "u"}});
  CHECK_FALSE(denied.result.allowed);
  CHECK(denied.limit == "tokens");
  CHECK(denied.result.remaining == 500);
  CHECK(engine.owner_usage("tokens", "u").used == 500);
  CHECK(engine.owner_usage("tokens", "u").denied == 1);
  CHECK(engine.owner_usage("requests", "u").used == 2);

  // A cost above one limit's capacity can never be allowed, whatever the call's cost.
  const Decision never = engine.consume_all({{"requests", "u"}, {"tokens", "u", 1001}});
  CHECK(never.limit == "tokens");
  CHECK(never.result.reason == Reason::cost_exceeds_capacity);
  CHECK(never.result.retry_after_ms == -1);

  // check_all: the same decision, nothing changed.
  const std::string before = database.dump();
  const Decision fits = engine.check_all({{"tokens", "u", 500}, {"requests", "u", 8}});
  CHECK(fits.result.allowed);
  CHECK(fits.limit == "requests");  // a check's remaining is what is available now: 8 < 500
  const Decision too_many = engine.check_all({{"tokens", "u", 10}, {"requests", "u", 9}});
  CHECK_FALSE(too_many.result.allowed);
  CHECK(too_many.limit == "requests");
  CHECK(too_many.result.remaining == 8);
  CHECK(engine.check_all({"tokens", "requests"}, "u").result.allowed);
  CHECK(database.dump() == before);

  // acquire_all: a lease of the limit's own cost.
  const Decision acquired =
      engine.acquire_all({{"slots", "u", 2}, {"tokens", "u", 100}}, 1, std::chrono::milliseconds(0));
  REQUIRE(acquired.result.allowed);
  REQUIRE(acquired.leases.size() == 1);
  const std::vector<LeaseInfo> held = engine.leases("slots", "u");
  REQUIRE(held.size() == 1);
  CHECK(held.front().cost == 2);
  CHECK(engine.owner_usage("tokens", "u").used == 600);
  const Decision full =
      engine.acquire_all({{"slots", "u", 2}, {"tokens", "u", 1}}, 1, std::chrono::milliseconds(0));
  CHECK_FALSE(full.result.allowed);
  CHECK(full.limit == "slots");
  CHECK(engine.owner_usage("tokens", "u").used == 600);
}

TEST_CASE("consume_all's idempotency key remembers each limit's cost",
          "[policy][per_limit_cost][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  define_limits(engine);

  const Decision first = engine.consume_all({{"tokens", "u", 500}, {"requests", "u"}}, 1, "k1");
  CHECK(first.result.allowed);
  CHECK_FALSE(first.result.replayed);
  // The same costs, given in another order: the stored answer, nothing charged.
  const Decision retry = engine.consume_all({{"requests", "u"}, {"tokens", "u", 500}}, 1, "k1");
  CHECK(retry.result.replayed);
  CHECK(engine.owner_usage("tokens", "u").used == 500);
  CHECK(engine.owner_usage("requests", "u").used == 1);
  // A limit's own cost equal to the call's is the same request as none.
  engine.consume_all({"tokens", "requests"}, "u", 1, "k2");
  CHECK(engine.consume_all({{"tokens", "u", 1}, {"requests", "u"}}, 1, "k2").result.replayed);

  // Another cost on one limit is another request: a conflict that changes nothing.
  const std::string before = database.dump();
  for (const std::vector<Charge>& other :
       {std::vector<Charge>{{"tokens", "u", 400}, {"requests", "u"}},
        std::vector<Charge>{{"tokens", "u"}, {"requests", "u"}},
        std::vector<Charge>{{"tokens", "u", 500}, {"requests", "u", 2}}}) {
    CHECK(error_of([&] { engine.consume_all(other, 1, "k1"); }).first ==
          ErrorCode::idempotency_conflict);
  }
  // So is the same per-limit cost with another call's cost on the other limit.
  CHECK(error_of([&] {
          engine.consume_all({{"tokens", "u", 500}, {"requests", "u"}}, 2, "k1");
        }).first == ErrorCode::idempotency_conflict);
  CHECK(database.dump() == before);
}

TEST_CASE("a bad cost of one limit is refused before anything runs",
          "[policy][per_limit_cost][validation]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  define_limits(engine);
  const std::string before = database.dump();
  for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMaximumBound + 1}) {
    CAPTURE(bad);
    const std::vector<Charge> charges{{"requests", "u"}, {"tokens", "u", bad}};
    for (const auto& [code, message] :
         {error_of([&] { engine.consume_all(charges, 1); }),
          error_of([&] { engine.consume_all(charges, 1, "k"); }),
          error_of([&] { engine.check_all(charges, 1); }),
          error_of([&] { engine.acquire_all(charges, 1, std::chrono::milliseconds(0)); })}) {
      CHECK(code == ErrorCode::invalid_argument);
      CHECK(message.find("the cost of limit 'tokens'") != std::string::npos);
      CHECK(message.find("a cost is a whole number from 1 to") != std::string::npos);
    }
  }
  CHECK(database.dump() == before);
}

TEST_CASE("quotactl consume and check take NAME=COST and several limits",
          "[quotactl][policy][per_limit_cost]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    define_limits(setup);
  }
  constexpr std::int64_t kNow = 1'700'000'000'000;
  const auto run = [&](std::vector<std::string> args) {
    return run_quotactl_at(database.location(), kNow, std::move(args));
  };

  // check a,b: every limit at once, changing nothing (it was refused before).
  QuotactlRun checked = run({"check", "tokens=1000,requests", "u", "--cost", "10", "--json"});
  INFO(checked.err);
  REQUIRE(checked.status == 0);
  CHECK(checked.document()["allowed"] == true);
  CHECK(checked.document()["limits"] == nlohmann::json::array({"tokens", "requests"}));
  CHECK(checked.document()["limit"] == "requests");  // the fewest units available: 10
  CHECK(checked.document()["remaining"] == 10);
  CHECK_FALSE(checked.document().contains("leases"));
  const QuotactlRun over = run({"check", "tokens=1001,requests", "u", "--json"});
  CHECK(over.status == 1);
  CHECK(over.document()["limit"] == "tokens");
  CHECK(over.document()["reason"] == "cost_exceeds_capacity");
  CHECK(run({"check", "requests,tokens", "u"}).out.find("[decided by") != std::string::npos);

  // consume tokens=500,requests: 500 of tokens, --cost of requests.
  const QuotactlRun consumed = run({"consume", "tokens=500,requests", "u", "--cost", "3", "--json"});
  INFO(consumed.err);
  REQUIRE(consumed.status == 0);
  CHECK(run({"check", "tokens", "u", "--json"}).document()["remaining"] == 500);
  CHECK(run({"check", "requests", "u", "--json"}).document()["remaining"] == 7);
  // A lone NAME=COST is a consume of that cost.
  REQUIRE(run({"consume", "tokens=100", "u"}).status == 0);
  CHECK(run({"check", "tokens", "u", "--json"}).document()["remaining"] == 400);
  const QuotactlRun line = run({"consume", "tokens=401,requests", "u"});
  CHECK(line.status == 1);
  CHECK(line.out.find("denied   tokens/u: 400 of 1000 left") == 0);
  CHECK(run({"check", "requests", "u", "--json"}).document()["remaining"] == 7);

  // With a key: the same costs replay, other costs conflict (exit 2).
  REQUIRE(run({"consume", "tokens=5,requests", "u", "--key", "k"}).status == 0);
  CHECK(run({"consume", "requests,tokens=5", "u", "--key", "k", "--json"})
            .document()["replayed"] == true);
  const QuotactlRun conflict = run({"consume", "tokens=6,requests", "u", "--key", "k"});
  CHECK(conflict.status == 2);
  CHECK(conflict.err.find("idempotency") != std::string::npos);

  // A lease of its own cost on a concurrency limit.
  const QuotactlRun leased = run({"consume", "slots=2,requests", "u", "--json"});
  REQUIRE(leased.status == 0);
  REQUIRE(leased.document()["leases"].size() == 1);
  CHECK(run({"check", "slots", "u", "--json"}).document()["remaining"] == 1);
}

TEST_CASE("quotactl refuses a bad NAME=COST with exit 2, before opening the database",
          "[quotactl][per_limit_cost][validation]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    define_limits(setup);
  }
  const std::string before = database.dump();
  const std::vector<std::pair<std::string, std::string>> cases{
      {"tokens=,requests", "'tokens=' has no cost after '=': write tokens=COST"},
      {"tokens=0,requests", "invalid cost of limit 'tokens' '0': use a whole number from 1 to"},
      {"tokens=-1,requests", "invalid cost of limit 'tokens' '-1': use a whole number from 1 to"},
      {"tokens=x,requests", "invalid cost of limit 'tokens' 'x': use a whole number from 1 to"},
      {"tokens=1.5", "invalid cost of limit 'tokens' '1.5': use a whole number from 1 to"},
      {"tokens=1=2,requests", "'tokens=1=2' has more than one '=': write tokens=COST once"},
      {"tokens,requests,tokens=2", "limit 'tokens' is named twice in 'tokens,requests,tokens=2': "
                                   "name each limit once"},
      {"tokens=2,tokens", "limit 'tokens' is named twice"},
      {"=5,requests", "invalid limit name ''"},
  };
  for (const std::string command : {"consume", "check"}) {
    for (const auto& [names, message] : cases) {
      CAPTURE(command, names);
      const QuotactlRun refused = run_quotactl_at(database.location(), 1'700'000'000'000,
                                                  {command, names, "u"});
      CHECK(refused.status == 2);
      CHECK(refused.one_error_line());
      CHECK(refused.err.find(message) != std::string::npos);
      CHECK(refused.out.empty());
      // Checked before the database is opened: a missing file gives the same error.
      const QuotactlRun missing =
          run_quotactl_at("/nonexistent/quota.db", 1'700'000'000'000, {command, names, "u"});
      CHECK(missing.status == 2);
      CHECK(missing.err == refused.err);
    }
  }
  CHECK(database.dump() == before);
}

}  // namespace quota::test
