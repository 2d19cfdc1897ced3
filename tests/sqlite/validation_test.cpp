// Bad input (docs/concepts.md) through the Engine: a quota::Error with ErrorCode::invalid_argument
// whose message says what is accepted, and a database exactly as it was. The boundaries
// themselves (64-character names, 1024-byte owners, the largest cost, maximum and period)
// are accepted. sliding_window and token_bucket multiply by the period: their smallest
// configurations that could overflow 64 bits are refused with a message naming the number
// and its bound, and the largest accepted ones answer exactly as the reference model (which
// computes in 128 bits) at their edges: whole-capacity costs, overdrafts, long time jumps.
#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "model.h"
#include "support.h"

namespace quota::test {
namespace {

using namespace std::string_literals;

constexpr std::int64_t k2To62 = std::int64_t{1} << 62;  // 4611686018427387904
constexpr std::int64_t kThirtyDays = 2'592'000'000;
constexpr std::int64_t k366Days = 31'622'400'000;
constexpr std::int64_t kDay = 86'400'000;

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
    expect_invalid([&] { engine.owner_usage(name, "u"); }, says);
  }

  // Every operation that takes an owner refuses `owner`, on both algorithms.
  void expect_owner_refused(const std::string& owner, const std::string& says) {
    for (const char* limit : {"log", "win"}) {
      CAPTURE(limit);
      expect_invalid([&] { engine.check(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.consume(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.record(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.reset(limit, owner); }, {"invalid owner", says});
      expect_invalid([&] { engine.owner_usage(limit, owner); }, {"invalid owner", says});
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

// The numbers that the message of a refused limit suggests: "a maximum of at most N", "a
// burst of at most N" (lowering the maximum, the burst or both), "give a burst of at most N"
// (keeping the maximum) and "a period of at most N ms". Each alternative, applied to `limit`,
// must itself be accepted.
std::vector<Limit> suggested_limits(const Limit& limit, const std::string& message) {
  const auto number_after = [&](const std::string& words) -> std::optional<std::int64_t> {
    const std::size_t at = message.find(words);
    if (at == std::string::npos) return std::nullopt;
    return std::stoll(message.substr(at + words.size()));
  };
  std::vector<Limit> alternatives;
  Limit lowered = limit;
  bool lowers = false;
  if (const auto maximum = number_after("use a maximum of at most ")) {
    lowered.maximum = *maximum;
    lowers = true;
  }
  if (const auto burst = number_after("a burst of at most ");
      burst && message.find("give a burst of at most ") == std::string::npos) {
    lowered.burst = *burst;
    lowers = true;
  }
  if (lowers) alternatives.push_back(lowered);
  if (const auto burst = number_after("give a burst of at most ")) {
    Limit with_burst = limit;
    with_burst.burst = *burst;
    alternatives.push_back(with_burst);
  }
  if (const auto period = number_after("a period of at most ")) {
    Limit shorter = limit;
    shorter.period = std::chrono::milliseconds{*period};
    alternatives.push_back(shorter);
  }
  return alternatives;
}

TEST_CASE("sliding_window and token_bucket: configurations that could overflow are refused",
          "[validation]") {
  Fixture f;
  f.engine.define(make_limit("sw", Algorithm::sliding_window, 3, 1000));
  f.engine.define(make_bucket("tb", 3, 1000, 5));
  f.engine.consume("sw", "u");
  f.engine.consume("tb", "u");
  const std::string bound = "2^62 (" + std::to_string(k2To62) + ")";
  const std::string bucket_bound = "2^61 (" + std::to_string(kBucketBound) + ")";
  struct Refused {
    Limit limit;
    std::vector<std::string> says;
  };
  const std::vector<Refused> refused = {
      // sliding_window: maximum x period_ms at most 2^62, at any period.
      {make_limit("x", Algorithm::sliding_window, 145'836'054, k366Days),
       {"maximum 145836054", bound, "use a maximum of at most 145836053",
        "a period of at most 31622399893 ms"}},
      {make_limit("x", Algorithm::sliding_window, 1'779'199'853, kThirtyDays),
       {"maximum 1779199853", bound, "at most 1779199852"}},
      {make_limit("x", Algorithm::sliding_window, kMaximumBound, 4'611'687),
       {"maximum 1000000000000", bound, "at most 999999787155", "period of at most 4611686 ms"}},
      // token_bucket: maximum x period_ms at most 2^62, burst x period_ms at most 2^61 (the
      // burst defaults to the maximum, so without one the maximum must fit 2^61).
      {make_bucket("x", kMaximumBound, k366Days),
       {"maximum 1000000000000", bound, bucket_bound, "the burst is the maximum",
        "use a maximum of at most 72918026", "a period of at most 2305843 ms"}},
      {make_bucket("x", 145'836'053, k366Days),
       {bucket_bound, "use a maximum of at most 72918026", "give a burst of at most 72918026"}},
      {make_bucket("x", 72'918'027, k366Days),
       {"maximum 72918027", bucket_bound, "at most 72918026", "give a burst of at most 72918026"}},
      {make_bucket("x", 145'836'054, k366Days, 1),
       {"maximum 145836054, burst 1", bound, "use a maximum of at most 145836053"}},
      {make_bucket("x", 1, k366Days, 72'918'027),
       {"burst 72918027", bucket_bound, "use a burst of at most 72918026"}},
      {make_bucket("x", 145'836'054, k366Days, 72'918'027),
       {bound, bucket_bound, "use a maximum of at most 145836053 and a burst of at most 72918026",
        "a period of at most 31622399893 ms"}},
      {make_bucket("x", kMaximumBound, 2'305'844),
       {bucket_bound, "use a maximum of at most 999999570315",
        "give a burst of at most 999999570315", "a period of at most 2305843 ms"}},
      {make_bucket("x", kMaximumBound, 4'611'687),
       {bound, bucket_bound, "use a maximum of at most 499999893577"}},
      {make_bucket("x", 1, 33'554'432, 68'719'476'737),
       {"burst 68719476737", bucket_bound, "use a burst of at most 68719476736"}},
  };
  for (const std::string& name : {"sw"s, "tb"s, "new"s}) {  // updates and a new limit
    for (Refused example : refused) {
      example.limit.name = name;
      CAPTURE(name, to_string(example.limit.algorithm), example.limit.maximum,
              example.limit.period.count(), example.limit.capacity());
      example.says.push_back("is too large for the 64-bit arithmetic of " +
                             std::string(to_string(example.limit.algorithm)));
      f.expect_invalid([&] { f.engine.define(example.limit); }, example.says);
    }
  }
  CHECK(f.engine.get("sw") == make_limit("sw", Algorithm::sliding_window, 3, 1000));
  CHECK(f.engine.get("tb") == make_bucket("tb", 3, 1000, 5));
  CHECK_FALSE(f.engine.get("new"));
  CHECK(f.engine.check("sw", "u").remaining == 2);
  CHECK(f.engine.check("tb", "u").remaining == 4);

  // Every number a message suggests is accepted, with the limit's other numbers as given.
  for (const Refused& example : refused) {
    std::string message;
    try {
      validate_limit(example.limit);
    } catch (const Error& error) {
      message = error.what();
    }
    CAPTURE(message);
    const std::vector<Limit> alternatives = suggested_limits(example.limit, message);
    CHECK(alternatives.size() >= 2);  // lower a number, or shorten the period
    for (const Limit& alternative : alternatives) {
      CAPTURE(alternative.maximum, alternative.period.count(), alternative.capacity());
      CHECK_FALSE(find_overflow(alternative));
      f.engine.define(alternative);
      const Limit stored = f.engine.get("x").value();
      CHECK(stored.maximum == alternative.maximum);
      CHECK(stored.period == alternative.period);
      CHECK(stored.capacity() == alternative.capacity());
    }
  }

  // The other algorithms do not multiply: they keep the plain bounds.
  f.engine.define(make_limit("log", Algorithm::sliding_log, kMaximumBound, k366Days));
  f.engine.define(make_limit("win", Algorithm::fixed_window, kMaximumBound, k366Days));
}

TEST_CASE("every algorithm takes every period from 1 ms to 366 days", "[validation]") {
  // Regression: a sliding_window of more than 30 days was refused ("the most is 30 days").
  Fixture f;
  for (const Algorithm algorithm : {Algorithm::sliding_log, Algorithm::fixed_window,
                                    Algorithm::sliding_window, Algorithm::token_bucket}) {
    for (const std::int64_t days : {1, 30, 31, 90, 365, 366}) {
      CAPTURE(to_string(algorithm), days);
      const Limit limit = algorithm == Algorithm::token_bucket
                              ? make_bucket("long", 10, days * kDay, 10)
                              : make_limit("long", algorithm, 10, days * kDay);
      f.engine.define(limit);
      CHECK(f.engine.get("long") == limit);
      CHECK(f.engine.consume("long", "u" + std::to_string(days)).remaining == 9);
      // The schema accepts it from any SQLite client too.
      RawDb(f.path).exec("UPDATE quota_limits SET period_ms = " + std::to_string(days * kDay - 1) +
                         " WHERE name = 'long'");
    }
  }
}

// The engine and the reference model side by side on one limit and owner: every Result
// (and the usage row) must agree. The model computes in 128 bits, so an overflow anywhere
// in the engine shows as a difference.
class Edge {
 public:
  explicit Edge(const Limit& limit) : limit_(limit) {
    clock_.set(1'700'000'123'457);  // on no window boundary
    engine_.define(limit);
    model_.define(limit);
  }

  std::int64_t capacity() const { return limit_.capacity(); }
  std::int64_t period() const { return limit_.period.count(); }
  void advance(std::int64_t ms) {
    clock_.advance(ms);
    log_ += " +" + std::to_string(ms) + "ms";
  }

  Result check(std::int64_t cost) {
    return same("check", cost, engine_.check("edge", "u", cost),
                model_.check("edge", "u", cost, clock_.get()));
  }
  Result consume(std::int64_t cost) {
    return same("consume", cost, engine_.consume("edge", "u", cost),
                model_.consume("edge", "u", cost, clock_.get()));
  }
  Result record(std::int64_t cost) {
    return same("record", cost, engine_.record("edge", "u", cost),
                model_.record("edge", "u", cost, clock_.get()));
  }

  // After a denial: denied 1 ms before the wait is over, allowed when it is (engine and
  // model agreeing on both checks).
  void tight(const Result& denial, std::int64_t cost) {
    if (denial.allowed || denial.retry_after_ms <= 0) return;
    const std::int64_t t = clock_.get();
    clock_.set(t + denial.retry_after_ms - 1);
    CHECK_FALSE(check(cost).allowed);
    clock_.set(t + denial.retry_after_ms);
    CHECK(check(cost).allowed);
    clock_.set(t);
  }

  void usage() {
    const auto actual = engine_.usage("edge");
    const auto expected = model_.usage("edge", clock_.get());
    INFO(log_);
    REQUIRE(actual.size() == expected.size());
    for (std::size_t i = 0; i < actual.size(); ++i) {
      CHECK(actual[i].used == expected[i].used);
      CHECK(actual[i].remaining == expected[i].remaining);
      CHECK(actual[i].denied == expected[i].denied);
      CHECK(actual[i].reset_at_ms == expected[i].reset_at_ms);
    }
  }

 private:
  Result same(const char* operation, std::int64_t cost, const Result& actual,
              const Result& expected) {
    log_ += std::string(" ") + operation + "(" + std::to_string(cost) + ")";
    if (!(actual == expected)) {
      FAIL_CHECK(to_string(limit_.algorithm)
                 << " maximum=" << limit_.maximum << " period_ms=" << period() << " capacity="
                 << capacity() << "\n " << operation << "(" << cost << ") at " << clock_.get()
                 << "\n engine: " << actual << "\n model:  " << expected << "\n steps:" << log_);
    }
    return expected;
  }

  Limit limit_;
  TempDir dir_;
  ManualClock clock_;
  Engine engine_ = Engine::open(dir_.file("quota.db"), options_with(clock_));
  Model model_;
  std::string log_;
};

// Costs up to the capacity, a denial and its wait, overdrafts by record of `overdraft` units,
// and jumps of a fraction of a period, one period and a thousand periods.
void work_at_the_edges(Edge& edge, std::int64_t overdraft, int overdrafts) {
  const std::int64_t capacity = edge.capacity(), period = edge.period();
  edge.check(capacity);
  edge.consume(capacity);
  edge.tight(edge.consume(1), 1);
  edge.tight(edge.check(capacity), capacity);
  edge.record(overdraft);  // beyond the limit
  edge.check(1);
  edge.tight(edge.consume(capacity), capacity);
  edge.usage();
  edge.advance(period / 3);
  edge.tight(edge.consume(1), 1);
  edge.check(capacity);
  edge.advance(1);
  for (int i = 1; i < overdrafts; ++i) edge.record(overdraft);  // deeper
  edge.usage();
  edge.advance(period);
  edge.tight(edge.consume(capacity), capacity);
  edge.advance(period * 1000);
  edge.check(capacity);
  edge.consume(capacity);
  edge.tight(edge.consume(capacity), capacity);
  edge.advance(2 * period + 1);
  edge.consume(1);
  edge.usage();
}

TEST_CASE("sliding_window: the largest accepted configurations work at their edges",
          "[validation]") {
  for (const Limit& limit : {
           make_limit("edge", Algorithm::sliding_window, 1'779'199'852, kThirtyDays),
           make_limit("edge", Algorithm::sliding_window, kMaximumBound, 4'611'686),
           make_limit("edge", Algorithm::sliding_window, 1, kThirtyDays),
       }) {
    Edge edge(limit);
    // Counts of several times the maximum: count x period_ms is beyond 64 bits.
    work_at_the_edges(edge, limit.maximum, 3);
  }
}

TEST_CASE("sliding_window: periods of 31, 90, 365 and 366 days answer exactly", "[validation]") {
  // Regression: a sliding_window above 30 days was refused, because its usage was computed
  // with (prev % P) * rest, a product beyond 64 bits for periods above 35 days.
  for (const std::int64_t days : {31, 90, 365, 366}) {
    const std::int64_t period = days * kDay;
    CAPTURE(days);
    // Beside the reference model, with a small maximum and the largest one.
    for (const std::int64_t maximum : {std::int64_t{10}, kProductBound / period}) {
      CAPTURE(maximum);
      Edge edge(make_limit("edge", Algorithm::sliding_window, maximum, period));
      work_at_the_edges(edge, maximum, 3);
    }

    // By hand, 10 per period, in windows after today's date so that quota_usage reads the
    // state at its own time.
    TempDir dir;
    ManualClock clock;
    Engine engine = Engine::open(dir.file("quota.db"), options_with(clock));
    engine.define(make_limit("long", Algorithm::sliding_window, 10, period));
    const std::int64_t k = 4'100'000'000'000 / period + 1;
    const std::int64_t next = (k + 1) * period;  // the start of window k + 1
    clock.set(next - 1000);
    CHECK(engine.consume("long", "u", 10) == Result{true, Reason::ok, 0, 0, (k + 2) * period, 0});
    // At the next window's start the whole count still weighs: 10 x P / P. A unit fits when
    // 10 x (P - e) <= 9 x P, e = P / 10.
    clock.set(next);
    const Result denied = engine.consume("long", "u");
    CHECK(denied == Result{false, Reason::rate_limited, 0, period / 10, (k + 2) * period, 1});
    clock.set(next + period / 10 - 1);
    CHECK(engine.check("long", "u") ==
          Result{false, Reason::rate_limited, 0, 1, (k + 2) * period, 1});
    clock.set(next + period / 10);
    CHECK(engine.check("long", "u") == Result{true, Reason::ok, 1, 0, (k + 2) * period, 1});
    CHECK(engine.owner_usage("long", "u").used == 9);  // 10 x 0.9, rounded up

    // A count of P - 2 units (recorded beyond the maximum) weighs (P - 2) x (P - e) / P:
    // half the period into the next window, P / 2 - 1. (P - 2) x P / 2 is beyond 64 bits from
    // 36 days on, where floating point rounds it to P / 2.
    clock.set(next - 1);
    CHECK(engine.record("long", "big", period - 2).reason == Reason::cost_exceeds_capacity);
    clock.set(next + period / 2);
    const Result over = engine.consume("long", "big");
    CHECK(over.reason == Reason::rate_limited);
    // It fits when (P - 2) x (P - e) <= 9 x P: in the last 9 ms of this window.
    CHECK(over.retry_after_ms == period / 2 - 9);
    CHECK(engine.owner_usage("long", "big").used == period / 2 - 1);
    CHECK(
        RawDb(dir.file("quota.db"))
            .integer("SELECT used FROM quota_usage WHERE limit_name = 'long' AND owner = 'big'") ==
        period / 2 - 1);
    clock.set(next + period / 2 + over.retry_after_ms - 1);
    CHECK_FALSE(engine.check("long", "big").allowed);
    clock.set(next + period / 2 + over.retry_after_ms);
    CHECK(engine.check("long", "big").allowed);
  }
}

TEST_CASE("token_bucket: the largest accepted configurations work at their edges", "[validation]") {
  for (const Limit& limit : {
           make_bucket("edge", 72'918'026, k366Days),
           make_bucket("edge", 145'836'053, k366Days, 1),  // maximum x period <= 2^62
           make_bucket("edge", 1, k366Days, 72'918'026),
           make_bucket("edge", kMaximumBound, 2'305'843),
           make_bucket("edge", kMaximumBound, 4'611'686, 1),
           make_bucket("edge", 1, 33'554'432, 68'719'476'736),  // burst x period = 2^61
           make_bucket("edge", kMaximumBound, 1, 1),
           make_bucket("edge", 1, k366Days, 1),
       }) {
    Edge edge(limit);
    // Overdrafts of the whole capacity from an empty bucket, as deep as the engine keeps a
    // debt exactly (docs/concepts.md: a debt is floored at 2^62 units of tokens x period_ms, two
    // whole capacities of the largest bucket).
    work_at_the_edges(edge, limit.capacity(), 2);
  }
}

TEST_CASE("token_bucket: debts beyond what 64 bits hold saturate and stay consistent",
          "[validation]") {
  // A debt deeper than 2^62 units of tokens x period_ms is not kept exactly (docs/concepts.md), and
  // with the largest configurations three records of the capacity go that deep. Whatever the
  // engine keeps, its answers must stay in range and its waits tight.
  for (const Limit& limit : {
           make_bucket("deep", 72'918'026, k366Days),
           make_bucket("deep", 1, k366Days, 72'918'026),
           make_bucket("deep", kMaximumBound, 2'305'843),
           make_bucket("deep", 1, 33'554'432, 68'719'476'736),
       }) {
    CAPTURE(limit.maximum, limit.period.count(), limit.capacity());
    TempDir dir;
    ManualClock clock;
    Engine engine = Engine::open(dir.file("quota.db"), options_with(clock));
    engine.define(limit);
    const std::int64_t capacity = limit.capacity();
    CHECK(engine.record("deep", "u", capacity).allowed);
    for (int i = 0; i < 4; ++i) {
      const std::int64_t t = clock.get();
      const Result deeper = engine.record("deep", "u", capacity);
      CAPTURE(i, deeper);
      CHECK(deeper.reason == Reason::rate_limited);
      CHECK(deeper.remaining == 0);
      CHECK(deeper.retry_after_ms > 0);
      CHECK(deeper.reset_at_ms >= t + deeper.retry_after_ms);
      CHECK(engine.usage("deep").at(0).used > capacity);
      clock.set(t + deeper.retry_after_ms - 1);
      CHECK_FALSE(engine.check("deep", "u", capacity).allowed);
      clock.set(t + deeper.retry_after_ms);
      CHECK(engine.check("deep", "u", capacity).allowed);
      clock.set(t + 1);
    }
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
