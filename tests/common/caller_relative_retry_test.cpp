// retry_after_ms is measured from the caller's own time (docs/concepts.md, "Time"): a request
// whose time is behind the owner's remembered time t is evaluated at t, and a finite wait is
// the wait at t plus (t - its time), so that a host whose clock runs behind is told the true
// wait. 0 and -1 stay as they are; reset_at_ms is an instant, the same for every caller. On
// every backend, for every algorithm, a calendar limit and a block, through the library and
// through the statements a plain SQL client runs.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "backend.h"
#include "cli.h"
#include "model.h"
#include "statements.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

using detail::Operation;

constexpr std::int64_t T = 1'700'000'000'000;
constexpr std::int64_t kBehind = 300;  // how far the late caller's clock is behind

struct Case {
  Limit limit;
  detail::StatementKind kind;  // the statements' kind (src/statements.h)
};

std::vector<Case> every_kind() {
  std::vector<Case> cases;
  for (const Algorithm algorithm : kAllAlgorithms) {
    Limit limit = algorithm == Algorithm::token_bucket ? make_bucket("l", 2, 1000)
                                                       : make_limit("l", algorithm, 2, 1000);
    cases.push_back({limit, detail::kind_of(algorithm)});
  }
  cases.push_back({calendar_limit("l", 2, Calendar::day), detail::StatementKind::calendar_window});
  return cases;
}

TEST_CASE("a caller whose time is behind is told the wait from its own time", "[retry][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  for (const Case& c : every_kind()) {
    CAPTURE(detail::kind_name(c.kind));
    f.engine.remove("l");
    f.engine.define(c.limit);
    f.clock.set(T);
    REQUIRE(f.engine.consume("l", "u", 2).allowed);
    const Result at_latest = f.engine.check("l", "u");
    REQUIRE_FALSE(at_latest.allowed);
    REQUIRE(at_latest.retry_after_ms > 0);

    f.clock.set(T - kBehind);
    // check, consume (denied) and record (over) each answer the wait from T - kBehind.
    const Result checked = f.engine.check("l", "u");
    CHECK(checked.retry_after_ms == at_latest.retry_after_ms + kBehind);
    CHECK(checked.reset_at_ms == at_latest.reset_at_ms);
    const Result denied = f.engine.consume("l", "u");
    CHECK_FALSE(denied.allowed);
    CHECK(denied.retry_after_ms == at_latest.retry_after_ms + kBehind);
    CHECK(denied.reset_at_ms == at_latest.reset_at_ms);
    // The same statements run by a plain client of the database answer the same.
    const Result plain = f.raw.run(Operation::consume, c.kind, "l", "u", 1, T - kBehind);
    CHECK(plain.retry_after_ms == at_latest.retry_after_ms + kBehind);
    CHECK(f.raw.run(Operation::check, c.kind, "l", "u", 1, T - kBehind).retry_after_ms ==
          at_latest.retry_after_ms + kBehind);

    // Tight from the caller's time: one ms before the wait ends it is still denied, at its
    // end it is allowed.
    const std::int64_t allowed_at = T - kBehind + denied.retry_after_ms;
    f.clock.set(allowed_at - 1);
    CHECK_FALSE(f.engine.check("l", "u").allowed);
    f.clock.set(allowed_at);
    CHECK(f.engine.check("l", "u").allowed);

    // -1 (a cost beyond the capacity) and 0 (allowed) are not moved.
    f.clock.set(T - kBehind);
    CHECK(f.engine.check("l", "u", 3).retry_after_ms == -1);
    CHECK(f.engine.consume("l", "u", 3).retry_after_ms == -1);
    CHECK(f.engine.check("l", "v").retry_after_ms == 0);
    // A caller on time is told the wait at the latest time, as before.
    f.clock.set(T);
    CHECK(f.engine.check("l", "u").retry_after_ms == at_latest.retry_after_ms);
  }
}

TEST_CASE("a block's wait is counted from the caller's time, whether it starts or holds",
          "[retry][backends][lockout]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  Limit limit = make_limit("login", Algorithm::fixed_window, 1, 1000);
  limit.block = std::chrono::milliseconds(5000);
  f.engine.define(limit);
  f.clock.set(T);
  REQUIRE(f.engine.consume("login", "u").allowed);
  // A request from behind that starts the block: the block ends at T + 5000.
  f.clock.set(T - kBehind);
  const Result started = f.engine.consume("login", "u");
  CHECK(started.reason == Reason::rate_limited);
  CHECK(started.retry_after_ms == 5000 + kBehind);
  // While blocked: the block's end minus the caller's time.
  f.clock.set(T - 2 * kBehind);
  const Result blocked = f.engine.consume("login", "u");
  CHECK(blocked.reason == Reason::blocked);
  CHECK(blocked.retry_after_ms == 5000 + 2 * kBehind);
  CHECK(f.engine.check("login", "u").retry_after_ms == 5000 + 2 * kBehind);
  CHECK(f.raw.run(Operation::check, Algorithm::fixed_window, "login", "u", 1, T - 2 * kBehind)
            .retry_after_ms == 5000 + 2 * kBehind);
  f.clock.set(T + 5000 - 1);
  CHECK(f.engine.check("login", "u").reason == Reason::blocked);
  f.clock.set(T + 5000);
  CHECK(f.engine.check("login", "u").allowed);
}

TEST_CASE("consume_all decides by the waits from the caller's time", "[retry][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(make_limit("a", Algorithm::fixed_window, 1, 1000));
  f.engine.define(make_limit("b", Algorithm::fixed_window, 1, 1000));
  f.clock.set(T + 400);
  REQUIRE(f.engine.consume("a", "u").allowed);  // a's remembered time: T + 400
  f.clock.set(T);
  REQUIRE(f.engine.consume("b", "u").allowed);  // b's: T
  // Both windows end at T + 1000. From T - 100, a is evaluated at T + 400 and b at T, and
  // each says 1100: the wait from the caller's time, whatever time each limit remembers.
  f.clock.set(T - 100);
  const Decision decision = f.engine.consume_all({"a", "b"}, "u");
  CHECK_FALSE(decision.result.allowed);
  CHECK(decision.result.retry_after_ms == 1100);
}

TEST_CASE("quotactl counts the wait from its own --now, in the line and in usage",
          "[retry][backends][quotactl]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  Limit login = make_limit("login", Algorithm::fixed_window, 1, 60'000);
  login.block = std::chrono::hours(1);
  f.engine.define(login);
  const std::int64_t start = 1'767'225'600'000;  // 2026-01-01T00:00:00Z, a window's start
  f.clock.set(start);
  REQUIRE(f.engine.consume("login", "u").allowed);
  REQUIRE(f.engine.consume("login", "u").reason == Reason::rate_limited);  // blocked for 1 h
  const auto quotactl = [&](std::vector<std::string> args) {
    const QuotactlRun answer = run_quotactl_at(f.database.location(), start - 60'000, args);
    INFO(answer.err);
    return std::pair{answer.status, answer.out};
  };
  // A minute behind the owner's time: the block ends in 1 h 1 min by this clock.
  const auto [status, line] = quotactl({"consume", "login", "u"});
  CHECK(status == 1);
  CHECK(line.find("retry in 1h 1m (at 2026-01-01T01:00:00.000Z)") != std::string::npos);
  const auto [usage_status, table] = quotactl({"usage", "login"});
  CHECK(usage_status == 0);
  CHECK(table.find("1h 1m") != std::string::npos);
}

}  // namespace
}  // namespace quota::test
