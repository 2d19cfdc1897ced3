// A calendar limit redefined while owners count (src/statements.cpp, kCalendarInput): the
// window an owner counts keeps its end unless it is longer than the new unit's longest window.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <chrono>

#include "backend.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kDay = 86'400'000;
constexpr std::int64_t T = 1'764'547'140'000;          // 2025-11-30T23:59:00Z
constexpr std::int64_t kDecember = 1'764'547'200'000;  // 2025-12-01T00:00:00Z
constexpr std::int64_t kNextYear = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr std::int64_t kNine = 9 * 60 * 60 * 1000;     // +09:00 in ms

TEST_CASE("a redefined calendar limit keeps the window an owner counts, up to the new unit",
          "[calendar]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  Engine& engine = on.engine;
  on.clock.set(T);

  SECTION("another offset applies from the end of the window being counted") {
    engine.define(calendar_limit("api", 1, Calendar::month));
    CHECK(engine.consume("api", "u").reset_at_ms == kDecember);
    // At +09:00, T is already 1 December 08:59: December's window would end on 1 January at
    // 00:00 +09:00. The owner's November window still holds until its end.
    engine.define(calendar_limit("api", 1, Calendar::month, std::chrono::minutes(9 * 60)));
    const Result denied = engine.consume("api", "u");
    CHECK(denied.reason == Reason::rate_limited);
    CHECK(denied.reset_at_ms == kDecember);
    CHECK(denied.retry_after_ms == kDecember - T);
    on.clock.set(kDecember);
    const Result december = engine.consume("api", "u");
    CHECK(december.allowed);
    CHECK(december.reset_at_ms == kNextYear - kNine);
    // A new owner counts in the new configuration's window at once.
    on.clock.set(T);
    CHECK(engine.consume("api", "v").reset_at_ms == kNextYear - kNine);
  }

  SECTION("a shorter unit ends a longer window at once") {
    engine.define(calendar_limit("api", 1, Calendar::year));
    CHECK(engine.consume("api", "u").reset_at_ms == kNextYear);
    CHECK_FALSE(engine.consume("api", "u").allowed);
    engine.define(calendar_limit("api", 1, Calendar::day));
    const Result today = engine.consume("api", "u");
    CHECK(today.allowed);
    CHECK(today.reset_at_ms == kDecember);
  }

  SECTION("a longer unit keeps the shorter window until its end") {
    engine.define(calendar_limit("api", 1, Calendar::day));
    CHECK(engine.consume("api", "u").reset_at_ms == kDecember);
    engine.define(calendar_limit("api", 1, Calendar::year));
    CHECK(engine.consume("api", "u").reset_at_ms == kDecember);
    on.clock.set(kDecember);
    const Result year = engine.consume("api", "u");
    CHECK(year.allowed);
    CHECK(year.reset_at_ms == kNextYear);
    CHECK(engine.consume("api", "u").retry_after_ms == kNextYear - kDecember);
  }

  SECTION("owner_usage reads calendar limits with their own statements") {
    engine.define(calendar_limit("api", 5, Calendar::month));
    engine.define(
        {"plain", Algorithm::fixed_window, 5, std::chrono::milliseconds(kDay), std::nullopt});
    engine.consume("api", "u", 2);
    engine.consume("plain", "u");
    const std::vector<Usage> rows = engine.owner_usage("u");
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].limit == "api");
    CHECK(rows[0].used == 2);
    CHECK(rows[0].reset_at_ms == kDecember);
    CHECK(rows[1].limit == "plain");
    CHECK(rows[1].used == 1);
    // An owner with only an anchor, its own or a '*' one, is shown on the calendar limit.
    engine.set_anchor({"api", "anchored", T - 10 * kDay});
    engine.set_anchor({"*", "everywhere", T - 10 * kDay});
    for (const char* owner : {"anchored", "everywhere"}) {
      CAPTURE(owner);
      const std::vector<Usage> anchored = engine.owner_usage(owner);
      REQUIRE(anchored.size() == 1);
      CHECK(anchored[0].limit == "api");
      CHECK(anchored[0].used == 0);
      CHECK(anchored[0].remaining == 5);
    }
  }

  SECTION("a period in ms and a calendar unit do not share a count") {
    engine.define(
        {"api", Algorithm::fixed_window, 1, std::chrono::milliseconds(kDay), std::nullopt});
    CHECK(engine.consume("api", "u").allowed);
    engine.define(calendar_limit("api", 1, Calendar::day));
    CHECK(engine.consume("api", "u").allowed);
    CHECK_FALSE(engine.consume("api", "u").allowed);
  }
}

}  // namespace
}  // namespace quota::test

namespace quota::test {
namespace {

// The statements of a kind match only limits of that kind (src/statements.h): a SQL client
// that runs the fixed_window statement on a calendar limit, or the calendar one on a
// fixed_window limit, gets "unknown limit" (check: no row) and changes nothing, as with the
// statement of another algorithm.
TEST_CASE("a calendar limit and a fixed_window one answer only their own statements",
          "[calendar][sql]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  {
    Engine engine = Engine::open(path);
    engine.define(calendar_limit("monthly", 5, Calendar::month));
    engine.define({"minutely", Algorithm::fixed_window, 5, std::chrono::minutes(1), std::nullopt});
  }
  const std::string before = dump(path);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const auto attempt = [&](detail::Operation operation, detail::StatementKind kind,
                           const char* limit) {
    sqlite3_stmt* statement = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, detail::statement(operation, kind).c_str(), -1, &statement,
                               nullptr) == SQLITE_OK);
    sqlite3_bind_text(statement, sqlite3_bind_parameter_index(statement, ":limit"), limit, -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_text(statement, sqlite3_bind_parameter_index(statement, ":owner"), "u", -1,
                      SQLITE_TRANSIENT);
    const int status = sqlite3_step(statement);
    const std::string message = sqlite3_errmsg(db);
    sqlite3_finalize(statement);
    return std::pair{status, message};
  };
  for (const auto& [kind, limit] : {std::pair{detail::StatementKind::fixed_window, "monthly"},
                                    std::pair{detail::StatementKind::calendar_window, "minutely"}}) {
    CAPTURE(limit);
    for (detail::Operation operation :
         {detail::Operation::consume, detail::Operation::record, detail::Operation::refund}) {
      const auto [status, message] = attempt(operation, kind, limit);
      CHECK(status == SQLITE_CONSTRAINT);
      CHECK_THAT(message, Catch::Contains("unknown limit"));
    }
    CHECK(attempt(detail::Operation::check, kind, limit).first == SQLITE_DONE);
    // Each limit's own statement answers.
    const detail::StatementKind own = kind == detail::StatementKind::calendar_window
                                          ? detail::StatementKind::fixed_window
                                          : detail::StatementKind::calendar_window;
    CHECK(attempt(detail::Operation::check, own, limit).first == SQLITE_ROW);
  }
  sqlite3_close(db);
  CHECK(dump(path) == before);
}

}  // namespace
}  // namespace quota::test
