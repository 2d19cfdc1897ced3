// gc on SQLite files: inside the application's own transaction, and the central test, which
// runs random operations on two files, one of which is collected at random moments, and
// requires every answer of the two to be equal. What holds on every backend (what gc deletes,
// batches, quotactl gc) is in tests/common/gc_test.cpp.
#include <SQLiteCpp/Database.h>

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "backend.h"
#include "model.h"
#include "quota/sqlite.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kBase = 1'700'000'000'000;  // a multiple of 1000: a 1 s window starts

TEST_CASE("gc inside the application's SQLite transaction commits or rolls back with it",
          "[gc][sqlite]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  ManualClock clock;
  clock.set(kBase);
  Engine engine = quota::sqlite::attach(db, options_with(clock));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  for (int i = 0; i < 20; ++i) engine.consume("win", "dead" + std::to_string(i));
  clock.set(kBase + 1000);  // every window is over

  db.exec("BEGIN");
  CHECK(engine.gc(3) == 20);
  CHECK(db.execAndGet("SELECT count(*) FROM quota_windows").getInt64() == 0);
  db.exec("ROLLBACK");
  CHECK(db.execAndGet("SELECT count(*) FROM quota_windows").getInt64() == 20);

  db.exec("BEGIN");
  CHECK(engine.gc(3) == 20);
  db.exec("COMMIT");
  CHECK(RawDb(path).integer("SELECT count(*) FROM quota_windows") == 0);
}

// --- gc never changes an answer --------------------------------------------------------------

// The rules of src/gc.cpp restated over a snapshot of the tables, to know exactly which rows
// a gc at `now` must delete.
struct Snapshot {
  struct LimitRow {
    std::string algorithm;
    std::int64_t period_ms;
    std::int64_t maximum = 0;
    std::int64_t burst = 0;  // token_bucket only
  };
  struct OwnerRow {
    std::optional<std::int64_t> window_key, period_ms, used, denied, seen_ms;
    std::optional<std::int64_t> previous_used, level;
  };
  std::map<std::string, LimitRow> limits;
  std::map<std::pair<std::string, std::string>, OwnerRow> log_owners, windows, buckets;
  std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> events;

  static std::optional<std::int64_t> number(const std::string& text) {
    if (text == "NULL") return std::nullopt;
    return std::stoll(text);
  }

  explicit Snapshot(RawDb& db) {
    for (const auto& row :
         db.rows("SELECT name, algorithm, period_ms, maximum, burst FROM quota_limits")) {
      limits[row[0]] = {row[1], std::stoll(row[2]), std::stoll(row[3]), number(row[4]).value_or(0)};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, denied, seen_ms FROM "
                                   "quota_log_owners")) {
      log_owners[{row[0], row[1]}] = {std::nullopt,   std::nullopt, std::nullopt, number(row[2]),
                                      number(row[3]), std::nullopt, std::nullopt};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, window_key, period_ms, used, "
                                   "denied, seen_ms, previous_used FROM quota_windows")) {
      windows[{row[0], row[1]}] = {number(row[2]), number(row[3]), number(row[4]), number(row[5]),
                                   number(row[6]), number(row[7]), std::nullopt};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, period_ms, denied, seen_ms, level "
                                   "FROM quota_buckets")) {
      buckets[{row[0], row[1]}] = {std::nullopt,   number(row[2]), std::nullopt,  number(row[3]),
                                   number(row[4]), std::nullopt,   number(row[5])};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, at_ms FROM quota_log")) {
      events[{row[0], row[1]}].push_back(std::stoll(row[2]));
    }
  }

  // The state keys (as state_keys() writes them) that a gc at `now` deletes.
  std::set<std::string> dead_at(std::int64_t now) const {
    std::set<std::string> dead;
    for (const auto& [key, times] : events) {
      const auto limit = limits.find(key.first);
      const auto owner = log_owners.find(key);
      for (const std::int64_t at : times) {
        bool gone = limit == limits.end();
        if (!gone && limit->second.algorithm == "sliding_log") {
          gone = owner == log_owners.end() ||
                 at <= std::max(now, owner->second.seen_ms.value_or(0)) - limit->second.period_ms;
        }
        if (gone)
          dead.insert("quota_log|" + key.first + "|" + key.second + "|" + std::to_string(at));
      }
    }
    for (const auto& [key, row] : log_owners) {
      const auto limit = limits.find(key.first);
      bool events_left = false;
      const auto owned = events.find(key);
      if (owned != events.end()) {
        for (const std::int64_t at : owned->second) {
          events_left |=
              !dead.count("quota_log|" + key.first + "|" + key.second + "|" + std::to_string(at));
        }
      }
      const bool unused = limit != limits.end() && limit->second.algorithm == "sliding_log" &&
                          row.denied.value_or(0) == 0 && row.seen_ms.value_or(0) <= now;
      if (!events_left && (limit == limits.end() || unused)) {
        dead.insert("quota_log_owners|" + key.first + "|" + key.second);
      }
    }
    for (const auto& [key, row] : windows) {
      const auto limit = limits.find(key.first);
      bool gone = limit == limits.end();
      if (!gone && row.denied.value_or(0) == 0 && row.seen_ms.value_or(0) <= now) {
        const std::int64_t period = limit->second.period_ms;
        const std::int64_t row_key =
            row.period_ms == period ? *row.window_key : *row.seen_ms / period;
        const bool used_over = row.used.value_or(0) == 0 || row_key < now / period;
        if (limit->second.algorithm == "fixed_window") gone = used_over;
        if (limit->second.algorithm == "sliding_window") {
          // used also weighs while its window is the previous one; previous_used only in it.
          gone = (row.used.value_or(0) == 0 || row_key + 1 < now / period) &&
                 (row.previous_used.value_or(0) == 0 || row_key < now / period);
        }
      }
      if (gone) dead.insert("quota_windows|" + key.first + "|" + key.second);
    }
    for (const auto& [key, row] : buckets) {
      const auto limit = limits.find(key.first);
      bool gone = limit == limits.end();
      if (!gone && limit->second.algorithm == "token_bucket" && row.denied.value_or(0) == 0 &&
          row.seen_ms.value_or(0) <= now) {
        // Full at now: the stored level, read under the limit as it is, refilled to now.
        const std::int64_t period = limit->second.period_ms;
        const Wide full = Wide{limit->second.burst} * period;
        Wide level = *row.level;
        if (*row.period_ms != period) {
          const std::int64_t old = *row.period_ms;
          const std::int64_t tokens =
              *row.level >= 0 ? *row.level / old : -((old - 1 - *row.level) / old);
          level = Wide{tokens} * period;
        }
        level = std::min(level, full) + Wide{limit->second.maximum} * (now - *row.seen_ms);
        gone = level >= full;
      }
      if (gone) dead.insert("quota_buckets|" + key.first + "|" + key.second);
    }
    return dead;
  }
};

using Random = std::mt19937_64;

constexpr std::array<Algorithm, 4> kAlgorithms{Algorithm::sliding_log, Algorithm::fixed_window,
                                               Algorithm::sliding_window, Algorithm::token_bucket};

std::int64_t between(Random& random, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(random);
}

// Two databases given the same operations at the same times; `collected` is also collected
// at random moments (which the clock then never goes back behind), `kept` never.
class TwinRun {
 public:
  explicit TwinRun(std::uint64_t seed) : seed_(seed), random_(seed) {
    clock_.set(kBase);
    collected_.emplace(Engine::open(collected_path_, options_with(clock_)));
    inspector_.emplace(collected_path_);
    kept_.emplace(Engine::open(kept_path_, options_with(clock_)));
    for (int i = 0; i < 8; ++i) {
      const Algorithm algorithm = kAlgorithms[i % kAlgorithms.size()];
      Limit limit = make_limit("limit" + std::to_string(i), algorithm, between(random_, 1, 5),
                               between(random_, 1, 50));
      if (algorithm == Algorithm::token_bucket) limit.burst = between(random_, 1, 7);
      define(limit);
    }
  }

  struct Coverage {
    int gcs = 0;
    int batched = 0;            // gcs of more than one batch
    std::int64_t events = 0;    // deleted events
    std::int64_t owners = 0;    // deleted owners, both tables
    std::int64_t behind = 0;    // gcs whose now is behind an owner's remembered time
    std::int64_t compared = 0;  // answers compared
  };

  void run(int steps) {
    for (step_ = 0; step_ < steps; ++step_) {
      move_clock();
      operate();
    }
    finish();
  }

  const Coverage& coverage() const { return coverage_; }

 private:
  std::int64_t now() const { return clock_.get(); }

  void define(const Limit& limit) {
    collected_->define(limit);
    kept_->define(limit);
    limits_[limit.name] = limit;
    log("define " + limit.name + " " + std::string(to_string(limit.algorithm)) + " max " +
        std::to_string(limit.maximum) + " per " + std::to_string(limit.period.count()));
  }

  void log(const std::string& text) {
    history_.push_back("#" + std::to_string(step_) + " t=" + std::to_string(now() - kBase) + " " +
                       text);
  }

  std::string history() const {
    std::ostringstream out;
    out << "seed " << seed_ << ", step " << step_ << "; the last steps:\n";
    const std::size_t first = history_.size() > 60 ? history_.size() - 60 : 0;
    for (std::size_t i = first; i < history_.size(); ++i) out << "  " << history_[i] << "\n";
    return out.str();
  }

  // Small steps, jumps to period ends and beyond, and jumps back, but never behind the
  // latest gc.
  void move_clock() {
    const std::int64_t roll = between(random_, 0, 99);
    std::int64_t next = now();
    if (roll < 25) {
      next += 0;
    } else if (roll < 55) {
      next += between(random_, 1, 10);
    } else if (roll < 75) {
      next += between(random_, 11, 60);
    } else if (roll < 80) {
      next += between(random_, 61, 200);
    } else {
      next -= between(random_, 1, 80);
    }
    clock_.set(std::max(next, floor_));
  }

  void compare(const std::string& what, const Result& collected, const Result& kept) {
    ++coverage_.compared;
    log(what + " -> " + describe(kept));
    if (collected == kept) return;
    FAIL("answers differ after gc: " << what << "\n with gc:    " << describe(collected)
                                     << "\n without gc: " << describe(kept) << "\n"
                                     << history());
  }

  static std::string describe(const Result& result) {
    std::ostringstream out;
    out << result;
    return out.str();
  }

  void compare_usage() {
    for (const auto& [name, limit] : limits_) {
      const auto collected = collected_->usage(name);
      const auto kept = kept_->usage(name);
      bool same = collected.size() == kept.size();
      for (std::size_t i = 0; same && i < kept.size(); ++i) {
        same = collected[i].owner == kept[i].owner && collected[i].used == kept[i].used &&
               collected[i].remaining == kept[i].remaining &&
               collected[i].denied == kept[i].denied &&
               collected[i].reset_at_ms == kept[i].reset_at_ms;
      }
      ++coverage_.compared;
      if (!same) FAIL("usage(" << name << ") differs after gc\n" << history());
    }
  }

  void operate() {
    const auto pick = std::next(limits_.begin(), between(random_, 0, 3));
    const std::string& name = pick->first;
    const Limit& limit = pick->second;
    const std::string owner = "u" + std::to_string(between(random_, 1, 4));
    const std::int64_t cost = between(random_, 1, limit.maximum + 1);
    const std::string request = name + " " + owner + " cost " + std::to_string(cost);
    const std::int64_t roll = between(random_, 0, 999);
    if (roll < 250) {
      compare("check " + request, collected_->check(name, owner, cost),
              kept_->check(name, owner, cost));
    } else if (roll < 600) {
      compare("consume " + request, collected_->consume(name, owner, cost),
              kept_->consume(name, owner, cost));
    } else if (roll < 750) {
      compare("record " + request, collected_->record(name, owner, cost),
              kept_->record(name, owner, cost));
    } else if (roll < 780) {
      compare("reset " + name + " " + owner, collected_->reset(name, owner),
              kept_->reset(name, owner));
    } else if (roll < 800) {
      Limit changed = limit;
      changed.maximum = between(random_, 1, 5);  // a new period would re-read the state
      define(changed);
    } else if (roll < 810) {
      Limit changed = limit;
      changed.algorithm = kAlgorithms[between(random_, 0, kAlgorithms.size() - 1)];
      changed.burst.reset();
      if (changed.algorithm == Algorithm::token_bucket) changed.burst = between(random_, 1, 7);
      define(changed);  // another algorithm discards the limit's state in both
    } else if (roll < 850) {
      compare_usage();
    } else {
      collect();
    }
  }

  void collect() {
    const Snapshot before(*inspector_);
    const std::set<std::string> expected_dead = before.dead_at(now());
    for (const auto& table : {&before.log_owners, &before.windows, &before.buckets}) {
      for (const auto& [key, row] : *table) coverage_.behind += row.seen_ms.value_or(0) > now();
    }
    const std::set<std::string> keys_before = state_keys(*inspector_);
    const std::size_t batch_rows = static_cast<std::size_t>(between(random_, 1, 8));
    int batches = 0;
    const std::int64_t deleted = collected_->gc(batch_rows, [&](const GcProgress&) { ++batches; });
    const std::set<std::string> keys_after = state_keys(*inspector_);
    log("gc batch_rows " + std::to_string(batch_rows) + " -> " + std::to_string(deleted));

    std::set<std::string> gone;
    for (const std::string& key : keys_before) {
      if (!keys_after.count(key)) gone.insert(key);
    }
    INFO(history());
    CHECK(keys_after.size() + gone.size() == keys_before.size());
    CHECK(gone == expected_dead);
    CHECK(deleted == static_cast<std::int64_t>(gone.size()));
    for (const std::string& key : gone) {
      (key.rfind("quota_log|", 0) == 0 ? coverage_.events : coverage_.owners) += 1;
    }
    ++coverage_.gcs;
    coverage_.batched += batches > 1;
    floor_ = now();
    compare_usage();
  }

  // Everything expires: every row left must hold a denial, and the answers still agree.
  void finish() {
    clock_.set(now() + 1000);
    compare_usage();
    collect();
    RawDb db(collected_path_);
    CHECK(db.integer("SELECT count(*) FROM quota_log") == 0);
    CHECK(db.integer("SELECT count(*) FROM quota_log_owners WHERE denied = 0") == 0);
    CHECK(db.integer("SELECT count(*) FROM quota_windows WHERE denied = 0") == 0);
    for (const auto& [name, limit] : limits_) {
      for (int i = 1; i <= 4; ++i) {
        const std::string owner = "u" + std::to_string(i);
        compare("final check " + name + " " + owner, collected_->check(name, owner),
                kept_->check(name, owner));
      }
    }
    // The view that SQL clients read agrees too (but for reset_at, which it takes from the
    // database's clock: nothing is in use, so it is that clock's now).
    const char* view =
        "SELECT limit_name, owner, used, remaining, denied FROM quota_usage "
        "ORDER BY limit_name, owner";
    CHECK(RawDb(collected_path_).rows(view) == RawDb(kept_path_).rows(view));
  }

  std::uint64_t seed_;
  Random random_;
  TempDir dir_;
  std::string collected_path_ = dir_.file("collected.db");
  std::string kept_path_ = dir_.file("kept.db");
  ManualClock clock_;
  std::optional<Engine> collected_, kept_;
  std::optional<RawDb> inspector_;  // reads collected's tables
  std::map<std::string, Limit> limits_;
  std::int64_t floor_ = kBase;  // the latest gc's now: the clock never goes back behind it
  std::vector<std::string> history_;
  int step_ = 0;
  Coverage coverage_;
};

TEST_CASE("gc never changes an answer: random operations on two SQLite files",
          "[gc][property][sqlite]") {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    TwinRun run(seed);
    run.run(1000);
    const auto& covered = run.coverage();
    INFO("seed " << seed);
    CHECK(covered.gcs > 100);
    CHECK(covered.batched > 100);
    CHECK(covered.events > 50);
    CHECK(covered.owners > 50);
    CHECK(covered.behind > 50);
    CHECK(covered.compared > 1000);
  }
}

}  // namespace
}  // namespace quota::test
