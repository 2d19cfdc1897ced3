// gc (Engine::gc and `quotactl gc`): it deletes what it should, in batches, and never changes
// an answer. The central test runs random operations on two databases, one of which is
// collected at random moments, and requires every answer of the two to be equal.
#include <SQLiteCpp/Database.h>

#include <catch2/catch.hpp>

#include <array>
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

#include "cli.h"
#include "model.h"
#include "quota/sqlite.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kBase = 1'700'000'000'000;  // a multiple of 1000: a 1 s window starts

std::int64_t count(const std::string& path, const std::string& table) {
  return RawDb(path).integer("SELECT count(*) FROM " + table);
}

// Every state row's key, "table|limit|owner[|at_ms]", to compare sets of rows.
std::set<std::string> state_keys(RawDb& db) {
  std::set<std::string> keys;
  for (const auto& row : db.rows("SELECT limit_name, owner, at_ms FROM quota_log")) {
    keys.insert("quota_log|" + row[0] + "|" + row[1] + "|" + row[2]);
  }
  for (const char* table : {"quota_log_owners", "quota_windows", "quota_buckets"}) {
    for (const auto& row : db.rows(std::string("SELECT limit_name, owner FROM ") + table)) {
      keys.insert(std::string(table) + "|" + row[0] + "|" + row[1]);
    }
  }
  return keys;
}

std::set<std::string> state_keys(const std::string& path) {
  RawDb db(path);
  return state_keys(db);
}

// --- what gc deletes ------------------------------------------------------------------------

TEST_CASE("gc: the examples of src/gc.cpp", "[gc]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  Engine engine = Engine::open(path, options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  const auto at = [&](std::int64_t ms) { clock.set(kBase + ms); };

  at(9400);
  engine.consume("log", "u");
  at(9600);
  engine.consume("log", "u");
  at(9000);
  engine.consume("log", "v");
  engine.consume("log", "w");
  CHECK_FALSE(engine.consume("log", "w", 6).allowed);
  CHECK_FALSE(engine.consume("log", "w", 6).allowed);
  at(9999);
  engine.consume("win", "u", 3);
  at(10000);
  engine.consume("win", "v");

  at(10500);
  CHECK(engine.gc() == 5);
  CHECK(state_keys(path) == std::set<std::string>{
                                "quota_log|log|u|" + std::to_string(kBase + 9600),
                                "quota_log_owners|log|u",
                                "quota_log_owners|log|w",
                                "quota_windows|win|v",
                            });
  CHECK(engine.check("log", "w").denied == 2);
  CHECK(engine.check("log", "u").remaining == 4);
  CHECK(engine.gc() == 0);
}

TEST_CASE("gc keeps what still counts and deletes what is left over", "[gc]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  clock.set(kBase);
  Engine engine = Engine::open(path, options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));

  SECTION("an event expires exactly period_ms after it: at now - period_ms it goes") {
    engine.consume("log", "u");
    clock.set(kBase + 999);
    CHECK(engine.gc() == 0);
    clock.set(kBase + 1000);
    CHECK(engine.gc() == 2);  // the event, then the owner
  }
  SECTION("a window goes when the next one begins") {
    clock.set(kBase + 999);
    engine.consume("win", "u");
    CHECK(engine.gc() == 0);
    clock.set(kBase + 1000);
    CHECK(engine.gc() == 1);
  }
  SECTION("a row remembering a time after now stays (the clock rule needs it)") {
    RawDb(path).exec(
        "INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, recorded, "
        "denied, seen_ms) VALUES ('log', 'later', 5, 1000, 0, 0, 0, " +
        std::to_string(kBase + 1) +
        ");"
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used, "
        "previous_used, denied, seen_ms) VALUES ('win', 'later', 5, 1000, 0, 0, 0, 0, " +
        std::to_string(kBase + 1) + ")");
    CHECK(engine.gc() == 0);
    clock.set(kBase + 1);
    CHECK(engine.gc() == 2);
  }
  SECTION("rows of a limit that does not exist, and events without their owner's row") {
    RawDb(path).exec(
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, window_key, used, "
        "previous_used, denied, seen_ms) VALUES ('gone', 'u', 5, 1000, 1700000000, 5, 0, 3, "
        "1700000000000);"
        "INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, recorded, "
        "denied, seen_ms) VALUES ('gone', 'u', 5, 1000, 1, 1, 3, 1700000000000);"
        "INSERT INTO quota_log (limit_name, owner, at_ms, cost, total) VALUES "
        "('gone', 'u', 1700000000000, 1, 1), ('log', 'nobody', 1700000000000, 1, 1)");
    CHECK(engine.gc() == 4);
    CHECK(state_keys(path).empty());
  }
  SECTION("a window written under another period counts in the window that holds seen_ms") {
    // Written under a period of 1 minute, the row's window_key is that minute; under the new
    // period of 1 s it counts in the second that holds seen_ms, which is still now.
    engine.define(make_limit("win", Algorithm::fixed_window, 5, 60'000));
    clock.set(kBase + 10'400);
    engine.consume("win", "u");
    engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
    clock.set(kBase + 10'999);
    CHECK(engine.gc() == 0);
    CHECK(engine.check("win", "u").remaining == 4);
    clock.set(kBase + 11'000);
    CHECK(engine.gc() == 1);
  }
  SECTION("a sliding window's count weighs for two windows") {
    engine.define(make_limit("weighted", Algorithm::sliding_window, 5, 1000));
    clock.set(kBase + 10'400);
    engine.consume("weighted", "u");
    clock.set(kBase + 11'999);  // window 11: u's count is the previous window's, still weighed
    CHECK(engine.gc() == 0);
    CHECK(engine.check("weighted", "u").remaining == 4);
    clock.set(kBase + 12'000);
    CHECK(engine.gc() == 1);
    CHECK(count(path, "quota_windows") == 0);
  }
  SECTION("a token bucket goes when it is full again") {
    Limit bucket = make_limit("bucket", Algorithm::token_bucket, 2, 1000);
    bucket.burst = 3;
    engine.define(bucket);
    clock.set(kBase + 10'000);
    engine.consume("bucket", "u", 3);  // empty; 2 tokens per 1000 ms: full again at +1500
    clock.set(kBase + 11'499);
    CHECK(engine.gc() == 0);
    CHECK(engine.check("bucket", "u").remaining == 2);
    clock.set(kBase + 11'500);
    CHECK(engine.gc() == 1);
    CHECK(count(path, "quota_buckets") == 0);
  }
}

TEST_CASE("gc on an empty database deletes nothing and reports no batch", "[gc]") {
  Engine engine = Engine::open(":memory:");
  int calls = 0;
  CHECK(engine.gc(1000, [&](const GcProgress&) { ++calls; }) == 0);
  CHECK(calls == 0);
  engine.define(make_limit("log", Algorithm::sliding_log, 5, 1000));
  CHECK(engine.gc() == 0);
}

TEST_CASE("gc refuses a batch of 0 rows and a clock before 1970", "[gc]") {
  ManualClock clock;
  Engine engine = Engine::open(":memory:", options_with(clock));
  CHECK_THROWS_MATCHES(engine.gc(0), Error, Catch::Predicate<Error>([](const Error& error) {
                         return error.code() == ErrorCode::invalid_argument;
                       }));
  clock.set(-1);
  CHECK_THROWS_AS(engine.gc(), Error);
}

// A clock that goes back behind a gc is answered without the deleted state: never more than
// the algorithm allows at the gc's now (here: the event had expired then).
TEST_CASE("gc: an operation dated before the gc is answered as at the gc's now", "[gc]") {
  ManualClock clock;
  clock.set(kBase);
  Engine engine = Engine::open(":memory:", options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 1, 1000));
  engine.consume("log", "u");
  clock.set(kBase + 1000);
  CHECK(engine.check("log", "u").allowed);
  CHECK(engine.gc() == 2);
  clock.set(kBase + 500);
  const Result late = engine.consume("log", "u");
  CHECK(late.allowed);
  CHECK(late.reset_at_ms == kBase + 1500);
}

// --- batches ---------------------------------------------------------------------------------

// A database with `dead` finished windows, `live` current ones and a sliding_log owner with
// `events` events in its first minute, for a gc at kBase + 90 s (kAfterFill): the events of
// its first 30 s have expired then.
constexpr std::int64_t kAfterFill = kBase + 90'000;

void fill(const std::string& path, int dead, int live, int events) {
  ManualClock clock;
  clock.set(kBase);
  Engine engine = Engine::open(path, options_with(clock));
  engine.define(make_limit("win", Algorithm::fixed_window, 5, 1000));
  engine.define(make_limit("log", Algorithm::sliding_log, 1'000'000, 60'000));
  for (int i = 0; i < dead; ++i) engine.consume("win", "dead" + std::to_string(i));
  for (int i = 0; i < events; ++i) {
    clock.set(kBase + i * (60'000 / events));
    engine.consume("log", "u");
  }
  clock.set(kAfterFill);
  for (int i = 0; i < live; ++i) engine.consume("win", "live" + std::to_string(i));
}

TEST_CASE("gc works in batches of batch_rows rows, whatever their boundaries", "[gc]") {
  TempDir dir;
  const std::string original = dir.file("original.db");
  fill(original, 2500, 500, 1000);
  // Events at 0, 60, ..., 59940, the owner seen at 59940; now = 90000: those <= 30000 have
  // expired (501 of them).
  const std::int64_t expected = 2500 + 501;
  const std::int64_t rows = 2500 + 500 + 1 + 1000;

  for (const std::size_t batch_rows :
       {std::size_t{2}, std::size_t{7}, std::size_t{1000}, std::size_t{2999}, std::size_t{3000},
        std::size_t{3001}, std::size_t{100'000}}) {
    INFO("batch_rows " << batch_rows);
    const std::string path = dir.file("copy.db");
    std::filesystem::copy_file(original, path, std::filesystem::copy_options::overwrite_existing);
    ManualClock clock;
    clock.set(kAfterFill);
    Engine engine = Engine::open(path, options_with(clock));
    std::vector<GcProgress> reports;
    const std::int64_t deleted =
        engine.gc(batch_rows, [&](const GcProgress& progress) { reports.push_back(progress); });
    CHECK(deleted == expected);
    REQUIRE_FALSE(reports.empty());
    CHECK(reports.back().deleted == expected);
    CHECK(reports.back().examined == rows);
    CHECK(reports.front().total == rows);
    for (std::size_t i = 1; i < reports.size(); ++i) {
      CHECK(reports[i].examined - reports[i - 1].examined <= std::int64_t(batch_rows));
      CHECK(reports[i].deleted >= reports[i - 1].deleted);
    }
    // One report per batch that examined rows: each table's rows in batches of batch_rows.
    std::size_t batches = 0;
    for (const std::size_t table_rows : {std::size_t{1000}, std::size_t{1}, std::size_t{3000}}) {
      batches += (table_rows + batch_rows - 1) / batch_rows;
    }
    CHECK(reports.size() == batches);
    CHECK(count(path, "quota_windows") == 500);
    CHECK(count(path, "quota_log") == 499);
    CHECK(engine.gc(batch_rows) == 0);
  }
}

TEST_CASE("gc lets other connections and threads write between its batches", "[gc]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  fill(path, 50, 0, 0);
  ManualClock clock;
  clock.set(kAfterFill);
  Options impatient = options_with(clock);
  impatient.busy_timeout = std::chrono::milliseconds(0);  // a held lock fails at once
  Engine collector = Engine::open(path, options_with(clock));
  Engine other = Engine::open(path, impatient);
  int writes = 0;
  const std::int64_t deleted = collector.gc(1, [&](const GcProgress&) {
    if (writes == 50) return;  // the rows written here are swept too: stop adding them
    other.consume("win", "other" + std::to_string(writes));
    collector.consume("win", "self" + std::to_string(writes));  // no lock held: no deadlock
    ++writes;
  });
  CHECK(deleted == 50);
  CHECK(writes == 50);
  CHECK(count(path, "quota_windows") == 2 * writes);
}

TEST_CASE("gc inside the application's transaction commits or rolls back with it", "[gc]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  fill(path, 20, 0, 0);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  ManualClock clock;
  clock.set(kAfterFill);
  Engine engine = quota::sqlite::attach(db, options_with(clock));

  db.exec("BEGIN");
  CHECK(engine.gc(3) == 20);
  CHECK(db.execAndGet("SELECT count(*) FROM quota_windows").getInt64() == 0);
  db.exec("ROLLBACK");
  CHECK(db.execAndGet("SELECT count(*) FROM quota_windows").getInt64() == 20);

  db.exec("BEGIN");
  CHECK(engine.gc(3) == 20);
  db.exec("COMMIT");
  CHECK(count(path, "quota_windows") == 0);
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
      limits[row[0]] = {row[1], std::stoll(row[2]), std::stoll(row[3]),
                        number(row[4]).value_or(0)};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, denied, seen_ms FROM "
                                   "quota_log_owners")) {
      log_owners[{row[0], row[1]}] = {std::nullopt, std::nullopt, std::nullopt, number(row[2]),
                                      number(row[3]), std::nullopt, std::nullopt};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, window_key, period_ms, used, "
                                   "denied, seen_ms, previous_used FROM quota_windows")) {
      windows[{row[0], row[1]}] = {number(row[2]), number(row[3]), number(row[4]), number(row[5]),
                                   number(row[6]), number(row[7]), std::nullopt};
    }
    for (const auto& row : db.rows("SELECT limit_name, owner, period_ms, denied, seen_ms, level "
                                   "FROM quota_buckets")) {
      buckets[{row[0], row[1]}] = {std::nullopt,   number(row[2]), std::nullopt, number(row[3]),
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
          const std::int64_t tokens = *row.level >= 0 ? *row.level / old
                                                      : -((old - 1 - *row.level) / old);
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
                                               Algorithm::sliding_window,
                                               Algorithm::token_bucket};

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

TEST_CASE("gc never changes an answer: random operations on two databases", "[gc][property]") {
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

// --- quotactl gc ---------------------------------------------------------------------------

namespace {

using nlohmann::json;
using quota::test::dump;
using quota::test::RawDb;
using quota::test::TempDir;

struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

struct Database {
  TempDir dir;
  std::string path = dir.file("quota.db");

  Run ctl(std::vector<std::string> args, std::int64_t now,
          const quotactl::Context& context = {}) const {
    args.insert(args.begin(), {"--db", path, "--now", std::to_string(now)});
    std::ostringstream out, err;
    Run run;
    run.status = quotactl::run(args, out, err, context);
    run.out = out.str();
    run.err = err.str();
    return run;
  }
  // The rows of `prepare`: 3 owners of a fixed_window limit at kBase, one of them denied.
  void prepare() {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"migrate"},
             {"limit", "set", "daily", "--max", "1", "--per", "1d", "--algo", "fixed_window"},
             {"consume", "daily", "a"},
             {"consume", "daily", "b"},
             {"consume", "daily", "c"},
             {"consume", "daily", "c"}}) {
      REQUIRE(ctl(args, quota::test::kBase).status <= 1);
    }
  }
};

constexpr std::int64_t kNextDay = quota::test::kBase + 86'400'000;

}  // namespace

TEST_CASE("quotactl gc: JSON and human output, exit 0", "[gc][quotactl]") {
  Database db;
  db.prepare();
  SECTION("JSON: exactly {\"deleted\": N}") {
    const Run nothing = db.ctl({"gc", "--json"}, quota::test::kBase);
    CHECK(nothing.status == 0);
    CHECK(nothing.err.empty());
    CHECK(json::parse(nothing.out) == json{{"deleted", 0}});
    const Run some = db.ctl({"gc", "--json"}, kNextDay);
    CHECK(some.status == 0);
    CHECK(json::parse(some.out) == json{{"deleted", 2}});  // c has a denial: it stays
    CHECK(RawDb(db.path).integer("SELECT count(*) FROM quota_windows") == 1);
  }
  SECTION("human: one line with the count") {
    CHECK(db.ctl({"gc"}, quota::test::kBase).out ==
          "nothing to delete (3 rows of state examined)\n");
    const Run some = db.ctl({"gc"}, kNextDay);
    CHECK(some.status == 0);
    CHECK(some.out == "deleted 2 rows of state that no longer affected any answer (3 examined)\n");
    CHECK(db.ctl({"reset", "daily", "c"}, kNextDay).status == 0);
    CHECK(db.ctl({"gc"}, kNextDay).out == "nothing to delete (0 rows of state examined)\n");
    CHECK(db.ctl({"consume", "daily", "c"}, kNextDay).status == 0);
    CHECK(db.ctl({"gc"}, kNextDay + 86'400'000).out ==
          "deleted 1 row of state that no longer affected any answer (1 examined)\n");
  }
}

TEST_CASE("quotactl gc: a progress bar on a terminal only, never with --json", "[gc][quotactl]") {
  Database db;
  db.prepare();
  const quotactl::Context terminal{"", false, true};
  const quotactl::Context no_color{"", true, true};

  SECTION("on a terminal, with more than one batch: redrawn in place, then erased") {
    for (const auto& context : {terminal, no_color}) {
      const Run run = db.ctl({"gc", "--batch", "1"}, kNextDay, context);
      CHECK(run.status == 0);
      CHECK(run.out.find("\rgc [##########....................]  33%  1 deleted") !=
            std::string::npos);
      CHECK(run.out.find("100%  2 deleted") != std::string::npos);
      const std::string last =
          "\rdeleted 2 rows of state that no longer affected any answer (3 examined)\n";
      CHECK(run.out.substr(run.out.size() - last.size()) == last);
      CHECK(run.out.find('\x1b') == std::string::npos);
      db.prepare();  // consume again for the next context (at kBase: a, b come back)
    }
  }
  SECTION("one batch, --json or not a terminal: no bar") {
    CHECK(db.ctl({"gc"}, kNextDay, terminal).out.find('\r') == std::string::npos);
    db.prepare();
    const Run json_run = db.ctl({"gc", "--batch", "1", "--json"}, kNextDay, terminal);
    CHECK(json_run.out == "{\"deleted\":2}\n");
    db.prepare();
    CHECK(db.ctl({"gc", "--batch", "1"}, kNextDay).out.find('\r') == std::string::npos);
  }
}

TEST_CASE("quotactl gc: bad arguments are exit 2 and change nothing", "[gc][quotactl]") {
  Database db;
  db.prepare();
  const std::string before = dump(db.path);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"gc", "extra"},
                                               {"gc", "--batch", "0"},
                                               {"gc", "--batch", "-1"},
                                               {"gc", "--batch", "1.5"},
                                               {"gc", "--batch", "abc"},
                                               {"gc", "--batch", "1000001"},
                                               {"gc", "--batch"},
                                               {"gc", "--bogus"}}) {
    INFO(args.back());
    const Run run = db.ctl(args, kNextDay);
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    CHECK(run.err.rfind("quotactl: error: ", 0) == 0);
    CHECK(run.err.find('\n') == run.err.size() - 1);
  }
  CHECK(dump(db.path) == before);
}

TEST_CASE("quotactl gc: a missing or unmigrated database is exit 3 and left alone",
          "[gc][quotactl]") {
  Database db;
  const Run missing = db.ctl({"gc"}, kNextDay);
  CHECK(missing.status == 3);
  CHECK(missing.err.find("quotactl migrate") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(db.path));

  RawDb(db.path).exec("CREATE TABLE accounts (id INTEGER PRIMARY KEY)");
  const std::string bytes = quota::test::read_file(db.path);
  const Run unmigrated = db.ctl({"gc", "--json"}, kNextDay);
  CHECK(unmigrated.status == 3);
  CHECK(unmigrated.out.empty());
  CHECK(unmigrated.err.find("quotactl migrate") != std::string::npos);
  CHECK(quota::test::read_file(db.path) == bytes);
}
