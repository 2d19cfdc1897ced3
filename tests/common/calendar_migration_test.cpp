// Migration 0008 (calendar periods, migrations/0008_calendar_periods.sql and its PostgreSQL
// twin): a database that a build before it left behind is upgraded in place, every row kept,
// and its limits become calendar limits without losing an owner's state.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "backend.h"
#include "migrations.h"
#include "quota/policy.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

// 2025-11-30T23:59:00Z, a minute before December (UTC).
constexpr std::int64_t T = 1'764'547'140'000;
constexpr std::int64_t kDecember = 1'764'547'200'000;  // 2025-12-01T00:00:00Z
constexpr std::int64_t kJanuary = 1'767'225'600'000;   // 2026-01-01T00:00:00Z

TEST_CASE("the calendar migration upgrades a database in place, keeping every row",
          "[calendar][migrations]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  // Every migration before 0008, as a build before it left the database...
  db.migrate_before(8);
  // ...with limits, an override, an owner at its limit in a fixed window and a blocked one,
  // written with plain SQL (this build's statements are not the previous build's).
  db.exec(
      "INSERT INTO quota_limits (name, algorithm, maximum, period_ms, block_ms) VALUES "
      "('api', 'fixed_window', 2, 86400000, NULL), ('login', 'fixed_window', 1, 60000, 3600000)");
  db.exec(
      "INSERT INTO quota_overrides (limit_name, owner, policy, maximum, burst) VALUES "
      "('api', 'vip', 'maximum', 5, NULL)");
  db.exec(
      "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used, "
      "previous_used, denied, seen_ms, blocked_until_ms) VALUES "
      "('api', 'u', 2, 86400000, " +
      std::to_string(T / 86'400'000) + ", 2, 0, 1, " + std::to_string(T) +
      ", NULL), ('login', 'v', 1, 60000, " + std::to_string(T / 60'000) + ", 1, 0, 1, " +
      std::to_string(T) + ", " + std::to_string(T + 3'600'000) + ")");
  const auto columns =
      "SELECT limit_name, owner, window_key, used, previous_used, denied, seen_ms, "
      "blocked_until_ms FROM quota_windows ORDER BY limit_name, owner";
  const auto before = db.rows(columns);
  const auto limits_before = db.rows(
      "SELECT name, algorithm, maximum, period_ms, block_ms FROM quota_limits ORDER BY name");

  ManualClock clock;
  clock.set(T + 10);
  Engine engine = Engine::open(db.location(), options_with(clock));
  // 0008, then every later one (0009, the generated usage view, and on)
  CHECK(engine.schema_version() == built_in_migrations(db.backend()).back().version);
  CHECK(db.rows(columns) == before);
  CHECK(db.rows("SELECT name, algorithm, maximum, period_ms, block_ms FROM quota_limits "
                "ORDER BY name") == limits_before);
  CHECK(db.rows("SELECT calendar, utc_offset_ms, anchor_ms FROM quota_limits ORDER BY name") ==
        std::vector<std::vector<std::string>>{{"NULL", "0", "NULL"}, {"NULL", "0", "NULL"}});
  CHECK(db.integer("SELECT count(*) FROM quota_anchors") == 0);
  CHECK_FALSE(engine.get("api")->calendar);

  // The owners keep their usage, denials and block.
  const Result api = engine.consume("api", "u");
  CHECK(api.reason == Reason::rate_limited);
  CHECK(api.denied == 2);
  CHECK(engine.check("login", "v").reason == Reason::blocked);

  // The limit becomes a calendar month: the row written under a period in ms starts afresh
  // (its window number is not a window's end), and counts until December begins.
  engine.define(calendar_limit("api", 2, Calendar::month));
  const Result first = engine.consume("api", "u");
  CHECK(first.allowed);
  CHECK(first.reset_at_ms == kDecember);
  CHECK(engine.consume("api", "u").allowed);
  const Result denied = engine.consume("api", "u");
  CHECK(denied.reason == Reason::rate_limited);
  CHECK(denied.retry_after_ms == kDecember - (T + 10));
  clock.set(kDecember);
  const Result december = engine.consume("api", "u");
  CHECK(december.allowed);
  CHECK(december.reset_at_ms == kJanuary);
  // The override still applies to the calendar limit, and an owner's anchor takes.
  CHECK(engine.consume("api", "vip", 5).allowed);
  engine.set_anchor({"api", "w", T});
  CHECK(engine.anchors() == std::vector<Anchor>{{"api", "w", T}});
  // Anchored at 23:59:00 on the 30th: the window holding 1 December began on 30 November at
  // 23:59 and ends on 2025-12-30T23:59:00Z.
  CHECK(engine.consume("api", "w").reset_at_ms == kDecember + 30LL * 86'400'000 - 60'000);
}

}  // namespace
}  // namespace quota::test
