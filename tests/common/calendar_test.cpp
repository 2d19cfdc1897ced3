// Calendar periods (SPEC §9, docs/concepts.md#calendar-periods) on every backend: the window of
// every instant is the reference model's, to the millisecond, across month lengths, leap years,
// offsets and anchors (the limit's and the owner's); blocks, shadow mode, overrides, reset,
// record and the clock rule on a calendar limit; a configuration change keeps the window being
// counted (up to the new unit's longest window); the statements that SQL-only clients run agree
// with the engine; bad input changes nothing.
//
// The model computes windows with <chrono>'s calendar types (year_month_day, weekday,
// year_month_day_last), independently of the engine's integer arithmetic in SQL.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "quota/admin.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

using namespace std::chrono;
using detail::Operation;

// Unix ms of a UTC date and time.
std::int64_t utc(int y, unsigned m, unsigned d, int h = 0, int min = 0, int s = 0, int ms = 0) {
  const sys_time<milliseconds> time = sys_days{year{y} / month{m} / day{d}} + hours{h} +
                                      minutes{min} + seconds{s} + milliseconds{ms};
  return time.time_since_epoch().count();
}

// Unix ms as 2026-11-26T12:00:00.000Z, for the messages of failed checks.
std::string iso(std::int64_t ms) {
  const sys_time<milliseconds> time{milliseconds{ms}};
  const sys_days date = floor<days>(time);
  const year_month_day ymd{date};
  const hh_mm_ss<milliseconds> clock{time - date};
  char text[40];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int{ymd.year()},
                unsigned{ymd.month()}, unsigned{ymd.day()}, static_cast<int>(clock.hours().count()),
                static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()),
                static_cast<int>(clock.subseconds().count()));
  return text;
}

// ---- The reference model ------------------------------------------------------------------

// A window [start, end) in Unix ms.
struct Window {
  std::int64_t start = 0;
  std::int64_t end = 0;
};

// Where in its unit every window starts, in local time: the anchor's month, day of the month,
// weekday and time of day; without an anchor, the unit's own start (1 January, the 1st, Monday,
// midnight).
struct Place {
  month month_of_year = January;
  day day_of_month = day{1};
  weekday day_of_week = Monday;
  milliseconds time_of_day{0};
};

Place place_of(std::optional<std::int64_t> anchor_ms, minutes offset) {
  Place place;
  if (!anchor_ms) return place;
  const sys_time<milliseconds> local = sys_time<milliseconds>{milliseconds{*anchor_ms}} + offset;
  const sys_days date = floor<days>(local);
  const year_month_day ymd{date};
  place.month_of_year = ymd.month();
  place.day_of_month = ymd.day();
  place.day_of_week = weekday{date};
  place.time_of_day = local - date;
  return place;
}

// The day `wanted` of y/m, or the month's last day when the month is shorter.
sys_days clamped(year y, month m, day wanted) {
  const day last = year_month_day_last{y, month_day_last{m}}.day();
  return sys_days{y / m / std::min(wanted, last)};
}

// The window of `unit` that holds the instant t, at `offset`, its windows starting at the
// anchor's place in the unit.
Window model_window(std::int64_t t, Calendar unit, minutes offset,
                    std::optional<std::int64_t> anchor_ms) {
  const Place place = place_of(anchor_ms, offset);
  const sys_time<milliseconds> local = sys_time<milliseconds>{milliseconds{t}} + offset;
  const sys_days today = floor<days>(local);
  const year_month_day date{today};
  sys_time<milliseconds> start;
  sys_time<milliseconds> end;
  switch (unit) {
    case Calendar::day:
      start = today + place.time_of_day;
      if (start > local) start -= days{1};
      end = start + days{1};
      break;
    case Calendar::week:
      start = today - (weekday{today} - place.day_of_week) + place.time_of_day;
      if (start > local) start -= weeks{1};
      end = start + weeks{1};
      break;
    case Calendar::month: {
      auto start_in = [&](year_month ym) {
        return clamped(ym.year(), ym.month(), place.day_of_month) + place.time_of_day;
      };
      year_month ym = date.year() / date.month();
      if (start_in(ym) > local) ym -= months{1};
      start = start_in(ym);
      end = start_in(ym + months{1});
      break;
    }
    case Calendar::year: {
      auto start_in = [&](year y) {
        return clamped(y, place.month_of_year, place.day_of_month) + place.time_of_day;
      };
      year y = date.year();
      if (start_in(y) > local) y -= years{1};
      start = start_in(y);
      end = start_in(y + years{1});
      break;
    }
  }
  return {(start - offset).time_since_epoch().count(), (end - offset).time_since_epoch().count()};
}

TEST_CASE("calendar: the reference model itself, on dates checked by hand", "[calendar]") {
  // Its own sanity, so that a wrong model cannot agree with a wrong engine unnoticed.
  const Window january = model_window(utc(2026, 1, 10), Calendar::month, minutes{0}, {});
  CHECK(january.start == utc(2026, 1, 1));
  CHECK(january.end == utc(2026, 2, 1));
  const std::int64_t on_31st = utc(2026, 1, 31, 10);
  CHECK(model_window(utc(2026, 2, 20), Calendar::month, minutes{0}, on_31st).start ==
        utc(2026, 1, 31, 10));
  CHECK(model_window(utc(2026, 2, 20), Calendar::month, minutes{0}, on_31st).end ==
        utc(2026, 2, 28, 10));
  CHECK(model_window(utc(2024, 2, 20), Calendar::month, minutes{0}, on_31st).end ==
        utc(2024, 2, 29, 10));
  CHECK(model_window(utc(2100, 6, 1), Calendar::year, minutes{0}, utc(2000, 2, 29)).start ==
        utc(2100, 2, 28));
  // 2026-11-26 is a Thursday; at +09:00 midnight is 15:00 UTC the day before.
  CHECK(model_window(utc(2026, 11, 26, 12), Calendar::week, minutes{0}, {}).start ==
        utc(2026, 11, 23));
  CHECK(model_window(utc(2026, 11, 26, 12), Calendar::day, hours{9}, {}).end ==
        utc(2026, 11, 26, 15));
  CHECK(iso(utc(2024, 2, 29, 23, 59, 59, 999)) == "2024-02-29T23:59:59.999Z");
}

// ---- Helpers ------------------------------------------------------------------------------

std::string text_of(const std::optional<std::int64_t>& anchor_ms) {
  return anchor_ms ? iso(*anchor_ms) : "none";
}

// With a limit of maximum 1 and an owner without state: the owner's window that holds t is
// exactly [start, end). A consume at start - 1 falls in the window before (which ends at
// start), one at t in a fresh window, the next at t is denied until end, also at end - 1.
void require_window(EngineOn& f, const std::string& limit, const std::string& owner, std::int64_t t,
                    std::int64_t start, std::int64_t end) {
  CAPTURE(limit, owner, iso(t), iso(start), iso(end));
  REQUIRE(start <= t);
  REQUIRE(t < end);
  f.clock.set(start - 1);
  Result r = f.engine.consume(limit, owner);
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == start);
  f.clock.set(t);
  r = f.engine.consume(limit, owner);
  REQUIRE(r.allowed);
  CHECK(r.remaining == 0);
  CHECK(r.reset_at_ms == end);
  r = f.engine.consume(limit, owner);
  CHECK_FALSE(r.allowed);
  CHECK(r.reason == Reason::rate_limited);
  CHECK(r.retry_after_ms == end - t);
  CHECK(r.reset_at_ms == end);
  f.clock.set(end - 1);
  r = f.engine.consume(limit, owner);
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == 1);
  f.clock.set(end);
  r = f.engine.consume(limit, owner);
  CHECK(r.allowed);
}

// ---- The property test --------------------------------------------------------------------

struct Draw {
  std::mt19937_64 random;
  std::int64_t between(std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  }
};

// An offset from -12:00 to +14:00 in whole minutes, the edges (and -14:00) now and then.
minutes random_offset(Draw& draw) {
  switch (draw.between(0, 7)) {
    case 0:
      return minutes{-12 * 60};
    case 1:
      return minutes{14 * 60};
    case 2:
      return minutes{-14 * 60};
    case 3:
      return minutes{0};
    default:
      return minutes{draw.between(-12 * 60, 14 * 60)};
  }
}

// An anchor (at `offset`) on the 1st, 15th, 29th, 30th or 31st of a month that has it, or on
// 29 February, at a random time of day (midnight now and then); or none.
std::optional<std::int64_t> random_anchor(Draw& draw, minutes offset) {
  const std::int64_t kind = draw.between(0, 6);
  if (kind == 0) return std::nullopt;
  year_month_day date;
  if (kind == 6) {
    date = year{static_cast<int>(2000 + 4 * draw.between(0, 7))} / February / day{29};
  } else {
    const unsigned days_of_month[] = {1, 15, 29, 30, 31};
    const day wanted{days_of_month[kind - 1]};
    do {
      date = year{static_cast<int>(draw.between(1999, 2031))} /
             month{static_cast<unsigned>(draw.between(1, 12))} / wanted;
    } while (!date.ok());
  }
  const milliseconds time_of_day{draw.between(0, 3) == 0 ? 0 : draw.between(0, 86'399'999)};
  return (sys_days{date} + time_of_day - offset).time_since_epoch().count();
}

// An instant from 1999 to 2031, now and then around 2100 (not a leap year).
std::int64_t random_instant(Draw& draw) {
  if (draw.between(0, 15) == 0) return draw.between(utc(2099, 1, 1), utc(2101, 12, 31));
  return draw.between(utc(1999, 1, 1), utc(2031, 12, 31, 23, 59, 59, 999));
}

constexpr Calendar kUnits[] = {Calendar::day, Calendar::week, Calendar::month, Calendar::year};

TEST_CASE("calendar: every window is the reference model's, to the millisecond",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  // Four seeds of 250 windows each (fewer seeds when QUOTA_PROPERTY_SEEDS says so).
  constexpr int kIterations = 250;
  for (int seed = 0; seed < property_seeds(4); ++seed) {
    const std::uint64_t kSeed = 19'2026'11'26 + std::uint64_t(seed);
    Draw draw{std::mt19937_64(kSeed)};
    for (int i = seed * kIterations; i < (seed + 1) * kIterations; ++i) {
      const Calendar unit = kUnits[draw.between(0, 3)];
      const minutes offset = random_offset(draw);
      const std::optional<std::int64_t> limit_anchor = random_anchor(draw, offset);
      // Now and then the owners have an anchor of their own, for the limit or for "*".
      const std::int64_t owner_kind = draw.between(0, 5);
      const std::optional<std::int64_t> owner_anchor =
          owner_kind < 2 ? random_anchor(draw, offset) : std::nullopt;
      const std::optional<std::int64_t> anchor = owner_anchor ? owner_anchor : limit_anchor;
      const std::int64_t maximum = draw.between(1, 3);
      std::int64_t t = random_instant(draw);
      const std::int64_t place = draw.between(0, 7);
      if (place == 0) t = model_window(t, unit, offset, anchor).start;
      if (place == 1) t = model_window(t, unit, offset, anchor).end - 1;
      const Window window = model_window(t, unit, offset, anchor);
      const std::string owner = "o" + std::to_string(i);
      const std::string neighbour = "n" + std::to_string(i);
      CAPTURE(kSeed, i, to_string(unit), offset.count(), text_of(limit_anchor),
              text_of(owner_anchor), owner_kind, maximum, iso(t), iso(window.start),
              iso(window.end));
      REQUIRE(window.start <= t);
      REQUIRE(t < window.end);

      f.engine.define(calendar_limit("cal", maximum, unit, offset, limit_anchor));
      if (owner_anchor) {
        const std::string limit = owner_kind == 0 ? "cal" : "*";
        f.engine.set_anchor({limit, owner, *owner_anchor});
        f.engine.set_anchor({limit, neighbour, *owner_anchor});
      }

      f.clock.set(t);
      for (std::int64_t k = 1; k <= maximum; ++k) {
        const Result r = f.engine.consume("cal", owner);
        REQUIRE(r.allowed);
        REQUIRE(r.remaining == maximum - k);
        REQUIRE(r.reset_at_ms == window.end);
      }
      Result r = f.engine.consume("cal", owner);
      REQUIRE_FALSE(r.allowed);
      REQUIRE(r.reason == Reason::rate_limited);
      REQUIRE(r.retry_after_ms == window.end - t);
      REQUIRE(r.reset_at_ms == window.end);
      const Usage usage = f.engine.owner_usage("cal", owner);
      REQUIRE(usage.used == maximum);
      REQUIRE(usage.denied == 1);
      REQUIRE(usage.reset_at_ms == window.end);

      f.clock.set(window.end - 1);
      r = f.engine.consume("cal", owner);
      REQUIRE_FALSE(r.allowed);
      REQUIRE(r.retry_after_ms == 1);
      f.clock.set(window.end);
      r = f.engine.consume("cal", owner);
      REQUIRE(r.allowed);
      REQUIRE(r.remaining == maximum - 1);
      REQUIRE(r.reset_at_ms == model_window(window.end, unit, offset, anchor).end);

      // The window's first millisecond: the millisecond before belongs to the window before.
      f.clock.set(window.start - 1);
      r = f.engine.consume("cal", neighbour);
      REQUIRE(r.allowed);
      REQUIRE(r.reset_at_ms == window.start);
      f.clock.set(window.start);
      r = f.engine.consume("cal", neighbour);
      REQUIRE(r.allowed);
      REQUIRE(r.remaining == maximum - 1);
      REQUIRE(r.reset_at_ms == window.end);

      if (owner_anchor) {
        REQUIRE(f.engine.remove_anchor(owner_kind == 0 ? "cal" : "*", owner));
        REQUIRE(f.engine.remove_anchor(owner_kind == 0 ? "cal" : "*", neighbour));
      }
    }
  }
}

// ---- Edges by hand ------------------------------------------------------------------------

TEST_CASE("calendar: a month anchored on the 31st across February, April and the new year",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("monthly", 1, Calendar::month, minutes{0}, utc(2026, 1, 31)));
  require_window(f, "monthly", "jan", utc(2026, 2, 15), utc(2026, 1, 31), utc(2026, 2, 28));
  require_window(f, "monthly", "feb", utc(2026, 3, 1), utc(2026, 2, 28), utc(2026, 3, 31));
  require_window(f, "monthly", "leap-jan", utc(2024, 2, 15), utc(2024, 1, 31), utc(2024, 2, 29));
  require_window(f, "monthly", "leap-feb", utc(2024, 3, 10), utc(2024, 2, 29), utc(2024, 3, 31));
  require_window(f, "monthly", "mar", utc(2026, 4, 15), utc(2026, 3, 31), utc(2026, 4, 30));
  require_window(f, "monthly", "apr", utc(2026, 5, 5), utc(2026, 4, 30), utc(2026, 5, 31));
  require_window(f, "monthly", "dec", utc(2026, 12, 31, 12), utc(2026, 12, 31), utc(2027, 1, 31));
  require_window(f, "monthly", "dec-late", utc(2027, 1, 5), utc(2026, 12, 31), utc(2027, 1, 31));
  // Without an anchor, at +09:00: the months of Tokyo.
  f.engine.define(calendar_limit("tokyo", 1, Calendar::month, hours{9}));
  require_window(f, "tokyo", "a", utc(2026, 11, 30, 15), utc(2026, 11, 30, 15),
                 utc(2026, 12, 31, 15));
  require_window(f, "tokyo", "b", utc(2026, 11, 30, 14, 59, 59, 999), utc(2026, 10, 31, 15),
                 utc(2026, 11, 30, 15));
}

TEST_CASE("calendar: a year anchored on 29 February starts on 28 February in other years",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("yearly", 1, Calendar::year, minutes{0}, utc(2024, 2, 29, 12)));
  require_window(f, "yearly", "a", utc(2025, 6, 1), utc(2025, 2, 28, 12), utc(2026, 2, 28, 12));
  require_window(f, "yearly", "b", utc(2027, 12, 1), utc(2027, 2, 28, 12), utc(2028, 2, 29, 12));
  require_window(f, "yearly", "c", utc(2028, 2, 29, 11, 59, 59, 999), utc(2027, 2, 28, 12),
                 utc(2028, 2, 29, 12));
  require_window(f, "yearly", "d", utc(2028, 3, 1), utc(2028, 2, 29, 12), utc(2029, 2, 28, 12));
  // 2100 is not a leap year (divisible by 100, not by 400); 2000 was.
  require_window(f, "yearly", "e", utc(2100, 3, 1), utc(2100, 2, 28, 12), utc(2101, 2, 28, 12));
  require_window(f, "yearly", "f", utc(2000, 3, 1), utc(2000, 2, 29, 12), utc(2001, 2, 28, 12));
  // Without an anchor, a year starts on 1 January.
  f.engine.define(calendar_limit("plain", 1, Calendar::year));
  require_window(f, "plain", "a", utc(2024, 12, 31, 23, 59, 59, 999), utc(2024, 1, 1),
                 utc(2025, 1, 1));
}

TEST_CASE("calendar: a week starts on Monday (ISO 8601) at +14:00 and at -12:00",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  // 2026-11-23 is a Monday. At +14:00 its midnight is 10:00 UTC on Sunday the 22nd.
  f.engine.define(calendar_limit("east", 1, Calendar::week, hours{14}));
  require_window(f, "east", "a", utc(2026, 11, 26, 12), utc(2026, 11, 22, 10),
                 utc(2026, 11, 29, 10));
  require_window(f, "east", "b", utc(2026, 11, 22, 9, 59, 59, 999), utc(2026, 11, 15, 10),
                 utc(2026, 11, 22, 10));
  // At -12:00 it is 12:00 UTC on the Monday itself.
  f.engine.define(calendar_limit("west", 1, Calendar::week, hours{-12}));
  require_window(f, "west", "a", utc(2026, 11, 23, 11), utc(2026, 11, 16, 12),
                 utc(2026, 11, 23, 12));
  require_window(f, "west", "b", utc(2026, 11, 23, 12), utc(2026, 11, 23, 12),
                 utc(2026, 11, 30, 12));
  // A week across the new year: Thursday 2026-12-31 is in the week of Monday 2026-12-28.
  f.engine.define(calendar_limit("utc", 1, Calendar::week));
  require_window(f, "utc", "a", utc(2026, 12, 31, 18), utc(2026, 12, 28), utc(2027, 1, 4));
  // An anchor moves the week's start to its weekday and time: Wednesday 2026-03-18 09:30.
  f.engine.define(
      calendar_limit("wednesday", 1, Calendar::week, minutes{0}, utc(2026, 3, 18, 9, 30)));
  require_window(f, "wednesday", "a", utc(2026, 11, 25, 9, 29), utc(2026, 11, 18, 9, 30),
                 utc(2026, 11, 25, 9, 30));
}

TEST_CASE("calendar: a day starts at the anchor's time of day, at the limit's offset",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  // 2026-03-17T09:30:00Z is 18:30 at +09:00: every day starts at 18:30 there, 09:30 UTC.
  f.engine.define(calendar_limit("daily", 1, Calendar::day, hours{9}, utc(2026, 3, 17, 9, 30)));
  require_window(f, "daily", "a", utc(2026, 11, 26, 9, 29, 59, 999), utc(2026, 11, 25, 9, 30),
                 utc(2026, 11, 26, 9, 30));
  require_window(f, "daily", "b", utc(2026, 11, 26, 9, 30), utc(2026, 11, 26, 9, 30),
                 utc(2026, 11, 27, 9, 30));
  // Without an anchor, a day at +09:00 starts at 15:00 UTC.
  f.engine.define(calendar_limit("tokyo", 1, Calendar::day, hours{9}));
  require_window(f, "tokyo", "a", utc(2026, 11, 26, 12), utc(2026, 11, 25, 15),
                 utc(2026, 11, 26, 15));
  // An instant exactly at a window's start opens that window.
  f.engine.define(calendar_limit("month", 1, Calendar::month));
  require_window(f, "month", "a", utc(2026, 12, 1), utc(2026, 12, 1), utc(2027, 1, 1));
}

// ---- Owners' anchors ----------------------------------------------------------------------

TEST_CASE("calendar: an owner's anchor beats the limit's, and '*' covers every calendar limit",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("m", 1, Calendar::month, minutes{0}, utc(2026, 1, 10)));
  f.engine.define(calendar_limit("d", 1, Calendar::day));
  f.engine.set_anchor({"m", "alice", utc(2025, 6, 17)});
  f.engine.set_anchor({kEveryLimit.data(), "carol", utc(2025, 3, 15, 6)});
  f.engine.set_anchor({kEveryLimit.data(), "dave", utc(2025, 3, 15)});
  f.engine.set_anchor({"m", "dave", utc(2025, 3, 20)});
  CHECK(f.engine.anchors() == std::vector<Anchor>{{"*", "carol", utc(2025, 3, 15, 6)},
                                                  {"*", "dave", utc(2025, 3, 15)},
                                                  {"m", "alice", utc(2025, 6, 17)},
                                                  {"m", "dave", utc(2025, 3, 20)}});
  // With a limit's name, only that limit's anchors; with "*", only "*"'s.
  CHECK(f.engine.anchors("m") ==
        std::vector<Anchor>{{"m", "alice", utc(2025, 6, 17)}, {"m", "dave", utc(2025, 3, 20)}});
  CHECK(f.engine.anchors("*") ==
        std::vector<Anchor>{{"*", "carol", utc(2025, 3, 15, 6)}, {"*", "dave", utc(2025, 3, 15)}});
  CHECK(f.engine.anchors("d").empty());

  const std::int64_t t = utc(2026, 11, 26, 12);
  require_window(f, "m", "bob", t, utc(2026, 11, 10), utc(2026, 12, 10));
  require_window(f, "m", "alice", t, utc(2026, 11, 17), utc(2026, 12, 17));
  require_window(f, "m", "carol", t, utc(2026, 11, 15, 6), utc(2026, 12, 15, 6));
  require_window(f, "m", "dave", t, utc(2026, 11, 20), utc(2026, 12, 20));
  // "*" reaches the daily limit too: carol's days start at 06:00.
  require_window(f, "d", "bob", t, utc(2026, 11, 26), utc(2026, 11, 27));
  require_window(f, "d", "carol", t, utc(2026, 11, 26, 6), utc(2026, 11, 27, 6));
  require_window(f, "d", "alice", t, utc(2026, 11, 26), utc(2026, 11, 27));
  // Setting an anchor again replaces it.
  f.engine.set_anchor({"d", "erin", utc(2025, 1, 1, 8)});
  f.engine.set_anchor({"d", "erin", utc(2025, 1, 1, 20)});
  CHECK(f.engine.anchors("d") == std::vector<Anchor>{{"d", "erin", utc(2025, 1, 1, 20)}});
  require_window(f, "d", "erin", t, utc(2026, 11, 25, 20), utc(2026, 11, 26, 20));
}

TEST_CASE("calendar: removing an owner's anchor brings back the limit's from the next window",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("m", 1, Calendar::month));
  f.engine.set_anchor({"m", "alice", utc(2026, 1, 17)});
  f.clock.set(utc(2026, 11, 20));
  Result r = f.engine.consume("m", "alice");
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == utc(2026, 12, 17));

  CHECK(f.engine.remove_anchor("m", "alice"));
  CHECK_FALSE(f.engine.remove_anchor("m", "alice"));
  CHECK(f.engine.anchors().empty());
  // The window already counting keeps its end...
  f.clock.set(utc(2026, 12, 5));
  r = f.engine.consume("m", "alice");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == utc(2026, 12, 17) - utc(2026, 12, 5));
  CHECK(r.reset_at_ms == utc(2026, 12, 17));
  // ...and the next is the limit's: December, from the 1st.
  f.clock.set(utc(2026, 12, 17));
  r = f.engine.consume("m", "alice");
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == utc(2027, 1, 1));
  r = f.engine.consume("m", "alice");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == utc(2027, 1, 1) - utc(2026, 12, 17));
  require_window(f, "m", "bob", utc(2027, 1, 20), utc(2027, 1, 1), utc(2027, 2, 1));

  // An anchor set while a window counts applies from the owner's next window too.
  f.clock.set(utc(2027, 1, 2));
  REQUIRE(f.engine.consume("m", "carol").allowed);
  f.engine.set_anchor({"*", "carol", utc(2026, 5, 10)});
  f.clock.set(utc(2027, 1, 20));
  r = f.engine.consume("m", "carol");
  CHECK_FALSE(r.allowed);
  CHECK(r.reset_at_ms == utc(2027, 2, 1));
  f.clock.set(utc(2027, 2, 1));
  r = f.engine.consume("m", "carol");
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == utc(2027, 2, 10));
}

// ---- The rest of the engine on a calendar limit -------------------------------------------

TEST_CASE("calendar: a block on a calendar limit waits for the longer of the block and the window",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  Limit limit = calendar_limit("exports", 2, Calendar::day, hours{9});
  limit.block = hours{1};
  f.engine.define(limit);
  // Tokyo's day ends at 15:00 UTC; ten minutes before, the third export is denied and
  // blocks for the hour, longer than the window's wait.
  const std::int64_t t = utc(2026, 11, 26, 14, 50);
  f.clock.set(t);
  REQUIRE(f.engine.consume("exports", "u").allowed);
  REQUIRE(f.engine.consume("exports", "u").allowed);
  Result r = f.engine.consume("exports", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.reason == Reason::rate_limited);
  CHECK(r.retry_after_ms == hours{1} / milliseconds{1});
  // In the next day's window the owner is still blocked until t + 1h.
  f.clock.set(utc(2026, 11, 26, 15));
  r = f.engine.consume("exports", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.reason == Reason::blocked);
  CHECK(r.retry_after_ms == minutes{50} / milliseconds{1});
  CHECK(f.engine.check("exports", "u").reason == Reason::blocked);
  f.clock.set(t + hours{1} / milliseconds{1});
  r = f.engine.consume("exports", "u");
  CHECK(r.allowed);
  CHECK(r.remaining == 1);
  CHECK(r.reset_at_ms == utc(2026, 11, 27, 15));

  // Early in a window, the window's wait is the longer: the denial waits for its end.
  f.clock.set(utc(2026, 11, 27, 15));
  REQUIRE(f.engine.consume("exports", "v").allowed);
  REQUIRE(f.engine.consume("exports", "v").allowed);
  r = f.engine.consume("exports", "v");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == days{1} / milliseconds{1});
  CHECK(r.reset_at_ms == utc(2026, 11, 28, 15));
  f.clock.set(utc(2026, 11, 27, 17));
  r = f.engine.consume("exports", "v");
  CHECK(r.reason == Reason::rate_limited);  // the block is over, the window is not
  CHECK(r.retry_after_ms == hours{22} / milliseconds{1});
  // Reset lifts the block and forgets the window's usage.
  f.clock.set(utc(2026, 11, 28, 15, 30));
  REQUIRE(f.engine.consume("exports", "w").allowed);
  REQUIRE(f.engine.consume("exports", "w").allowed);
  REQUIRE(f.engine.consume("exports", "w").reason == Reason::rate_limited);
  r = f.engine.reset("exports", "w");
  CHECK(r.allowed);
  CHECK(r.remaining == 2);
  r = f.engine.consume("exports", "w");
  CHECK(r.allowed);
  CHECK(r.reset_at_ms == utc(2026, 11, 29, 15));
}

TEST_CASE("calendar: shadow mode, record, overrides and reset count per calendar window",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  Limit shadow = calendar_limit("trial", 1, Calendar::month, hours{-5});
  shadow.shadow = true;
  f.engine.define(shadow);
  // At -05:00, December starts at 05:00 UTC on the 1st.
  const std::int64_t t = utc(2026, 11, 26);
  f.clock.set(t);
  REQUIRE(f.engine.consume("trial", "u").allowed);
  Result r = f.engine.consume("trial", "u");
  CHECK(r.allowed);
  CHECK(r.shadow_denied);
  CHECK(r.reason == Reason::rate_limited);
  CHECK(r.retry_after_ms == utc(2026, 12, 1, 5) - t);
  CHECK(r.reset_at_ms == utc(2026, 12, 1, 5));
  CHECK(f.engine.owner_usage("trial", "u").shadow_denied == 1);
  CHECK(f.engine.owner_usage("trial", "u").used == 1);  // the would-be denial recorded nothing

  f.engine.define(calendar_limit("quota", 2, Calendar::month, hours{-5}));
  r = f.engine.record("quota", "u", 3);
  CHECK_FALSE(r.allowed);  // beyond the limit, recorded all the same
  CHECK(r.reset_at_ms == utc(2026, 12, 1, 5));
  CHECK(f.engine.owner_usage("quota", "u").used == 3);
  r = f.engine.consume("quota", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == utc(2026, 12, 1, 5) - t);
  f.clock.set(utc(2026, 12, 1, 5));
  r = f.engine.consume("quota", "u", 2);
  CHECK(r.allowed);  // a new month: the record stayed in November's
  CHECK(r.remaining == 0);
  CHECK(r.reset_at_ms == utc(2027, 1, 1, 5));
  // An owner's override of the maximum counts in the same calendar windows.
  f.engine.set_override({"quota", "big", Policy::maximum, 4, std::nullopt});
  r = f.engine.consume("quota", "big", 4);
  CHECK(r.allowed);
  CHECK(r.reset_at_ms == utc(2027, 1, 1, 5));
  r = f.engine.consume("quota", "big");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == utc(2027, 1, 1, 5) - utc(2026, 12, 1, 5));
  r = f.engine.reset("quota", "u");
  CHECK(r.remaining == 2);
  CHECK(r.reset_at_ms == utc(2026, 12, 1, 5));  // reset answers the request's time
  CHECK(f.engine.consume("quota", "u", 2).allowed);
}

TEST_CASE("calendar: an earlier time after a later one is evaluated at the later (clock rule)",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("m", 1, Calendar::month));
  f.clock.set(utc(2026, 12, 1, 1));
  Result r = f.engine.consume("m", "u");
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == utc(2027, 1, 1));
  // A host whose clock is behind, still in November: evaluated in December, at 01:00, and
  // told the wait from its own time (docs/concepts.md): until January by its clock.
  f.clock.set(utc(2026, 11, 30, 23));
  r = f.engine.consume("m", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == utc(2027, 1, 1) - utc(2026, 11, 30, 23));
  CHECK(r.reset_at_ms == utc(2027, 1, 1));
  r = f.engine.check("m", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == utc(2027, 1, 1) - utc(2026, 11, 30, 23));
}

TEST_CASE("calendar: a configuration change keeps the window being counted, up to the new unit",
          "[calendar][backends]") {
  // The rule (migrations/0008_calendar_periods.sql): an owner's window keeps its end while what
  // remains of it is no longer than the new unit's longest window; else it ends at once.
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("c", 1, Calendar::month));
  f.clock.set(utc(2026, 11, 26, 12));
  REQUIRE(f.engine.consume("c", "u").allowed);
  REQUIRE(f.engine.consume("c", "v").allowed);
  REQUIRE(f.engine.consume("c", "w").allowed);

  // A day at +09:00 now. u's November has more than a day left: it ends at once, and u counts
  // in Tokyo's day (28 November 21:00 there; the day ends at 15:00 UTC).
  f.engine.define(calendar_limit("c", 1, Calendar::day, hours{9}));
  f.clock.set(utc(2026, 11, 28, 12));
  Result r = f.engine.consume("c", "u");
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == utc(2026, 11, 28, 15));
  r = f.engine.consume("c", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == hours{3} / milliseconds{1});
  // w's November, with less than a day left, keeps its end (past Tokyo's midnight).
  f.clock.set(utc(2026, 11, 30, 12));
  r = f.engine.consume("c", "w");
  CHECK_FALSE(r.allowed);
  CHECK(r.retry_after_ms == hours{12} / milliseconds{1});
  CHECK(r.reset_at_ms == utc(2026, 12, 1));
  f.clock.set(utc(2026, 12, 1));
  r = f.engine.consume("c", "w");
  REQUIRE(r.allowed);
  CHECK(r.reset_at_ms == utc(2026, 12, 1, 15));  // 1 December 00:00 UTC is 09:00 in Tokyo
  // An owner without state gets the new configuration at once.
  require_window(f, "c", "x", utc(2026, 12, 3, 16), utc(2026, 12, 3, 15), utc(2026, 12, 4, 15));

  // A longer unit (a week at +09:00): u's day keeps its end, then u counts in weeks.
  f.engine.define(calendar_limit("c", 1, Calendar::week, hours{9}));
  f.clock.set(utc(2026, 11, 28, 13));
  r = f.engine.consume("c", "u");
  CHECK_FALSE(r.allowed);
  CHECK(r.reset_at_ms == utc(2026, 11, 28, 15));
  f.clock.set(utc(2026, 11, 28, 15));
  r = f.engine.consume("c", "u");
  REQUIRE(r.allowed);
  // Sunday 29 November 00:00 in Tokyo: the week of Monday the 23rd, until Monday the 30th.
  CHECK(r.reset_at_ms == utc(2026, 11, 29, 15));

  // A new anchor and offset: v's window (still November's) ends as it would have.
  f.engine.define(calendar_limit("c", 1, Calendar::month, hours{-3}, utc(2026, 1, 20, 3)));
  f.clock.set(utc(2026, 11, 30, 23));
  r = f.engine.consume("c", "v");
  CHECK_FALSE(r.allowed);
  CHECK(r.reset_at_ms == utc(2026, 12, 1));
  f.clock.set(utc(2026, 12, 1));
  r = f.engine.consume("c", "v");
  REQUIRE(r.allowed);
  // At -03:00 the anchor is 00:00 on the 20th, 03:00 UTC.
  CHECK(r.reset_at_ms == utc(2026, 12, 20, 3));
  // A new maximum alone keeps the window too.
  f.engine.define(calendar_limit("c", 2, Calendar::month, hours{-3}, utc(2026, 1, 20, 3)));
  r = f.engine.consume("c", "v");
  CHECK(r.allowed);
  CHECK(r.remaining == 0);
  CHECK(r.reset_at_ms == utc(2026, 12, 20, 3));
}

TEST_CASE("calendar: turning a calendar on starts afresh, turning it off keeps the count",
          "[calendar][backends]") {
  // The rule of migrations/0008_calendar_periods.sql: a row counted in windows of period_ms
  // has no window end to keep, so a calendar starts it from zero; a calendar row read under a
  // period in ms belongs to the window that holds the owner's latest moment, as after any
  // change of period.
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(make_limit("e", Algorithm::fixed_window, 5, 86'400'000));
  f.clock.set(utc(2026, 11, 26, 12));
  REQUIRE(f.engine.consume("e", "u", 2).allowed);
  f.engine.define(calendar_limit("e", 5, Calendar::month));
  f.clock.set(utc(2026, 11, 26, 13));
  Result r = f.engine.consume("e", "u");
  CHECK(r.remaining == 4);
  CHECK(r.reset_at_ms == utc(2026, 12, 1));
  f.engine.define(make_limit("e", Algorithm::fixed_window, 5, 86'400'000));
  f.clock.set(utc(2026, 11, 26, 14));
  r = f.engine.consume("e", "u");
  CHECK(r.remaining == 3);
  CHECK(r.reset_at_ms == utc(2026, 11, 27));
  // Owners' anchors of a limit that is no longer a calendar limit are ignored (and kept).
  f.engine.define(calendar_limit("one", 1, Calendar::day));
  f.engine.set_anchor({"one", "v", utc(2026, 1, 15, 6)});
  f.engine.set_anchor({"*", "v", utc(2026, 1, 15, 7)});
  f.engine.define(make_limit("one", Algorithm::fixed_window, 1, 86'400'000));
  require_window(f, "one", "v", utc(2026, 11, 26, 15), utc(2026, 11, 26), utc(2026, 11, 27));
  CHECK(f.engine.anchors().size() == 2);
}

// ---- SQL-only clients ---------------------------------------------------------------------

TEST_CASE("calendar: the statements that SQL-only clients run give the engine's answers",
          "[calendar][sql][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  // The text quota::admin gives for a calendar limit (and `quotactl sql consume NAME`
  // prints) is what the client runs: the calendar windows' statements (src/statements.h).
  const admin::Dialect dialect =
      f.database.backend() == Backend::sqlite ? admin::Dialect::sqlite : admin::Dialect::postgresql;
  const detail::Dialect& spelling =
      f.database.backend() == Backend::sqlite ? detail::kSqlite : detail::kPostgresql;
  for (const Operation operation : {Operation::check, Operation::consume, Operation::record,
                                    Operation::reset, Operation::refund}) {
    CHECK(admin::statement(dialect, detail::operation_name(operation), Algorithm::fixed_window,
                           true) ==
          detail::statement(spelling, operation, detail::StatementKind::calendar_window));
  }

  struct Case {
    Limit limit;
    std::optional<std::int64_t> owner_anchor;
  };
  const std::vector<Case> cases = {
      {calendar_limit("m31", 3, Calendar::month, hours{9}, utc(2024, 1, 31, 1)), std::nullopt},
      {calendar_limit("y29", 2, Calendar::year, hours{-5}, utc(2024, 2, 29, 20)), std::nullopt},
      {calendar_limit("wk", 2, Calendar::week, hours{14}), std::nullopt},
      {calendar_limit("dy", 4, Calendar::day, minutes{-12 * 60}), utc(2025, 7, 4, 17, 45)},
      {calendar_limit("mo", 2, Calendar::month, minutes{330}), utc(2024, 3, 30, 12)},
  };
  Draw draw{std::mt19937_64(7)};
  for (const Case& c : cases) {
    f.engine.define(c.limit);
    if (c.owner_anchor) {
      f.engine.set_anchor({c.limit.name, "engine", *c.owner_anchor});
      f.engine.set_anchor({c.limit.name, "sql", *c.owner_anchor});
    }
    const std::optional<std::int64_t> anchor = c.owner_anchor ? c.owner_anchor : c.limit.anchor_ms;
    std::int64_t now = utc(2023, 12, 20);
    for (int step = 0; step < 80; ++step) {
      // Mostly forward (by up to a few weeks, or to a window's edge), now and then back.
      const std::int64_t move = draw.between(0, 9);
      const Window window = model_window(now, *c.limit.calendar, c.limit.utc_offset, anchor);
      if (move < 5) now += draw.between(0, 9 * 86'400'000);
      if (move == 5) now = window.end - 1;
      if (move == 6) now = window.end;
      if (move == 7) now -= draw.between(1, 3 * 86'400'000);
      const auto operation = static_cast<Operation>(draw.between(0, 9) < 8 ? draw.between(0, 2)
                                                    : draw.between(0, 1)   ? 3
                                                                           : 4);
      const std::int64_t cost = draw.between(1, 2);
      CAPTURE(c.limit.name, step, iso(now), detail::operation_name(operation), cost);
      f.clock.set(now);
      Result by_engine;
      switch (operation) {
        case Operation::check:
          by_engine = f.engine.check(c.limit.name, "engine", cost);
          break;
        case Operation::consume:
          by_engine = f.engine.consume(c.limit.name, "engine", cost);
          break;
        case Operation::record:
          by_engine = f.engine.record(c.limit.name, "engine", cost);
          break;
        case Operation::reset:
          by_engine = f.engine.reset(c.limit.name, "engine");
          break;
        case Operation::refund:
          by_engine = f.engine.refund(c.limit.name, "engine", cost);
          break;
      }
      const Result by_sql =
          f.raw.run(operation, detail::StatementKind::calendar_window, c.limit.name, "sql", cost, now);
      REQUIRE(by_sql == by_engine);
      // And the two owners' states agree as a check sees them.
      REQUIRE(f.raw.run(Operation::check, detail::StatementKind::calendar_window, c.limit.name, "engine", 1,
                        now) == f.engine.check(c.limit.name, "sql", 1));
    }
  }
}

// ---- Bad input ----------------------------------------------------------------------------

// `call` throws quota::Error with `code` and a message, and changes nothing.
void require_refused(EngineOn& f, ErrorCode code, const std::function<void()>& call) {
  const std::vector<Limit> limits = f.engine.list();
  const std::vector<Anchor> anchors = f.engine.anchors();
  const std::string dump = f.database.dump();
  std::optional<Error> error;
  try {
    call();
  } catch (const Error& thrown) {
    error = thrown;
  }
  REQUIRE(error.has_value());
  INFO(error->what());
  CHECK(error->code() == code);
  CHECK_FALSE(std::string(error->what()).empty());
  CHECK(f.engine.list() == limits);
  CHECK(f.engine.anchors() == anchors);
  CHECK(f.database.dump() == dump);
}

TEST_CASE("calendar: bad calendar settings are refused with a reason, changing nothing",
          "[slow][calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(calendar_limit("cal", 5, Calendar::month, hours{2}, utc(2026, 1, 31)));
  f.engine.define(make_limit("plain", Algorithm::fixed_window, 5, 60'000));
  f.engine.set_anchor({"cal", "alice", utc(2026, 3, 15)});
  f.clock.set(utc(2026, 11, 26));
  REQUIRE(f.engine.consume("cal", "alice").allowed);

  // Each refused as a new limit and as a redefinition of "cal" alike.
  for (const char* name : {"new", "cal"}) {
    CAPTURE(name);
    for (const Algorithm algorithm :
         {Algorithm::sliding_log, Algorithm::sliding_window, Algorithm::token_bucket}) {
      CAPTURE(algorithm);
      Limit limit = calendar_limit(name, 5, Calendar::day);
      limit.algorithm = algorithm;
      require_refused(f, ErrorCode::invalid_argument, [&] { f.engine.define(limit); });
      CHECK_THROWS_AS(validate_limit(limit), Error);
    }
    Limit offset_alone = make_limit(name, Algorithm::fixed_window, 5, 86'400'000);
    offset_alone.utc_offset = hours{9};
    require_refused(f, ErrorCode::invalid_argument, [&] { f.engine.define(offset_alone); });
    Limit anchor_alone = make_limit(name, Algorithm::fixed_window, 5, 86'400'000);
    anchor_alone.anchor_ms = utc(2026, 1, 1);
    require_refused(f, ErrorCode::invalid_argument, [&] { f.engine.define(anchor_alone); });
    for (const minutes offset : {minutes{15 * 60}, minutes{-14 * 60 - 1}, minutes{14 * 60 + 1}}) {
      CAPTURE(offset.count());
      require_refused(f, ErrorCode::invalid_argument,
                      [&] { f.engine.define(calendar_limit(name, 5, Calendar::week, offset)); });
    }
    for (const std::int64_t anchor : {std::int64_t{-1}, kAnchorBound + 1}) {
      CAPTURE(anchor);
      require_refused(f, ErrorCode::invalid_argument, [&] {
        f.engine.define(calendar_limit(name, 5, Calendar::year, minutes{0}, anchor));
      });
    }
    for (const Calendar unit : kUnits) {
      CAPTURE(to_string(unit));
      for (const milliseconds period : {longest_window(unit) - milliseconds{1},
                                        longest_window(unit) + milliseconds{1}, milliseconds{1}}) {
        Limit limit = calendar_limit(name, 5, unit);
        limit.period = period;
        require_refused(f, ErrorCode::invalid_argument, [&] { f.engine.define(limit); });
      }
    }
  }

  require_refused(f, ErrorCode::invalid_argument, [&] {
    f.engine.set_anchor({"plain", "alice", utc(2026, 1, 1)});
  });
  require_refused(f, ErrorCode::unknown_limit, [&] {
    f.engine.set_anchor({"missing", "alice", utc(2026, 1, 1)});
  });
  require_refused(f, ErrorCode::invalid_argument, [&] {
    f.engine.set_anchor({"cal", "", utc(2026, 1, 1)});
  });
  require_refused(f, ErrorCode::invalid_argument, [&] {
    f.engine.set_anchor({"cal", std::string(kOwnerBound + 1, 'x'), utc(2026, 1, 1)});
  });
  require_refused(f, ErrorCode::invalid_argument, [&] {
    f.engine.set_anchor({"cal", std::string("a\0b", 3), utc(2026, 1, 1)});
  });
  require_refused(f, ErrorCode::invalid_argument, [&] {
    f.engine.set_anchor({"bad name!", "alice", utc(2026, 1, 1)});
  });
  for (const std::int64_t anchor : {std::int64_t{-1}, kAnchorBound + 1}) {
    CAPTURE(anchor);
    require_refused(f, ErrorCode::invalid_argument, [&] {
      f.engine.set_anchor({"cal", "alice", anchor});
    });
    require_refused(f, ErrorCode::invalid_argument, [&] {
      f.engine.set_anchor({"*", "bob", anchor});
    });
  }

  // What the refusals left alone still works as before.
  Result r = f.engine.consume("cal", "alice");
  CHECK(r.allowed);
  CHECK(r.remaining == 3);
  CHECK(r.reset_at_ms == utc(2026, 12, 15));  // the 15th at 02:00 at +02:00
}

TEST_CASE("calendar: the bounds themselves are accepted, and a calendar limit reads back",
          "[calendar][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  for (const Calendar unit : kUnits) {
    CHECK(calendar_limit("x", 1, unit).period == longest_window(unit));
    CHECK(calendar_limit("x", 1, unit).algorithm == Algorithm::fixed_window);
    CHECK(parse_calendar(to_string(unit)) == unit);
  }
  CHECK(longest_window(Calendar::day) == days{1});
  CHECK(longest_window(Calendar::week) == days{7});
  CHECK(longest_window(Calendar::month) == days{31});
  CHECK(longest_window(Calendar::year) == days{366});
  CHECK_FALSE(parse_calendar("fortnight").has_value());

  const std::vector<Limit> limits = {
      calendar_limit("east", 1, Calendar::day, kUtcOffsetBound, 0),
      calendar_limit("last", 1, Calendar::year, minutes{0}, kAnchorBound),
      calendar_limit("west", 1, Calendar::week, -kUtcOffsetBound, utc(2026, 3, 18, 9, 30)),
  };
  for (const Limit& limit : limits) f.engine.define(limit);
  CHECK(f.engine.list() == limits);
  CHECK(f.engine.get("west") == limits[2]);
  f.engine.set_anchor({"east", "a", 0});
  f.engine.set_anchor({"*", "a", kAnchorBound});
  CHECK(f.engine.anchors() == std::vector<Anchor>{{"*", "a", kAnchorBound}, {"east", "a", 0}});
  // Removing a limit removes its owners' anchors ("*"'s stay).
  CHECK(f.engine.remove("east"));
  CHECK(f.engine.anchors() == std::vector<Anchor>{{"*", "a", kAnchorBound}});
}

}  // namespace
}  // namespace quota::test
