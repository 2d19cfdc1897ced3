// Property tests: seeded random sequences of check/consume/record/reset (and redefinitions)
// run against the engine and the reference model of model.h; every field of every Result
// must agree, for all four algorithms. Small maxima (1-7) and periods (1-60 ms), so that most
// rates are fractional (7 per 60 ms, 3 per 7 ms); token buckets with a burst below, equal to
// or above the maximum; costs up to capacity + 1; time steps aimed at exact expiries, window
// ends and whole tokens (and 1 ms either side), standing still, long idle gaps, and jumps
// backwards, so that every boundary is hit many times; redefinitions of the maximum (and of
// a bucket's burst) that keep the state. A second kind of run takes numbers of every size up
// to the largest configurations accepted (products of up to 2^62), costs near what remains,
// and jumps of up to 2^40 ms, where the engine must avoid overflowing 64 bits.
//
// A failure prints the seed, the failing step and the history of that limit and owner.
// QUOTA_PROPERTY_SEED=<n> runs only that seed (add QUOTA_PROPERTY_STEPS=<n> to change the
// length), for reproducing a failure.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "model.h"
#include "support.h"

namespace quota::test {
namespace {

using Random = std::mt19937_64;

std::int64_t between(Random& random, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(random);
}

template <typename T>
const T& pick(Random& random, const std::vector<T>& items) {
  return items[static_cast<std::size_t>(between(random, 0, std::int64_t(items.size()) - 1))];
}

std::optional<std::uint64_t> environment_number(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  return std::strtoull(text, nullptr, 10);
}

// Small numbers (most rates fractional, boundaries hit often) or numbers of every size up to
// the largest configurations accepted.
enum class Scale { small, large };

constexpr std::int64_t k2To62 = std::int64_t{1} << 62;

// A number from 1 to `most`, of any order of magnitude (uniform in its bit length).
std::int64_t any_size(Random& random, std::int64_t most) {
  const std::int64_t bits = between(random, 0, 40);
  return between(random, 1, std::max<std::int64_t>(1, std::min(most, std::int64_t{1} << bits)));
}

// A token bucket's capacity: the maximum (no burst), at most the maximum, or more.
std::optional<std::int64_t> random_burst(Random& random, Scale scale, std::int64_t maximum,
                                         std::int64_t period_ms) {
  const std::int64_t most =
      scale == Scale::small ? 2 * maximum + 3 : std::min(kMaximumBound, kBucketBound / period_ms);
  switch (between(random, 0, 2)) {
    case 0:
      return std::nullopt;
    case 1:
      return between(random, 1, std::min(maximum, most));
    default:
      return between(random, std::min(maximum + 1, most), most);
  }
}

// The largest period the engine accepts for `maximum` (docs/concepts.md, 2^62 products; a
// bucket's burst, which defaults to its maximum, times its period at most 2^61).
std::int64_t longest_period(Algorithm algorithm, std::int64_t maximum) {
  switch (algorithm) {
    case Algorithm::sliding_window:
      return std::min(kPeriodBound.count(), k2To62 / maximum);
    case Algorithm::token_bucket:
      return std::min(kPeriodBound.count(), kBucketBound / maximum);
    default:
      return kPeriodBound.count();
  }
}

Limit random_limit(Random& random, Scale scale, const std::string& name, Algorithm algorithm) {
  Limit limit;
  limit.name = name;
  limit.algorithm = algorithm;
  if (scale == Scale::small) {
    limit.maximum = between(random, 1, 7);
    limit.period = std::chrono::milliseconds(between(random, 1, 60));
  } else {
    limit.maximum = any_size(random, kMaximumBound);
    limit.period =
        std::chrono::milliseconds(any_size(random, longest_period(algorithm, limit.maximum)));
  }
  if (algorithm == Algorithm::token_bucket) {
    limit.burst = random_burst(random, scale, limit.maximum, limit.period.count());
  }
  // A third of the limits lock an owner out after a denial (Limit::block).
  if (between(random, 0, 2) == 0) {
    limit.block = std::chrono::milliseconds(
        scale == Scale::small ? between(random, 1, 80) : any_size(random, kPeriodBound.count()));
  }
  return limit;
}

std::string describe(const Limit& limit) {
  std::ostringstream out;
  out << limit.name << " " << to_string(limit.algorithm) << " maximum=" << limit.maximum
      << " period_ms=" << limit.period.count();
  if (limit.burst) out << " burst=" << *limit.burst;
  if (limit.block) out << " block_ms=" << limit.block->count();
  return out.str();
}

// One step of a run, kept to explain a failure.
struct Step {
  int index;
  std::string limit;
  std::string owner;  // empty for steps that concern the whole limit
  std::string text;
};

class Run {
 public:
  // On SQLite, in memory; on PostgreSQL, in a schema of the test server of its own.
  Run(std::uint64_t seed, std::vector<Algorithm> algorithms, Scale scale,
      Backend backend = Backend::sqlite)
      : seed_(seed), random_(seed), algorithms_(std::move(algorithms)), scale_(scale) {
    base_ = 1'700'000'000'000 + between(random_, 0, 999);
    clock_.set(base_);
    if (backend == Backend::postgresql) {
      database_.emplace(backend);
      engine_.emplace(Engine::open(database_->location(), options_with(clock_)));
    } else {
      engine_.emplace(Engine::open(":memory:", options_with(clock_)));
    }
    for (std::size_t i = 0; i < algorithms_.size() * 2; ++i) {
      const Algorithm algorithm = algorithms_[i % algorithms_.size()];
      define(random_limit(random_, scale_,
                          std::string(to_string(algorithm)) + "." + std::to_string(i), algorithm));
      names_.push_back(history_.back().limit);
    }
  }

  // Runs `steps` operations; false (after reporting) at the first disagreement.
  bool run(int steps) {
    for (step_ = 0; step_ < steps; ++step_) {
      choose_pair();
      move_clock();
      if (!operate()) return false;
      if (step_ % 97 == 0 && !compare_usage()) return false;
    }
    return true;
  }

  // How often the run reached the situations it exists for; the test requires each.
  struct Coverage {
    int allowed = 0;            // consumes allowed
    int rate_limited = 0;       // consumes denied with a wait
    int cost_exceeds = 0;       // consumes denied for good
    int overdrawn = 0;          // records beyond the limit
    int on_boundary = 0;        // evaluated exactly when an event expired or a window began
    int beside_boundary = 0;    // ... or 1 ms before
    int clock_rule = 0;         // evaluated at a remembered time later than the request's
    int fresh_after_reset = 0;  // operations on a state just reset
  };
  const Coverage& coverage() const { return coverage_; }

 private:
  std::int64_t now() const { return clock_.get(); }

  void note(const std::string& limit, const std::string& owner, const std::string& text) {
    history_.push_back({step_, limit, owner, text});
  }

  void define(const Limit& limit) {
    engine_->define(limit);
    model_.define(limit);
    note(limit.name, "", "define " + describe(limit));
  }

  // Mostly the same limit and owner as the step before, so that one owner sees bursts of
  // requests within a period; sometimes any other.
  void choose_pair() {
    if (!limit_.empty() && between(random_, 0, 99) < 70) return;
    limit_ = pick(random_, names_);
    owner_ = pick(random_, owners_);
  }

  // Time stands still, moves by 1 or a few ms, lands on (or 1 ms beside) a moment at which the
  // owner's usage changes, waits everything out, or jumps back by less or more than a period.
  void move_clock() {
    const std::int64_t roll = between(random_, 0, 99);
    if (roll < 28) return;
    if (roll < 48) return clock_.advance(1);
    if (roll < 58) return clock_.advance(between(random_, 2, 10));
    if (roll < 85) {
      const auto changes = model_.changes_after(limit_, owner_, now());
      if (!changes.empty()) {
        const std::size_t which = static_cast<std::size_t>(
            between(random_, 0, std::min<std::int64_t>(2, std::int64_t(changes.size()) - 1)));
        return clock_.set(changes[which] + between(random_, -1, 1));
      }
      return clock_.advance(between(random_, 1, 10));
    }
    if (roll < 92) return clock_.advance(-between(random_, 1, 10));
    if (roll < 96) return clock_.advance(-between(random_, 30, 120));
    if (roll < 99) return clock_.advance(between(random_, 30, 120));
    // Long idle: a bucket's debt is paid off, windows are forgotten.
    clock_.advance(scale_ == Scale::small ? between(random_, 500, 20'000)
                                          : any_size(random_, std::int64_t{1} << 40));
  }

  // Any cost up to capacity + 1; with large numbers, often one near what remains (where the
  // decision is close) or a small one.
  std::int64_t random_cost(const std::string& limit, const std::string& owner, const Limit& rule) {
    const std::int64_t most = rule.capacity() + 1;
    if (scale_ == Scale::small || between(random_, 0, 3) == 0) return between(random_, 1, most);
    if (between(random_, 0, 2) == 0) return between(random_, 1, std::min<std::int64_t>(3, most));
    const std::int64_t left = model_.check(limit, owner, 1, now()).remaining;
    return std::clamp<std::int64_t>(left + between(random_, -2, 2), 1, most);
  }

  // docs/concepts.md: a bucket's debt saturates at 2^62 units of tokens x period_ms; three records
  // of a large configuration's capacity can reach that. The model keeps debts exactly, so
  // large runs record no deeper than that: at most this cost (used = capacity - floor(level /
  // P), so level >= (capacity - used) * P).
  std::int64_t deepest_record(const std::string& limit, const std::string& owner,
                              const Limit& rule) const {
    std::int64_t used = 0;
    for (const Usage& row : model_.usage(limit, now())) {
      if (row.owner == owner) used = row.used;
    }
    return rule.capacity() - used + k2To62 / rule.period.count();
  }

  void count_situation() {
    const std::int64_t t = model_.evaluation_time(limit_, owner_, now());
    if (t > now()) ++coverage_.clock_rule;
    for (const std::int64_t change : model_.changes_after(limit_, owner_, t - 2)) {
      if (change == t) ++coverage_.on_boundary;
      if (change == t + 1) ++coverage_.beside_boundary;
    }
  }

  bool operate() {
    const std::string& limit = limit_;
    const std::string& owner = owner_;
    const Limit& rule = model_.limit(limit);
    std::int64_t cost = random_cost(limit, owner, rule);
    const std::int64_t roll = between(random_, 0, 999);
    count_situation();
    if (just_reset_ == std::make_pair(limit, owner)) ++coverage_.fresh_after_reset;
    just_reset_ = {};
    if (roll < 300) {
      return compare("check", limit, owner, cost, engine_->check(limit, owner, cost),
                     model_.check(limit, owner, cost, now()));
    }
    if (roll < 720) {
      const Result expected = model_.consume(limit, owner, cost, now());
      if (expected.allowed) ++coverage_.allowed;
      if (expected.reason == Reason::rate_limited) ++coverage_.rate_limited;
      if (expected.reason == Reason::cost_exceeds_capacity) ++coverage_.cost_exceeds;
      if (!expected.allowed && expected.retry_after_ms > 0 &&
          !retry_is_tight(limit, owner, cost, expected)) {
        return false;
      }
      return compare("consume", limit, owner, cost, engine_->consume(limit, owner, cost), expected);
    }
    if (roll < 900) {
      if (scale_ == Scale::large && rule.algorithm == Algorithm::token_bucket) {
        cost = std::min(cost, deepest_record(limit, owner, rule));
        if (cost < 1) return true;
      }
      const Result expected = model_.record(limit, owner, cost, now());
      if (!expected.allowed) ++coverage_.overdrawn;
      return compare("record", limit, owner, cost, engine_->record(limit, owner, cost), expected);
    }
    if (roll < 960) {
      just_reset_ = {limit, owner};
      return compare("reset", limit, owner, 0, engine_->reset(limit, owner),
                     model_.reset(limit, owner, now()));
    }
    if (roll < 985) {
      // Same algorithm, new maximum (a bucket: and perhaps a new burst): the state stays and
      // the new numbers apply, a bucket's level clamped to its new capacity. (Not the period:
      // windows and a bucket's level cannot be carried across a change of period exactly.)
      Limit changed = rule;
      const std::int64_t period = rule.period.count();
      const bool multiplies =
          rule.algorithm == Algorithm::sliding_window || rule.algorithm == Algorithm::token_bucket;
      changed.maximum =
          scale_ == Scale::small
              ? between(random_, 1, 7)
              : any_size(random_, multiplies ? std::min(kMaximumBound,
                                                        (rule.algorithm == Algorithm::token_bucket
                                                             ? kBucketBound
                                                             : k2To62) /
                                                            period)
                                             : kMaximumBound);
      if (rule.algorithm == Algorithm::token_bucket && between(random_, 0, 1) == 1) {
        changed.burst = random_burst(random_, scale_, changed.maximum, period);
      }
      define(changed);
      return true;
    }
    if (roll < 995) {
      // Another algorithm (or the same one, when the run has one): the state goes.
      const Algorithm algorithm = pick(random_, algorithms_);
      if (algorithm == rule.algorithm) {
        REQUIRE(engine_->remove(limit));
        REQUIRE(model_.remove(limit));
        note(limit, "", "remove");
      }
      define(random_limit(random_, scale_, limit, algorithm));
      return true;
    }
    return compare_usage();
  }

  // The model's own promise, checked before trusting it: after a denial with wait d for a
  // request at t (the caller's time, perhaps behind the owner's remembered time), the same
  // request is still denied at t + d - 1 and allowed at t + d.
  bool retry_is_tight(const std::string& limit, const std::string& owner, std::int64_t cost,
                      const Result& denial) {
    const std::int64_t t = now();
    const Result before = model_.check(limit, owner, cost, t + denial.retry_after_ms - 1);
    const Result at = model_.check(limit, owner, cost, t + denial.retry_after_ms);
    if (!before.allowed && at.allowed) return true;
    report("the MODEL's retry_after_ms is not tight", "consume", limit, owner, cost, denial,
           denial);
    return false;
  }

  bool compare(const char* operation, const std::string& limit, const std::string& owner,
               std::int64_t cost, const Result& actual, const Result& expected) {
    std::ostringstream text;
    text << "now=" << now() - base_ << " " << operation << " " << owner;
    if (cost > 0) text << " cost=" << cost;
    text << " -> " << relative(expected);
    note(limit, owner, text.str());
    if (actual == expected) return true;
    report("engine and model disagree", operation, limit, owner, cost, actual, expected);
    return false;
  }

  bool compare_usage() {
    const std::string& limit = pick(random_, names_);
    const auto actual = engine_->usage(limit);
    const auto expected = model_.usage(limit, now());
    if (same_usage(actual, expected)) return true;
    std::ostringstream message;
    message << "usage(" << limit << ") at now=" << now() - base_ << " disagrees (seed " << seed_
            << ", step " << step_ << ")\n";
    for (const auto* rows : {&actual, &expected}) {
      message << (rows == &actual ? " engine:" : " model:") << "\n";
      for (const Usage& row : *rows) {
        message << "  " << row.owner << " used=" << row.used << " remaining=" << row.remaining
                << " denied=" << row.denied << " reset_at_ms=" << row.reset_at_ms - base_ << "\n";
      }
    }
    append_history(message, limit, std::nullopt);
    FAIL(message.str());
    return false;
  }

  void report(const char* what, const char* operation, const std::string& limit,
              const std::string& owner, std::int64_t cost, const Result& actual,
              const Result& expected) {
    std::ostringstream message;
    message << what << " (seed " << seed_ << ", step " << step_ << ", times relative to " << base_
            << ")\n"
            << " " << operation << " " << limit << " " << owner << " cost=" << cost
            << " now=" << now() - base_ << "\n"
            << " engine: " << relative(actual) << "\n"
            << " model:  " << relative(expected) << "\n"
            << " rerun: QUOTA_PROPERTY_SEED=" << seed_ << "\n";
    append_history(message, limit, owner);
    FAIL(message.str());
  }

  Result relative(Result result) const {
    result.reset_at_ms -= base_;
    return result;
  }

  void append_history(std::ostringstream& message, const std::string& limit,
                      const std::optional<std::string>& owner) const {
    std::vector<const Step*> relevant;
    for (const Step& step : history_) {
      if (step.limit != limit) continue;
      if (owner && !step.owner.empty() && step.owner != *owner) continue;
      relevant.push_back(&step);
    }
    constexpr std::size_t kShown = 150;  // the latest steps; the rest is one rerun away
    const std::size_t first = relevant.size() > kShown ? relevant.size() - kShown : 0;
    message << " history of " << limit << (owner ? " / " + *owner : std::string());
    if (first > 0) message << " (the last " << kShown << " of " << relevant.size() << " steps)";
    message << ":\n";
    for (std::size_t i = first; i < relevant.size(); ++i) {
      message << "  #" << relevant[i]->index << " " << relevant[i]->text << "\n";
    }
  }

  std::uint64_t seed_;
  Random random_;
  std::vector<Algorithm> algorithms_;
  Scale scale_;
  std::int64_t base_ = 0;
  ManualClock clock_;
  std::optional<TestDatabase> database_;  // destroyed after the engine
  std::optional<Engine> engine_;
  Model model_;
  std::vector<std::string> names_;
  std::vector<std::string> owners_ = {"u1", "u2", "\u00FC3"};  // "ü3": UTF-8, 2 bytes + 1
  std::vector<Step> history_;
  int step_ = 0;
  std::string limit_, owner_;  // the pair this step works on
  std::pair<std::string, std::string> just_reset_;
  Coverage coverage_;
};

// Four seeds on SQLite; on PostgreSQL, where each step is a round trip to the server, one.
void run_seeds(const std::vector<Algorithm>& algorithms, std::uint64_t first_seed,
               Scale scale = Scale::small, Backend backend = Backend::sqlite) {
  const int steps = static_cast<int>(environment_number("QUOTA_PROPERTY_STEPS").value_or(3000));
  std::vector<std::uint64_t> seeds;
  if (const auto only = environment_number("QUOTA_PROPERTY_SEED")) {
    seeds.push_back(*only);
  } else {
    const std::uint64_t count = std::uint64_t(property_seeds(backend == Backend::sqlite ? 4 : 1));
    for (std::uint64_t i = 0; i < count; ++i) seeds.push_back(first_seed + i);
  }
  for (const std::uint64_t seed : seeds) {
    Run run(seed, algorithms, scale, backend);
    const bool agreed = run.run(steps);
    CHECK(agreed);
    if (!agreed) break;
    // The generator must keep reaching the cases it exists for (at the default length).
    if (steps < 3000) continue;
    const auto& covered = run.coverage();
    INFO("seed " << seed);
    CHECK(covered.allowed > 300);
    CHECK(covered.rate_limited > 100);
    CHECK(covered.cost_exceeds > 50);
    CHECK(covered.overdrawn > 50);
    CHECK(covered.on_boundary > 100);
    CHECK(covered.beside_boundary > 100);
    CHECK(covered.clock_rule > 50);
    CHECK(covered.fresh_after_reset > 20);
  }
}

TEST_CASE("sliding_log: the engine matches the reference model", "[property]") {
  run_seeds({Algorithm::sliding_log}, 1000);
}

TEST_CASE("fixed_window: the engine matches the reference model", "[property]") {
  run_seeds({Algorithm::fixed_window}, 2000);
}

TEST_CASE("sliding_window: the engine matches the reference model", "[property]") {
  run_seeds({Algorithm::sliding_window}, 4000);
}

TEST_CASE("token_bucket: the engine matches the reference model", "[property]") {
  run_seeds({Algorithm::token_bucket}, 5000);
}

TEST_CASE("mixed limits, owners and algorithm changes: the engine matches the model",
          "[property]") {
  run_seeds({Algorithm::sliding_log, Algorithm::fixed_window, Algorithm::sliding_window,
             Algorithm::token_bucket},
            3000);
}

TEST_CASE("numbers of every size up to the largest accepted: the engine matches the model",
          "[property]") {
  run_seeds({Algorithm::sliding_log, Algorithm::fixed_window, Algorithm::sliding_window,
             Algorithm::token_bucket},
            6000, Scale::large);
}

#if QUOTA_HAS_POSTGRESQL
TEST_CASE("on PostgreSQL, every algorithm matches the reference model", "[property][postgresql]") {
  const Algorithm algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                       Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(algorithm);
  run_seeds({algorithm}, 7000 + static_cast<std::uint64_t>(algorithm), Scale::small,
            Backend::postgresql);
}

TEST_CASE("on PostgreSQL, mixed limits and numbers of every size match the reference model",
          "[property][postgresql]") {
  run_seeds({Algorithm::sliding_log, Algorithm::fixed_window, Algorithm::sliding_window,
             Algorithm::token_bucket},
            8000, Scale::large, Backend::postgresql);
}
#endif

}  // namespace
}  // namespace quota::test
