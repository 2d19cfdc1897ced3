// quotactl and calendar periods (SPEC §9): `limit set --per month --utc-offset --anchor`, the
// limits' JSON and lines, the operations' reset times at the limit's offset, owners' anchors
// (`override set --anchor`, `override rm`, `override list`), and the refusal of every bad
// input before the database is opened. The values' parsing and formatting are tested first,
// on their own.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.h"
#include "quota/error.h"
#include "support.h"
#include "support/quotactl_run.h"
#include "text.h"

namespace {

using nlohmann::json;
using quota::test::dump;
using quota::test::QuotactlRun;
using quota::test::read_file;
using quota::test::run_quotactl;
using quota::test::TempDir;
using std::chrono::minutes;

// 2026-11-20T03:00:00Z: 12:00 on 20 November at +09:00.
constexpr std::int64_t kNovember20 = 1'795'143'600'000;
// 2026-12-01T00:00:00+09:00, the next month's start at +09:00 from kNovember20.
constexpr std::int64_t kDecember1 = 1'796'050'800'000;
// 2026-03-17T09:30:00+09:00 (a Tuesday).
constexpr std::int64_t kMarch17 = 1'773'707'400'000;

// A scratch database file and quotactl runs against it at a clock the test sets.
struct Fixture {
  TempDir dir;
  std::string db = dir.file("quota.db");
  std::int64_t now = kNovember20;

  Fixture() { ok({"migrate"}); }

  QuotactlRun ctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--db", db, "--now", std::to_string(now)});
    return run_quotactl(args);
  }
  json ok(std::vector<std::string> args) const {
    args.push_back("--json");
    const QuotactlRun outcome = ctl(args);
    INFO(outcome.err);
    REQUIRE(outcome.status == 0);
    REQUIRE(outcome.err.empty());
    return outcome.document();
  }
  // The one line a command prints (exit `status`).
  std::string line(const std::vector<std::string>& args, int status = 0) const {
    const QuotactlRun outcome = ctl(args);
    INFO(outcome.err);
    CHECK(outcome.status == status);
    CHECK(outcome.err.empty());
    return outcome.out;
  }
};

}  // namespace

// --- the values -----------------------------------------------------------------------------

TEST_CASE("quotactl --per: a DURATION or a calendar unit, each refusal listing the forms",
          "[quotactl][calendar]") {
  using quotactl::parse_period;
  CHECK(parse_period("month", "--per").calendar == quota::Calendar::month);
  CHECK(parse_period("day", "--per").calendar == quota::Calendar::day);
  CHECK(parse_period("week", "--per").calendar == quota::Calendar::week);
  CHECK(parse_period("year", "--per").calendar == quota::Calendar::year);
  const quotactl::Period one_day = parse_period("1d", "--per");
  CHECK_FALSE(one_day.calendar);
  CHECK(one_day.duration == std::chrono::hours{24});

  const std::string forms =
      "use a DURATION, a whole number and a unit ms, s, m (or min), h, d or w (500ms, 30s, 1m, "
      "1h, 1d, 1w; several from the largest down, 1h30m; at most 366d), or a calendar unit "
      "without a number: day, week, month or year";
  CHECK_THROWS_WITH(parse_period("fortnight", "--per"),
                    "invalid period 'fortnight' for --per: " + forms);
  CHECK_THROWS_WITH(parse_period("10y", "--per"), "invalid period '10y' for --per: " + forms);
  CHECK_THROWS_WITH(parse_period("", "--per"), "invalid period '' for --per: " + forms);
  CHECK_THROWS_WITH(parse_period("monthly", "--per"),
                    "invalid period 'monthly' for --per (did you mean 'month'?): " + forms);
  CHECK_THROWS_WITH(parse_period("Day", "--per"),
                    "invalid period 'Day' for --per (did you mean 'day'?): " + forms);
  CHECK_THROWS_WITH(parse_period("1month", "--per"),
                    "invalid period '1month' for --per: a calendar unit is written without a "
                    "number (--per month); a DURATION's units are ms, s, m (or min), h, d and w");
  CHECK_THROWS_WITH(parse_period("367d", "--per"), Catch::Contains("the longest duration is 366d"));
  CHECK_THROWS_WITH(parse_period("0s", "--per"), Catch::Contains("a duration is at least 1ms"));
}

TEST_CASE("quotactl --utc-offset: +HH:MM or -HH:MM within 14 hours", "[quotactl][calendar]") {
  using quotactl::parse_utc_offset;
  CHECK(parse_utc_offset("+09:00", "--utc-offset") == minutes{540});
  CHECK(parse_utc_offset("-05:30", "--utc-offset") == minutes{-330});
  CHECK(parse_utc_offset("+00:00", "--utc-offset") == minutes{0});
  CHECK(parse_utc_offset("-00:00", "--utc-offset") == minutes{0});
  CHECK(parse_utc_offset("+14:00", "--utc-offset") == quota::kUtcOffsetBound);
  CHECK(parse_utc_offset("-14:00", "--utc-offset") == -quota::kUtcOffsetBound);
  for (const char* beyond : {"+15:00", "+14:01", "-14:30", "+99:59"}) {
    CHECK_THROWS_WITH(parse_utc_offset(beyond, "--utc-offset"),
                      std::string("invalid UTC offset '") + beyond +
                          "' for --utc-offset: offsets go from -14:00 to +14:00");
  }
  for (const char* malformed :
       {"Z", "09:00", "+9:00", "+0900", "+09", "+05:60", "+05:30:00", "", "UTC+09:00", " +09:00"}) {
    CHECK_THROWS_WITH(parse_utc_offset(malformed, "--utc-offset"),
                      std::string("invalid UTC offset '") + malformed +
                          "' for --utc-offset: use +HH:MM or -HH:MM, from -14:00 to +14:00 "
                          "(+09:00, -05:30; +00:00 for UTC)");
  }
  CHECK(quotactl::format_utc_offset(minutes{540}) == "+09:00");
  CHECK(quotactl::format_utc_offset(minutes{-330}) == "-05:30");
  CHECK(quotactl::format_utc_offset(minutes{0}) == "+00:00");
}

TEST_CASE("quotactl --anchor: an ISO-8601 instant with its offset, 1970 to 9999",
          "[quotactl][calendar]") {
  using quotactl::parse_instant;
  CHECK(parse_instant("2026-03-17T09:30:00Z", "--anchor") == 1'773'739'800'000);
  CHECK(parse_instant("2026-03-17T09:30:00.250Z", "--anchor") == 1'773'739'800'250);
  CHECK(parse_instant("2026-03-17T09:30:00.25Z", "--anchor") == 1'773'739'800'250);
  CHECK(parse_instant("2026-03-17T09:30:00.2Z", "--anchor") == 1'773'739'800'200);
  CHECK(parse_instant("2026-03-17T09:30:00+09:00", "--anchor") == kMarch17);
  CHECK(parse_instant("2026-03-17T00:30:00+00:00", "--anchor") == kMarch17);
  CHECK(parse_instant("2026-03-16T19:30:00-05:00", "--anchor") == kMarch17);
  CHECK(parse_instant("1970-01-01T00:00:00Z", "--anchor") == 0);
  CHECK(parse_instant("9999-12-31T23:59:59.999Z", "--anchor") == quota::kAnchorBound - 1);
  CHECK(parse_instant("2024-02-29T12:00:00Z", "--anchor") == 1'709'208'000'000);

  const auto refusal = [](const std::string& text, const std::string& why) {
    return "invalid instant '" + text + "' for --anchor: " + why;
  };
  const std::string form =
      "use an ISO-8601 instant, a date, T, a time and Z or an offset: 2026-03-17T09:30:00Z, "
      "2026-03-17T09:30:00.250Z or 2026-03-17T09:30:00+09:00";
  CHECK_THROWS_WITH(parse_instant("2026-03-17", "--anchor"),
                    refusal("2026-03-17",
                            "a date alone is not an instant; give its time and offset too, e.g. "
                            "2026-03-17T00:00:00Z or 2026-03-17T00:00:00+09:00"));
  CHECK_THROWS_WITH(parse_instant("2026-03-17T09:30:00", "--anchor"),
                    refusal("2026-03-17T09:30:00",
                            "an instant needs its offset: add Z for UTC or +HH:MM / -HH:MM, e.g. "
                            "2026-03-17T09:30:00Z"));
  for (const char* malformed :
       {"", "yesterday", "1773739800000", "2026-03-17T09:30Z", "2026-03-17 09:30:00Z",
        "2026-03-17t09:30:00z", "26-03-17T09:30:00Z", "2026-3-17T09:30:00Z",
        "2026-03-17T09:30:00 Z", "2026-03-17T09:30:00+0900", "2026-03-17T09:30:00Z+09:00",
        "+2026-03-17T09:30:00Z", "2026-03-17T09:30:00UTC"}) {
    CHECK_THROWS_WITH(parse_instant(malformed, "--anchor"), refusal(malformed, form));
  }
  CHECK_THROWS_WITH(parse_instant("2026-03-17T09:30:00.2500Z", "--anchor"),
                    refusal("2026-03-17T09:30:00.2500Z",
                            "the fraction of a second is 1 to 3 digits (milliseconds), e.g. .250"));
  CHECK_THROWS_WITH(parse_instant("2026-03-17T09:30:00.Z", "--anchor"),
                    refusal("2026-03-17T09:30:00.Z",
                            "the fraction of a second is 1 to 3 digits (milliseconds), e.g. .250"));
  CHECK_THROWS_WITH(parse_instant("2026-02-29T00:00:00Z", "--anchor"),
                    refusal("2026-02-29T00:00:00Z", "2026-02-29 is not a date"));
  CHECK_THROWS_WITH(parse_instant("2026-13-01T00:00:00Z", "--anchor"),
                    refusal("2026-13-01T00:00:00Z", "2026-13-01 is not a date"));
  CHECK_THROWS_WITH(
      parse_instant("2026-03-17T24:00:00Z", "--anchor"),
      refusal("2026-03-17T24:00:00Z", "24:00:00 is not a time of day (00:00:00 to 23:59:59)"));
  CHECK_THROWS_WITH(
      parse_instant("2026-03-17T09:30:60Z", "--anchor"),
      refusal("2026-03-17T09:30:60Z", "09:30:60 is not a time of day (00:00:00 to 23:59:59)"));
  CHECK_THROWS_WITH(parse_instant("2026-03-17T09:30:00+15:00", "--anchor"),
                    refusal("2026-03-17T09:30:00+15:00", "offsets go from -14:00 to +14:00"));
  const std::string range = "an instant goes from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z";
  for (const char* outside : {"1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00+00:01",
                              "9999-12-31T23:00:00-01:00", "0000-01-01T00:00:00Z"}) {
    CHECK_THROWS_WITH(parse_instant(outside, "--anchor"), refusal(outside, range));
  }
}

TEST_CASE("quotactl shows instants and window starts at a calendar's offset",
          "[quotactl][calendar]") {
  using quotactl::describe_window_start;
  using quotactl::format_local_time;
  CHECK(format_local_time(kDecember1, minutes{540}) == "2026-12-01 00:00 +09:00");
  CHECK(format_local_time(kDecember1, minutes{0}) == "2026-11-30 15:00 +00:00");
  CHECK(format_local_time(kDecember1 + 30'000, minutes{-300}) == "2026-11-30 10:00:30 -05:00");
  CHECK(format_local_time(kDecember1 + 250, minutes{540}) == "2026-12-01 00:00:00.250 +09:00");
  CHECK(format_local_time(0, minutes{-330}) == "1969-12-31 18:30 -05:30");

  using quota::Calendar;
  CHECK(describe_window_start(Calendar::day, minutes{0}, std::nullopt) == "00:00 UTC");
  CHECK(describe_window_start(Calendar::day, minutes{-330}, std::nullopt) == "00:00 UTC-05:30");
  CHECK(describe_window_start(Calendar::week, minutes{0}, std::nullopt) == "Monday 00:00 UTC");
  CHECK(describe_window_start(Calendar::month, minutes{0}, std::nullopt) == "the 1st 00:00 UTC");
  CHECK(describe_window_start(Calendar::year, minutes{0}, std::nullopt) == "1 January 00:00 UTC");
  // An anchor's place, at the offset: 2026-03-17T09:30:00+09:00 is a Tuesday.
  CHECK(describe_window_start(Calendar::day, minutes{540}, kMarch17) == "09:30 UTC+09:00");
  CHECK(describe_window_start(Calendar::week, minutes{540}, kMarch17) == "Tuesday 09:30 UTC+09:00");
  CHECK(describe_window_start(Calendar::month, minutes{540}, kMarch17) ==
        "the 17th 09:30 UTC+09:00");
  CHECK(describe_window_start(Calendar::year, minutes{540}, kMarch17) ==
        "17 March 09:30 UTC+09:00");
  // The same instant at UTC is 00:30 on the 17th.
  CHECK(describe_window_start(Calendar::month, minutes{0}, kMarch17) == "the 17th 00:30 UTC");
  CHECK(describe_window_start(Calendar::day, minutes{0}, 1'773'739'800'250) == "09:30:00.250 UTC");
  // Days that some months (or years) lack.
  const std::int64_t day = 86'400'000;
  const std::int64_t january1 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
  CHECK(describe_window_start(Calendar::month, minutes{0}, january1 + 28 * day) ==
        "the 29th 00:00 UTC or the month's last day");
  CHECK(describe_window_start(Calendar::month, minutes{0}, january1 + 30 * day) ==
        "the 31st 00:00 UTC or the month's last day");
  CHECK(describe_window_start(Calendar::year, minutes{0}, 1'709'208'000'000) ==
        "29 February 12:00 UTC or 28 February");
  const std::vector<std::pair<int, std::string>> ordinals{
      {1, "1st"},   {2, "2nd"},   {3, "3rd"},   {4, "4th"},   {11, "11th"},
      {12, "12th"}, {13, "13th"}, {21, "21st"}, {22, "22nd"}, {23, "23rd"}};
  for (const auto& [day_of_month, ordinal] : ordinals) {
    CHECK(describe_window_start(Calendar::month, minutes{0}, january1 + (day_of_month - 1) * day) ==
          "the " + ordinal + " 00:00 UTC");
  }

  quota::Limit plan = quota::calendar_limit("plan", 10000, Calendar::month, minutes{540}, kMarch17);
  CHECK(quotactl::describe_limit(plan) ==
        "10000 per month (fixed_window, from the 17th 09:30 UTC+09:00)");
  CHECK(quotactl::format_limit_period(plan) == "month");
  plan.block = std::chrono::hours{1};
  CHECK(quotactl::describe_limit(plan) ==
        "10000 per month (fixed_window, from the 17th 09:30 UTC+09:00, blocks for 1h after a "
        "denial)");
}

// --- limit set, get, list -------------------------------------------------------------------

TEST_CASE("quotactl limit set --per month: a calendar fixed_window limit", "[quotactl][calendar]") {
  Fixture f;
  const json plan = f.ok({"limit", "set", "plan", "--max", "3", "--per", "month", "--utc-offset",
                          "+09:00", "--anchor", "2026-03-17T09:30:00+09:00"});
  CHECK(plan == json{{"name", "plan"},
                     {"algorithm", "fixed_window"},
                     {"maximum", 3},
                     {"period_ms", nullptr},
                     {"period", "month"},
                     {"utc_offset", "+09:00"},
                     {"anchor_ms", kMarch17},
                     {"burst", nullptr},
                     {"shadow", false},
                     {"block_ms", nullptr}});
  CHECK(f.ok({"limit", "get", "plan"}) == plan);
  CHECK(f.line({"limit", "get", "plan"}) ==
        "plan: 3 per month (fixed_window, from the 17th 09:30 UTC+09:00)\n");

  SECTION("a DURATION keeps its meaning; the JSON says there is no calendar") {
    const json daily = f.ok({"limit", "set", "daily", "--max", "5", "--per", "1d"});
    CHECK(daily["period_ms"] == 86'400'000);
    CHECK(daily["period"].is_null());
    CHECK(daily["utc_offset"].is_null());
    CHECK(daily["anchor_ms"].is_null());
    CHECK(daily["algorithm"] == "sliding_log");
    CHECK(f.ok({"limit", "list"}) == json::array({daily, plan}));
    CHECK(f.line({"limit", "list"}) ==
          "NAME   ALGORITHM     MAXIMUM  PER    BURST  BLOCK  MODE     STARTS\n"
          "daily  sliding_log         5  1d         -  -      enforce  -\n"
          "plan   fixed_window        3  month      -  -      enforce  the 17th 09:30 UTC+09:00\n");
  }
  SECTION("the offset and the anchor are given whole each time: without them, +00:00 and none") {
    const std::string before = dump(f.db);
    CHECK(f.line({"limit", "set", "plan", "--max", "3", "--per", "month", "--utc-offset", "+09:00",
                  "--anchor", "2026-03-17T00:30:00Z"}) ==
          "limit plan unchanged: 3 per month (fixed_window, from the 17th 09:30 UTC+09:00)\n");
    CHECK(dump(f.db) == before);
    CHECK(f.line({"limit", "set", "plan", "--max", "3", "--per", "month"}) ==
          "updated limit plan: 3 per month (fixed_window, from the 1st 00:00 UTC), was 3 per "
          "month (fixed_window, from the 17th 09:30 UTC+09:00)\n");
    const json plain = f.ok({"limit", "get", "plan"});
    CHECK(plain["utc_offset"] == "+00:00");
    CHECK(plain["anchor_ms"].is_null());
  }
  SECTION("a calendar unit makes the limit fixed_window, whatever it was") {
    f.ok({"limit", "set", "send", "--max", "3", "--per", "1m"});
    CHECK(f.line({"limit", "set", "send", "--max", "3", "--per", "week"}) ==
          "updated limit send: 3 per week (fixed_window, from Monday 00:00 UTC), was 3 per 1m "
          "(sliding_log); the algorithm changed, so its state was discarded\n");
    CHECK(f.line({"limit", "set", "yearly", "--max", "9", "--per", "year", "--algo", "fixed_window",
                  "--utc-offset", "-05:30"}) ==
          "created limit yearly: 9 per year (fixed_window, from 1 January 00:00 UTC-05:30)\n");
    // Back to a DURATION: the algorithm stays the limit's (fixed_window), the calendar goes.
    const json back = f.ok({"limit", "set", "send", "--max", "3", "--per", "7d"});
    CHECK(back["algorithm"] == "fixed_window");
    CHECK(back["period_ms"] == 7 * 86'400'000);
    CHECK(back["period"].is_null());
  }
}

TEST_CASE("quotactl limit set refuses bad calendar input with exit 2 before opening the database",
          "[quotactl][calendar]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;  // a part of the error line
  };
  const std::vector<std::string> month{"limit", "set", "plan", "--max", "3", "--per", "month"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = month;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::vector<Case> cases{
      {{"limit", "set", "plan", "--max", "3", "--per", "fortnight"},
       "invalid period 'fortnight' for --per: use a DURATION"},
      {{"limit", "set", "plan", "--max", "3", "--per", "monthly"}, "(did you mean 'month'?)"},
      {{"limit", "set", "plan", "--max", "3", "--per", "1month"},
       "a calendar unit is written without a number (--per month)"},
      {{"limit", "set", "plan", "--max", "3", "--per", "12months"}, "invalid period '12months'"},
      {with({"--algo", "sliding_window"}),
       "calendar periods count only with fixed_window: --per month takes --algo fixed_window "
       "(its default), not --algo sliding_window; for sliding_window give --per a DURATION"},
      {with({"--algo", "token_bucket", "--burst", "5"}),
       "calendar periods count only with fixed_window"},
      {with({"--algo", "sliding_log"}), "calendar periods count only with fixed_window"},
      {with({"--algo", "leaky"}), "unknown algorithm 'leaky' for --algo"},
      {with({"--burst", "5"}), "burst"},
      {with({"--utc-offset", "+15:00"}), "offsets go from -14:00 to +14:00"},
      {with({"--utc-offset", "-14:01"}), "offsets go from -14:00 to +14:00"},
      {with({"--utc-offset", "09:00"}), "use +HH:MM or -HH:MM"},
      {with({"--utc-offset", "Z"}), "use +HH:MM or -HH:MM"},
      {with({"--utc-offset", "+9"}), "use +HH:MM or -HH:MM"},
      {with({"--utc-offset", "+05:30:15"}), "use +HH:MM or -HH:MM"},
      {with({"--anchor", "2026-03-17"}), "a date alone is not an instant"},
      {with({"--anchor", "2026-03-17T09:30:00"}), "an instant needs its offset"},
      {with({"--anchor", "2026-02-30T00:00:00Z"}), "2026-02-30 is not a date"},
      {with({"--anchor", "1969-12-31T23:59:59Z"}), "an instant goes from 1970-01-01T00:00:00Z"},
      {with({"--anchor", "2026-03-17T09:30:00.1234Z"}), "1 to 3 digits"},
      {with({"--anchor", "yesterday"}), "use an ISO-8601 instant"},
      {with({"--anchor", ""}), "use an ISO-8601 instant"},
      {{"limit", "set", "plan", "--max", "3", "--per", "1d", "--utc-offset", "+09:00"},
       "--utc-offset needs a calendar period: use --per day, week, month or year (--per 1d is a "
       "DURATION, whose windows follow one another from the Unix epoch)"},
      {{"limit", "set", "plan", "--max", "3", "--per", "30d", "--anchor", "2026-03-17T09:30:00Z"},
       "--anchor needs a calendar period: use --per day, week, month or year (--per 30d"},
      {{"limit", "set", "plan", "--max", "3", "--per", "1d", "--algo", "fixed_window",
        "--utc-offset", "+00:00"},
       "--utc-offset needs a calendar period"},
      {{"override", "set", "plan", "u1", "--anchor", "2026-03-17"},
       "a date alone is not an instant"},
      {{"override", "set", "plan", "u1", "--max", "5", "--anchor", "2026-03-17T09:30"},
       "use an ISO-8601 instant"},
      {{"override", "set", "plan", "u1"},
       "override set needs one of --max N, --exempt or --deny, or --anchor INSTANT, or both"},
      {{"override", "set", "plan", "", "--anchor", "2026-03-17T09:30:00Z"}, "owner"},
      {{"override", "set", "bad name", "u1", "--anchor", "2026-03-17T09:30:00Z"}, "name"},
  };

  Fixture f;
  f.ok({"limit", "set", "plan", "--max", "3", "--per", "month", "--utc-offset", "+09:00"});
  f.ok({"consume", "plan", "u1"});
  const std::string before = dump(f.db);
  const std::string bytes = read_file(f.db);
  const std::string missing = f.dir.file("missing.db");

  for (const Case& c : cases) {
    std::string shown;
    for (const std::string& arg : c.args) shown += arg + " ";
    INFO("quotactl " << shown);
    for (const bool json_output : {false, true}) {
      std::vector<std::string> args = c.args;
      if (json_output) args.push_back("--json");
      const QuotactlRun outcome = f.ctl(args);
      CHECK(outcome.status == 2);
      CHECK(outcome.one_error_line());
      CHECK_THAT(outcome.err, Catch::Contains(c.message));
      // With --json the same error is also the one document on stdout.
      CHECK((json_output ? nlohmann::json::parse(outcome.out)["error"]["code"] == "invalid_argument"
                         : outcome.out.empty()));
    }
    // Checked before the database is opened: a missing file gives the same answer.
    std::vector<std::string> elsewhere = c.args;
    elsewhere.insert(elsewhere.begin(), {"--db", missing});
    const QuotactlRun outcome = run_quotactl(elsewhere);
    CHECK(outcome.status == 2);
    CHECK_THAT(outcome.err, Catch::Contains(c.message));
  }
  CHECK(dump(f.db) == before);
  CHECK(read_file(f.db) == bytes);
  CHECK_FALSE(std::filesystem::exists(missing));
}

// --- the operations -------------------------------------------------------------------------

TEST_CASE("quotactl shows a calendar limit's reset at its offset", "[quotactl][calendar]") {
  Fixture f;
  f.ok({"limit", "set", "plan", "--max", "3", "--per", "month", "--utc-offset", "+09:00"});
  f.ok({"limit", "set", "send", "--max", "2", "--per", "1m"});

  CHECK(f.line({"check", "plan", "u1"}) == "allowed  plan/u1: 3 of 3 left, nothing in use\n");
  CHECK(f.line({"consume", "plan", "u1"}) ==
        "allowed  plan/u1: 2 of 3 left, resets on 2026-12-01 00:00 +09:00\n");
  const json second = f.ok({"consume", "plan", "u1"});
  CHECK(second["reset_at_ms"] == kDecember1);  // the JSON is unchanged: Unix ms
  CHECK(f.line({"record", "plan", "u1"}) ==
        "recorded plan/u1: 0 of 3 left, resets on 2026-12-01 00:00 +09:00\n");
  // 10.5 days to the next month at +09:00, which is still 30 November in UTC.
  CHECK(f.line({"consume", "plan", "u1"}, 1) ==
        "denied   plan/u1: 0 of 3 left, retry in 10d 12h (at 2026-12-01 00:00 +09:00), 1 denied "
        "so far\n");
  CHECK(f.line({"record", "plan", "u1"}, 1) ==
        "over     plan/u1: 0 of 3 left, a consume is allowed again in 10d 12h (at 2026-12-01 "
        "00:00 +09:00)\n");
  f.ok({"limit", "set", "big", "--max", "100", "--per", "1m"});
  CHECK(f.line({"consume", "plan,big", "u2"}) ==
        "allowed  plan/u2: 2 of 3 left, resets on 2026-12-01 00:00 +09:00 [decided by plan of 2 "
        "limits]\n");
  CHECK(f.line({"consume", "send", "u1"}) == "allowed  send/u1: 1 of 2 left, resets in 1m\n");

  CHECK(f.line({"usage", "plan"}) ==
        "plan: 3 per month (fixed_window, from the 1st 00:00 UTC+09:00), at "
        "2026-11-20T03:00:00.000Z\n"
        "OWNER  USAGE                 USED  DENIED  RESETS ON\n"
        "u1     ####################   4/3       1  2026-12-01 00:00 +09:00\n"
        "u2     #######.............   1/3       0  2026-12-01 00:00 +09:00\n");
  // Across limits, each row says whether it resets on a date or in a while.
  CHECK(f.line({"usage", "--owner", "u1"}) ==
        "u1 at 2026-11-20T03:00:00.000Z\n"
        "LIMIT  USAGE                 USED  DENIED  BLOCKED FOR  RESETS\n"
        "plan   ####################   4/3       1  -            on 2026-12-01 00:00 +09:00\n"
        "send   ##########..........   1/2       0  -            in 1m\n");
  CHECK(f.ok({"usage", "--owner", "u1"})[0]["reset_at_ms"] == kDecember1);

  // An hour after 30 November 15:00 UTC it is 1 December at +09:00: a new month.
  f.now = kDecember1 + 3'600'000;
  CHECK(f.line({"consume", "plan", "u1"}) ==
        "allowed  plan/u1: 2 of 3 left, resets on 2027-01-01 00:00 +09:00\n");
  CHECK(f.line({"reset", "plan", "u1"}) == "reset    plan/u1: 3 of 3 left, nothing in use\n");
}

// --- owners' anchors ------------------------------------------------------------------------

TEST_CASE("quotactl override set --anchor: an owner's own window start", "[quotactl][calendar]") {
  Fixture f;
  f.ok({"limit", "set", "plan", "--max", "3", "--per", "month", "--utc-offset", "+09:00",
        "--anchor", "2026-03-17T09:30:00+09:00"});
  f.ok({"limit", "set", "send", "--max", "2", "--per", "1m"});
  // The limit's anchor: every month from the 17th at 09:30.
  CHECK(f.line({"consume", "plan", "u1"}) ==
        "allowed  plan/u1: 2 of 3 left, resets on 2026-12-17 09:30 +09:00\n");

  // An anchor alone: the owner's months start on the 31st, or the month's last day.
  CHECK(f.line({"override", "set", "plan", "u2", "--anchor", "2026-01-31T00:00:00+09:00"}) ==
        "anchor for u2 on plan: 2026-01-31 00:00 +09:00, its windows from the 31st 00:00 "
        "UTC+09:00 or the month's last day\n");
  CHECK(f.line({"consume", "plan", "u2"}) ==
        "allowed  plan/u2: 2 of 3 left, resets on 2026-11-30 00:00 +09:00\n");
  // With a policy, both: the owner's own maximum and anchor.
  const json both = f.ok(
      {"override", "set", "plan", "u3", "--max", "10", "--anchor", "2026-01-02T00:00:00+09:00"});
  CHECK(both == json{{"limit", "plan"},
                     {"owner", "u3"},
                     {"policy", "maximum"},
                     {"maximum", 10},
                     {"burst", nullptr},
                     {"anchor_ms", 1'767'279'600'000}});
  CHECK(f.line({"consume", "plan", "u3"}) ==
        "allowed  plan/u3: 9 of 10 left, resets on 2026-12-02 00:00 +09:00\n");
  // --anchor alone keeps the owner's override, and --max alone its anchor.
  f.ok({"override", "set", "plan", "u3", "--anchor", "2026-01-03T00:00:00+09:00"});
  CHECK(f.ok({"override", "set", "plan", "u3", "--max", "12"})["anchor_ms"] == 1'767'366'000'000);
  CHECK(f.line({"override", "set", "plan", "u3", "--deny"}) == "override for u3 on plan: deny\n");
  // On every calendar limit: its place at each limit's offset (09:00 at +09:00).
  CHECK(f.line({"override", "set", "*", "u4", "--anchor", "2026-01-02T00:00:00Z"}) ==
        "anchor for u4 on every limit: 2026-01-02 00:00 +00:00\n");
  CHECK(f.line({"consume", "plan", "u4"}) ==
        "allowed  plan/u4: 2 of 3 left, resets on 2026-12-02 09:00 +09:00\n");
  f.ok({"override", "set", "send", "u5", "--exempt"});

  const json listed = f.ok({"override", "list"});
  CHECK(listed == json::parse(R"([
    {"limit":"*","owner":"u4","policy":null,"maximum":null,"burst":null,"anchor_ms":1767312000000},
    {"limit":"plan","owner":"u2","policy":null,"maximum":null,"burst":null,"anchor_ms":1769785200000},
    {"limit":"plan","owner":"u3","policy":"deny","maximum":null,"burst":null,"anchor_ms":1767366000000},
    {"limit":"send","owner":"u5","policy":"exempt","maximum":null,"burst":null,"anchor_ms":null}
  ])"));
  CHECK(f.ok({"override", "list", "send"}).size() == 1);  // send's only, as for overrides
  CHECK(f.ok({"override", "list", "*"}).size() == 1);
  CHECK(f.line({"override", "list"}) ==
        "LIMIT  OWNER  POLICY  ANCHOR\n"
        "*      u4     -       2026-01-02 00:00 +00:00\n"
        "plan   u2     -       2026-01-31 00:00 +09:00\n"
        "plan   u3     deny    2026-01-03 00:00 +09:00\n"
        "send   u5     exempt  -\n");

  // rm removes both, and says which there were.
  CHECK(f.line({"override", "rm", "plan", "u2"}) == "removed the anchor for u2 on plan\n");
  CHECK(f.line({"override", "rm", "plan", "u3"}) ==
        "removed the override and the anchor for u3 on plan\n");
  CHECK(f.ok({"override", "rm", "send", "u5"}) ==
        json{{"removed",
              {{"limit", "send"}, {"owner", "u5"}, {"override", true}, {"anchor", false}}}});
  CHECK(
      f.ok({"override", "rm", "*", "u4"}) ==
      json{{"removed", {{"limit", "*"}, {"owner", "u4"}, {"override", false}, {"anchor", true}}}});
  const QuotactlRun none = f.ctl({"override", "rm", "plan", "u2"});
  CHECK(none.status == 2);
  CHECK(none.one_error_line());
  CHECK(none.err ==
        "quotactl: error: no override for owner 'u2' on 'plan', nor an anchor: see `quotactl "
        "override list plan`\n");
  CHECK(f.ok({"override", "list"}) == json::array());
  // u2 counts from the limit's anchor again from its next window; this one keeps its end.
  CHECK(f.line({"check", "plan", "u2"}) ==
        "allowed  plan/u2: 2 of 3 left, resets on 2026-11-30 00:00 +09:00\n");
}

TEST_CASE("quotactl override set --anchor on a limit without a calendar is exit 2, nothing set",
          "[quotactl][calendar]") {
  Fixture f;
  f.ok({"limit", "set", "send", "--max", "2", "--per", "1m"});
  f.ok({"limit", "set", "daily", "--max", "2", "--per", "1d", "--algo", "fixed_window"});
  const std::string before = dump(f.db);
  const std::vector<std::vector<std::string>> cases{
      {"override", "set", "send", "u1", "--anchor", "2026-03-17T09:30:00Z"},
      {"override", "set", "send", "u1", "--max", "5", "--anchor", "2026-03-17T09:30:00Z"},
      {"override", "set", "daily", "u1", "--exempt", "--anchor", "2026-03-17T09:30:00Z"},
  };
  for (const auto& args : cases) {
    std::string shown;
    for (const std::string& arg : args) shown += arg + " ";
    INFO("quotactl " << shown);
    const QuotactlRun outcome = f.ctl(args);
    CHECK(outcome.status == 2);
    CHECK(outcome.one_error_line());
    CHECK(outcome.out.empty());
    CHECK_THAT(outcome.err, Catch::Contains("not per calendar unit: an anchor needs a limit with "
                                            "--per day, week, month or year"));
  }
  CHECK(f.ctl(cases[0]).err ==
        "quotactl: error: limit 'send' counts per 1m, not per calendar unit: an anchor needs a "
        "limit with --per day, week, month or year\n");
  CHECK(f.ctl({"override", "set", "nosuch", "u1", "--anchor", "2026-03-17T09:30:00Z"}).err ==
        "quotactl: error: unknown limit 'nosuch': `quotactl limit list` shows the limits there "
        "are; `quotactl limit set NAME --max N --per DURATION` defines one\n");
  CHECK(dump(f.db) == before);
}
