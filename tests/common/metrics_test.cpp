// Engine::metrics() (include/quota/metrics.h) on every backend: decisions are counted per
// operation under the answer's own reason names, so that a check is never an admission; the
// latency histograms are per operation with bounds up to the busy timeout; and
// Engine::leases_held() is the gauge of every process's leases.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "backend.h"
#include "quota/lease.h"
#include "quota/policy.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t T = 1'700'000'000'000;

Limit concurrency(const std::string& name, std::int64_t maximum, std::int64_t ttl_ms = 10'000) {
  Limit limit;
  limit.name = name;
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = milliseconds(ttl_ms);
  return limit;
}

std::uint64_t decisions(const Metrics& metrics, const std::string& limit,
                        const std::string& operation, const std::string& reason) {
  const auto by_limit = metrics.decisions.find(limit);
  if (by_limit == metrics.decisions.end()) return 0;
  const auto by_operation = by_limit->second.find(operation);
  if (by_operation == by_limit->second.end()) return 0;
  const auto found = by_operation->second.find(reason);
  return found == by_operation->second.end() ? 0 : found->second;
}

// Every (limit, operation, reason) counted, as "limit operation reason count" lines.
std::vector<std::string> counted(const Metrics& metrics) {
  std::vector<std::string> lines;
  for (const auto& [limit, operations] : metrics.decisions) {
    for (const auto& [operation, reasons] : operations) {
      for (const auto& [reason, count] : reasons) {
        lines.push_back(limit + " " + operation + " " + reason + " " + std::to_string(count));
      }
    }
  }
  return lines;
}

}  // namespace

TEST_CASE("metrics count decisions per operation under the answer's reason names",
          "[metrics]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(make_limit("send", Algorithm::fixed_window, 1, 60'000));
  f.engine.define(make_limit("other", Algorithm::fixed_window, 10, 60'000));
  f.engine.define(concurrency("uploads", 1));

  // 1 consume and 5 checks: one admission, not six.
  CHECK(f.engine.consume("send", "alice").allowed);
  for (int i = 0; i < 5; ++i) CHECK_FALSE(f.engine.check("send", "alice").allowed);
  CHECK_FALSE(f.engine.consume("send", "alice").allowed);
  f.engine.record("other", "alice");
  f.engine.consume_many({{"other", "bob"}, {"send", "bob"}});
  f.engine.check_many({{"other", "bob"}});
  f.engine.record_many({{"other", "carol"}});
  // consume_all counts its deciding limit's answer, as a consume.
  CHECK_FALSE(f.engine.consume_all({"other", "send"}, "alice").result.allowed);
  // acquire waits for its turn (here not at all): counted once, by its final answer.
  CHECK_FALSE(f.engine.acquire("send", "bob", 1, milliseconds(0)).allowed);
  const LeaseResult lease = f.engine.acquire_lease("uploads", "alice");
  REQUIRE(lease.allowed);
  CHECK_FALSE(f.engine.acquire_lease("uploads", "alice").allowed);
  CHECK(f.engine.renew_lease(lease.lease).allowed);
  CHECK(f.engine.release_lease(lease.lease));
  // Released: the renewal finds no lease, nor its limit.
  CHECK(f.engine.renew_lease(lease.lease).reason == Reason::lease_expired);

  const Metrics metrics = f.engine.metrics();
  CHECK(counted(metrics) == std::vector<std::string>{
                                " renew lease_expired 1",
                                "other check ok 1",
                                "other consume ok 1",
                                "other record ok 2",
                                "send check rate_limited 5",
                                "send consume ok 2",
                                "send consume rate_limited 2",
                                "send wait rate_limited 1",
                                "uploads acquire ok 1",
                                "uploads acquire rate_limited 1",
                                "uploads renew ok 1",
                            });
  // The admissions a dashboard sums, consumes and acquires allowed, are the 3 requests
  // admitted (alice's and bob's consumes, alice's lease): none of the checks.
  CHECK(decisions(metrics, "send", "consume", "ok") +
            decisions(metrics, "uploads", "acquire", "ok") ==
        3);
  CHECK(decisions(metrics, "send", "consume", "allowed") == 0);

  // Each operation's durations, one sample per call (a batch is one).
  std::vector<std::string> measured;
  for (const auto& [operation, histogram] : metrics.operation_duration) {
    measured.push_back(operation + " " + std::to_string(histogram.count));
    std::uint64_t sum = 0;
    for (const std::uint64_t count : histogram.counts) sum += count;
    CHECK(sum == histogram.count);
    CHECK(histogram.counts.size() == histogram.bounds.size() + 1);
  }
  CHECK(measured == std::vector<std::string>{"acquire 2", "check 6", "consume 4", "record 2",
                                             "renew 2", "wait 1"});
}

TEST_CASE("a shadow-mode denial is counted under its own reason", "[metrics]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  Limit shadow = make_limit("shadowed", Algorithm::fixed_window, 1, 60'000);
  shadow.shadow = true;
  f.engine.define(shadow);
  f.engine.consume("shadowed", "alice");
  CHECK(f.engine.consume("shadowed", "alice").shadow_denied);
  const Metrics metrics = f.engine.metrics();
  CHECK(decisions(metrics, "shadowed", "consume", "ok") == 1);
  CHECK(decisions(metrics, "shadowed", "consume", "shadow_denied") == 1);
}

TEST_CASE("an error is counted by its code and measured under its operation", "[metrics]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  CHECK_THROWS_AS(f.engine.consume("nothing", "alice"), Error);
  CHECK_THROWS_AS(f.engine.check("nothing", "alice"), Error);
  const Metrics metrics = f.engine.metrics();
  CHECK(metrics.errors.at("unknown_limit") == 2);
  CHECK(metrics.decisions.empty());
  CHECK(metrics.operation_duration.at("consume").count == 1);
  CHECK(metrics.operation_duration.at("check").count == 1);
}

TEST_CASE("the latency histograms' bounds end at the busy timeout", "[metrics]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  clock.set(T);
  for (const auto& [timeout, last, before_last] :
       std::vector<std::tuple<milliseconds, double, double>>{{milliseconds(5000), 5.0, 2.5},
                                                             {milliseconds(30'000), 30.0, 25.0},
                                                             {milliseconds(200), 0.2, 0.1}}) {
    CAPTURE(timeout.count());
    Options options = options_with(clock);
    options.busy_timeout = timeout;
    Engine engine = Engine::open(database.location(), options);
    engine.define(make_limit("send", Algorithm::fixed_window, 1, 60'000));
    engine.consume("send", "alice");
    const Metrics metrics = engine.metrics();
    REQUIRE(metrics.operation_duration.count("consume") == 1);
    const DurationHistogram& histogram = metrics.operation_duration.at("consume");
    REQUIRE(histogram.bounds.size() >= 2);
    CHECK(histogram.bounds.front() == 0.00005);
    CHECK(histogram.bounds.back() == last);
    CHECK(histogram.bounds[histogram.bounds.size() - 2] == before_last);
    CHECK(histogram.count == 1);
  }
}

TEST_CASE("leases_held is every process's leases of each concurrency limit", "[metrics][lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(concurrency("uploads", 3, 10'000));
  f.engine.define(concurrency("idle", 1));
  f.engine.define(make_limit("send", Algorithm::fixed_window, 1, 60'000));
  // A second Engine stands for another process on the same database.
  Engine other = Engine::open(f.database.location(), options_with(f.clock));

  const LeaseResult one = f.engine.acquire_lease("uploads", "alice");
  const LeaseResult two = other.acquire_lease("uploads", "bob", 2);
  REQUIRE(one.allowed);
  REQUIRE(two.allowed);
  auto held = f.engine.leases_held();
  REQUIRE(held.size() == 2);  // the concurrency limits only, idle ones too
  CHECK(held.at("uploads").leases == 2);
  CHECK(held.at("uploads").units == 3);
  CHECK(held.at("idle").leases == 0);
  CHECK(held.at("idle").units == 0);

  CHECK(other.release_lease(two.lease));
  held = f.engine.leases_held();
  CHECK(held.at("uploads").leases == 1);
  CHECK(held.at("uploads").units == 1);
  // An expired lease is not held, though its row waits for gc.
  f.clock.set(T + 10'000);
  held = f.engine.leases_held();
  CHECK(held.at("uploads").leases == 0);
  CHECK(held.at("uploads").units == 0);
}

}  // namespace quota::test
