// The sliding log's storage (quota_log, migrations/0005_log_prune.sql): the migration's
// example, the bound on expired events that batched pruning promises, and a restart of the
// running total deleting every older event.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;  // a multiple of every prune interval below

// The prune interval of migration 0005 for an owner of `maximum` per `period_ms`.
std::int64_t prune_interval(std::int64_t maximum, std::int64_t period_ms) {
  return std::max<std::int64_t>(std::min(period_ms / 4, period_ms * 32 / maximum), 1);
}

struct Fixture : EngineOnFile {
  // The owner's events, as offsets from T.
  std::vector<std::int64_t> events(const std::string& limit, const std::string& owner) {
    std::vector<std::int64_t> offsets;
    for (const auto& row : raw.rows("SELECT at_ms FROM quota_log WHERE limit_name = '" + limit +
                                    "' AND owner = '" + owner + "' ORDER BY at_ms")) {
      offsets.push_back(std::stoll(row[0]) - T);
    }
    return offsets;
  }
};

TEST_CASE("the sliding log: the example of migration 0005", "[log]") {
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 10, 1000));  // intervals of 250 ms
  REQUIRE(prune_interval(10, 1000) == 250);
  for (std::int64_t at : {100, 900, 1600}) {
    f.clock.set(T + at);
    REQUIRE(f.engine.consume("log", "u").allowed);
  }
  const auto record_at = [&](std::int64_t at) {
    f.clock.set(T + at);
    REQUIRE(f.engine.consume("log", "u").allowed);
    return f.events("log", "u");
  };
  using Events = std::vector<std::int64_t>;
  CHECK(record_at(2050) == Events{1600, 2050});              // interval 8: <= 1050 go
  CHECK(record_at(2550) == Events{1600, 2050, 2550});        // interval 10: nothing <= 1550
  CHECK(record_at(2700) == Events{1600, 2050, 2550, 2700});  // interval 10 again: 1600 stays
  CHECK(record_at(2750) == Events{2050, 2550, 2700, 2750});  // interval 11: 1600 goes
  // The event left beyond its expiry never counted: 2550, 2700 and 2750 were live at 2700.
  f.clock.set(T + 2700);
  CHECK(f.engine.check("log", "u").remaining == 10 - 4);
}

TEST_CASE("the sliding log holds no event older than the period plus one prune interval", "[log]") {
  // Owners at, below and above their limit (record overdraws), with costs above 1 and several
  // events in one millisecond, on limits whose interval is a quarter period, 32 events at the
  // limit's rate, or 1 ms. After every record at t (a record, or a consume allowed), no event
  // of the owner has at_ms <= t - period - interval.
  struct Shape {
    std::int64_t maximum;
    std::int64_t period_ms;
  };
  const Shape shape =
      GENERATE(Shape{10, 1000}, Shape{1000, 10'000}, Shape{100'000, 1000}, Shape{3, 7});
  CAPTURE(shape.maximum, shape.period_ms);
  const std::int64_t interval = prune_interval(shape.maximum, shape.period_ms);
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, shape.maximum, shape.period_ms));
  std::mt19937_64 random(shape.maximum * 31 + shape.period_ms);
  const std::vector<std::string> owners = {"a", "b", "c"};
  std::int64_t now = T;
  std::int64_t largest = 0;
  for (int i = 0; i < 3000; ++i) {
    // Mostly small steps, so that owners stay near their limit; sometimes a long pause.
    now += random() % 50 == 0
               ? static_cast<std::int64_t>(random() % (2 * shape.period_ms))
               : static_cast<std::int64_t>(random() % (1 + shape.period_ms / shape.maximum * 2));
    f.clock.set(now);
    const std::string& owner = owners[random() % owners.size()];
    const std::int64_t cost = 1 + static_cast<std::int64_t>(random() % 3);
    bool recorded = false;  // the bound is kept by each record: a denial changes no event
    switch (random() % 8) {
      case 0:
        f.engine.record("log", owner, cost);
        recorded = true;
        break;
      case 1:
        f.engine.refund("log", owner, cost);
        break;
      default:
        recorded = f.engine.consume("log", owner, cost).allowed;
        break;
    }
    if (!recorded) continue;
    CAPTURE(i, now - T, owner);
    const std::int64_t oldest_allowed = now - T - shape.period_ms - interval;
    const auto events = f.events("log", owner);
    if (!events.empty()) CHECK(events.front() > oldest_allowed);
    largest = std::max<std::int64_t>(largest, static_cast<std::int64_t>(events.size()));
  }
  // And so the table stays small: no owner ever held more events than one period plus one
  // interval can hold, at one event per millisecond at most.
  CHECK(largest <= shape.period_ms + interval);
  CHECK(f.raw.integer("SELECT count(*) FROM quota_log") <=
        static_cast<std::int64_t>(owners.size()) * (shape.period_ms + interval));
}

TEST_CASE(
    "the sliding log at its limit for many periods keeps at most one batch of expired "
    "events",
    "[log]") {
  // 1,000 per 10 s, a consume every 10 ms: each owner holds 1,000 live events and prunes
  // every 320 ms, about 32 events.
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 1000, 10'000));
  REQUIRE(prune_interval(1000, 10'000) == 320);
  std::int64_t largest = 0;
  for (std::int64_t at = 0; at < 50'000; at += 10) {
    f.clock.set(T + at);
    REQUIRE(f.engine.consume("log", "u").allowed);
    largest = std::max<std::int64_t>(largest, f.raw.integer("SELECT count(*) FROM quota_log"));
  }
  CHECK(largest <= 1000 + 32);
  CHECK(f.events("log", "u").front() > 50'000 - 10 - 10'000 - 320);
}

TEST_CASE("the sliding log: a record with nothing live deletes every older event", "[log]") {
  // The running total restarts from zero when nothing is live, so an event left from before
  // would break the one running sum that a refund reads.
  Fixture f;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 10, 1000));
  f.clock.set(T + 100);
  f.engine.consume("log", "u", 5);
  f.clock.set(T + 600);
  f.engine.consume("log", "u", 1);
  f.clock.set(T + 1700);  // both have expired
  f.engine.consume("log", "u", 2);
  CHECK(f.events("log", "u") == std::vector<std::int64_t>{1700});
  // A refund then reads the new running sum only: 1 unit given back leaves 1.
  CHECK(f.engine.refund("log", "u", 1).remaining == 9);
  CHECK(f.raw.rows("SELECT cost, total FROM quota_log") ==
        std::vector<std::vector<std::string>>{{"1", "1"}});
}

}  // namespace
}  // namespace quota::test
