// Bad input per SPEC §2 through the Engine: a quota::Error with ErrorCode::invalid_argument
// whose message says what is accepted, and a database exactly as it was. The boundaries
// themselves (64-character names, 1024-byte owners, the largest cost, maximum and period)
// are accepted.
#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support.h"

namespace quota::test {
namespace {

using namespace std::string_literals;

Limit make_limit(const std::string& name, Algorithm algorithm = Algorithm::sliding_log,
                 std::int64_t maximum = 3, std::int64_t period_ms = 1000) {
  Limit limit;
  limit.name = name;
  limit.algorithm = algorithm;
  limit.maximum = maximum;
  limit.period = std::chrono::milliseconds(period_ms);
  return limit;
}

struct Fixture {
  TempDir dir;
  std::string path = dir.file("quota.db");
  ManualClock clock;
  Engine engine = Engine::open(path, options_with(clock));

  Fixture() {
    engine.define(make_limit("log"));
    engine.define(make_limit("win", Algorithm::fixed_window));
    engine.consume("log", "u");
    engine.consume("win", "u");
  }

  // `operation` throws invalid_argument with every fragment in its message and changes
  // nothing in the file.
  void expect_invalid(const std::function<void()>& operation,
                      const std::vector<std::string>& fragments) {
    const std::string before = dump(path);
    try {
      operation();
      FAIL("accepted");
    } catch (const Error& error) {
      INFO(error.what());
      CHECK(error.code() == ErrorCode::invalid_argument);
      for (const std::string& fragment : fragments)
        CHECK_THAT(error.what(), Catch::Contains(fragment));
    }
    CHECK(dump(path) == before);
  }

  // Every operation that takes a limit name refuses `name`.
  void expect_name_refused(const std::string& name) {
    const std::vector<std::string> says = {"invalid limit name", "A-Z a-z 0-9 _ . : -"};
    expect_invalid([&] { engine.define(make_limit(name)); }, says);
    expect_invalid([&] { engine.check(name, "u"); }, says);
    expect_invalid([&] { engine.consume(name, "u"); }, says);
    expect_invalid([&] { engine.record(name, "u"); }, says);
    expect_invalid([&] { engine.reset(name, "u"); }, says);
    expect_invalid([&] { engine.get(name); }, says);
    expect_invalid([&] { engine.remove(name); }, says);
    expect_invalid([&] { engine.usage(name); }, says);
  }

  // Every operation that takes an owner refuses `owner`, on both algorithms.
  void expect_owner_refused(const std::string& owner, const std::string& says) {
    for (const char* limit : {"log", "win"}) {
      CAPTURE(limit);
      expect_invalid([&] { engine.check(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.consume(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.record(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.reset(limit, owner); }, {"invalid owner", says});
    }
  }

  void expect_cost_refused(std::int64_t cost) {
    const std::vector<std::string> says = {"invalid cost", "from 1 to 1000000000000"};
    for (const char* limit : {"log", "win"}) {
      CAPTURE(limit, cost);
      expect_invalid([&] { engine.check(limit, "u", cost); }, says);
      expect_invalid([&] { engine.consume(limit, "u", cost); }, says);
      expect_invalid([&] { engine.record(limit, "u", cost); }, says);
    }
  }
};

TEST_CASE("limit names: 1 to 64 characters of A-Z a-z 0-9 _ . : -", "[validation]") {
  Fixture f;
  f.expect_name_refused("");
  f.expect_name_refused(std::string(65, 'a'));
  f.expect_name_refused("send message");
  f.expect_name_refused("send/message");
  f.expect_name_refused("send\nmessage");
  f.expect_name_refused(
      "\xC3\xBC"
      "ber");  // "über": letters outside A-Z a-z
  f.expect_name_refused("send'; DROP TABLE quota_limits; --");

  const std::string longest(64, 'z');
  f.engine.define(make_limit(longest));
  f.engine.define(make_limit("Az09_.:-"));
  CHECK(f.engine.consume(longest, "u").allowed);
  CHECK(f.engine.get("Az09_.:-"));
}

TEST_CASE("owners: non-empty, at most 1024 bytes, valid UTF-8, no NUL", "[validation]") {
  Fixture f;
  f.expect_owner_refused("", "non-empty");
  f.expect_owner_refused(std::string(1025, 'o'), "1024 bytes");
  f.expect_owner_refused(
      "user\0"
      "123"s,
      "NUL");
  f.expect_owner_refused("\0"s, "NUL");
  f.expect_owner_refused("\xC0\xAF", "UTF-8");      // overlong "/"
  f.expect_owner_refused("\xE0\x80\xAF", "UTF-8");  // overlong, 3 bytes
  f.expect_owner_refused("\xED\xA0\x80", "UTF-8");  // a surrogate (U+D800)
  f.expect_owner_refused("abc\xE2\x82", "UTF-8");   // truncated at the end
  f.expect_owner_refused(
      "\xE2\x82"
      "abc",
      "UTF-8");                                         // truncated in the middle
  f.expect_owner_refused("\x80", "UTF-8");              // a lone continuation byte
  f.expect_owner_refused("\xF4\x90\x80\x80", "UTF-8");  // above U+10FFFF
  f.expect_owner_refused("\xFF", "UTF-8");

  // The boundaries and ordinary keys are accepted.
  for (const std::string& owner :
       {std::string(1024, 'o'), "user123:poll456"s, "\xF0\x9F\x98\x80"s /* U+1F600 */,
        "\xEF\xBF\xBF"s /* U+FFFF */, "\xF4\x8F\xBF\xBF"s /* U+10FFFF */, "a@b.c 192.0.2.1"s}) {
    CAPTURE(owner.size());
    CHECK(f.engine.consume("log", owner).allowed);
    CHECK(f.engine.consume("win", owner).allowed);
  }
}

TEST_CASE("costs: a whole number from 1 to 10^12", "[validation]") {
  Fixture f;
  f.expect_cost_refused(0);
  f.expect_cost_refused(-1);
  f.expect_cost_refused(kMaximumBound + 1);
  f.expect_cost_refused(std::numeric_limits<std::int64_t>::min());
  f.expect_cost_refused(std::numeric_limits<std::int64_t>::max());

  // The largest cost is not an error: it can never fit this limit.
  const Result never = f.engine.consume("log", "u", kMaximumBound);
  CHECK(never.reason == Reason::cost_exceeds_capacity);
  CHECK(never.retry_after_ms == -1);
}

TEST_CASE("limits: maximum, period and burst out of range are refused", "[validation]") {
  Fixture f;
  const std::vector<std::string> maximum = {"invalid maximum", "use a whole number from 1 to"};
  const std::vector<std::string> period = {"invalid period", "1 ms to 366 days"};
  for (const Algorithm algorithm : {Algorithm::sliding_log, Algorithm::fixed_window}) {
    CAPTURE(to_string(algorithm));
    for (const std::string& name : {"log"s, "win"s, "new"s}) {  // updates and a new limit
      CAPTURE(name);
      f.expect_invalid([&] { f.engine.define(make_limit(name, algorithm, 0)); }, maximum);
      f.expect_invalid([&] { f.engine.define(make_limit(name, algorithm, -1)); }, maximum);
      f.expect_invalid([&] { f.engine.define(make_limit(name, algorithm, kMaximumBound + 1)); },
                       maximum);
      f.expect_invalid([&] { f.engine.define(make_limit(name, algorithm, 3, 0)); }, period);
      f.expect_invalid([&] { f.engine.define(make_limit(name, algorithm, 3, -1000)); }, period);
      f.expect_invalid(
          [&] { f.engine.define(make_limit(name, algorithm, 3, kPeriodBound.count() + 1)); },
          period);
      Limit with_burst = make_limit(name, algorithm);
      with_burst.burst = 3;
      f.expect_invalid([&] { f.engine.define(with_burst); },
                       {"burst is only for token_bucket", "drop the burst"});
    }
  }
  // Nothing changed the limits that exist.
  CHECK(f.engine.get("log") == make_limit("log"));
  CHECK(f.engine.get("win") == make_limit("win", Algorithm::fixed_window));
  CHECK_FALSE(f.engine.get("new"));

  // The largest numbers are accepted.
  for (const Algorithm algorithm : {Algorithm::sliding_log, Algorithm::fixed_window}) {
    const Limit largest = make_limit("largest", algorithm, kMaximumBound, kPeriodBound.count());
    f.engine.define(largest);
    CHECK(f.engine.get("largest") == largest);
    const Result recorded = f.engine.record("largest", "u", kMaximumBound);
    CHECK(recorded ==
          Result{true, Reason::ok, 0, 0, f.engine.check("largest", "u").reset_at_ms, 0});
    CHECK(recorded.reset_at_ms > f.clock.get());
    CHECK(f.engine.consume("largest", "u").retry_after_ms > 0);
  }
}

TEST_CASE("a clock before the epoch is refused", "[validation]") {
  Fixture f;
  f.clock.set(-1);
  f.expect_invalid([&] { f.engine.consume("log", "u"); }, {"clock", "Unix milliseconds"});
  f.expect_invalid([&] { f.engine.check("win", "u"); }, {"clock", "Unix milliseconds"});
}

}  // namespace
}  // namespace quota::test
