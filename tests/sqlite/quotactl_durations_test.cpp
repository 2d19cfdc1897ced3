// quotactl's DURATION: a unit ms, s, m (or min), h, d or w, or several parts from the largest
// unit down (1h30m, 2d12h); out-of-order and repeated units are refused, saying how to write
// one.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "quota/error.h"
#include "quota/limit.h"
#include "support.h"
#include "support/quotactl_run.h"
#include "text.h"

using std::chrono::milliseconds;

TEST_CASE("quotactl durations: weeks, min, and several units from the largest down",
          "[quotactl][durations]") {
  using quotactl::parse_duration;
  CHECK(parse_duration("1w", "--per") == milliseconds(604'800'000));
  CHECK(parse_duration("52w", "--per") == milliseconds(52 * 604'800'000LL));
  CHECK(parse_duration("1min", "--per") == milliseconds(60'000));
  CHECK(parse_duration("90min", "--per") == milliseconds(5'400'000));
  CHECK(parse_duration("1h30m", "--per") == milliseconds(5'400'000));
  CHECK(parse_duration("1h30min", "--per") == milliseconds(5'400'000));
  CHECK(parse_duration("2d12h", "--per") == milliseconds(216'000'000));
  CHECK(parse_duration("1w2d3h4m5s6ms", "--per") ==
        milliseconds(((((9LL * 24 + 3) * 60 + 4) * 60 + 5) * 1000) + 6));
  CHECK(parse_duration("1m30s", "--per") == milliseconds(90'000));
  CHECK(parse_duration("0h1m", "--per") == milliseconds(60'000));  // a zero part is a part
  CHECK(parse_duration("52w2d", "--per") == quota::kPeriodBound);

  const auto refusal = [](const std::string& text) {
    try {
      quotactl::parse_duration(text, "--per");
    } catch (const quota::Error& error) {
      CHECK(error.code() == quota::ErrorCode::invalid_argument);
      return std::string(error.what());
    }
    FAIL("accepted " << text);
    return std::string();
  };
  CHECK(refusal("30m1h") ==
        "invalid duration '30m1h' for --per: 'h' after 'm': write a unit once, from the largest "
        "down (1h30m, not 30m1h or 1h1h)");
  CHECK(refusal("1h1h") ==
        "invalid duration '1h1h' for --per: 'h' after 'h': give a unit once, from the largest "
        "down (1h30m, not 30m1h or 1h1h)");
  CHECK(refusal("1m1min") ==
        "invalid duration '1m1min' for --per: 'min' after 'm': give a unit once, from the "
        "largest down (1h30m, not 30m1h or 1h1h)");
  CHECK(refusal("1s1ms1s").find("'s' after 'ms'") != std::string::npos);
  const std::string forms =
      "use a whole number and a unit ms, s, m (or min), h, d or w (500ms, 30s, 1m, 1h, 1d, 1w), "
      "or several from the largest unit down (1h30m, 2d12h)";
  for (const char* bad : {"1h30", "h30m", "1h 30m", "1h-30m", "1H30M", "1hour", "1mins", "1wk",
                          "30m+", "", "1.5h", "1h30m "}) {
    INFO(bad);
    CHECK(refusal(bad) == "invalid duration '" + std::string(bad) + "' for --per: " + forms);
  }
  CHECK(refusal("53w") == "invalid duration '53w' for --per: the longest duration is 366d");
  CHECK(refusal("52w3d") == "invalid duration '52w3d' for --per: the longest duration is 366d");
  CHECK(refusal("366d1ms") == "invalid duration '366d1ms' for --per: the longest duration is 366d");
  CHECK(refusal("0h0m") == "invalid duration '0h0m' for --per: a duration is at least 1ms");

  // A period given in parts is one period: --per and --block take them, and limit get shows
  // the period in its largest whole unit.
  quota::test::TempDir dir;
  const std::string db = dir.file("quota.db");
  const auto quotactl_json = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    const quota::test::QuotactlRun answer =
        quota::test::run_quotactl_at(db, 1'700'000'000'000, std::move(args));
    INFO(answer.err);
    REQUIRE(answer.status == 0);
    return answer.document();
  };
  quotactl_json({"migrate"});
  quotactl_json({"limit", "set", "report", "--max", "5", "--per", "1h30m", "--block", "1w"});
  const nlohmann::json report = quotactl_json({"limit", "get", "report"});
  CHECK(report["period_ms"] == 5'400'000);
  quotactl_json({"limit", "set", "weekly", "--max", "5", "--per", "1w"});
  CHECK(quotactl_json({"limit", "get", "weekly"})["period_ms"] == 604'800'000);
  CHECK(quotactl::parse_period("2d12h", "--per").duration == milliseconds(216'000'000));
  CHECK_FALSE(quotactl::parse_period("1w", "--per").calendar);
}
