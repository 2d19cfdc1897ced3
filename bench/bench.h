// quota-bench: the cases, how each is measured, and the report. main.cpp lists the workloads.
#pragma once

#include <fmt/format.h>

#include <array>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/engine.h"
#include "quota/limit.h"

namespace quota_bench {

// Per-operation latencies in constant memory (no allocation while measuring, so that a
// case's peak RSS does not grow with its speed): exact below 128 ns, then 64 buckets per power
// of two, so a percentile is off by at most 1/64 of its value.
class Histogram {
 public:
  void add(std::uint64_t ns) {
    ++counts_[index(ns)];
    ++count_;
    if (ns > max_) max_ = ns;
  }
  void merge(const Histogram& other);
  // The value below which a fraction `q` of the samples lie, in ns (0 when empty).
  std::uint64_t percentile(double q) const;
  std::uint64_t max() const { return max_; }
  std::uint64_t count() const { return count_; }

 private:
  static constexpr int kSubBuckets = 64;
  static constexpr int kBuckets = 2 * kSubBuckets + 40 * kSubBuckets;  // up to 2^47 ns
  static int index(std::uint64_t ns) {
    if (ns < 2 * kSubBuckets) return static_cast<int>(ns);
    const int shift = std::bit_width(ns) - 7;  // ns >> shift is in [64, 128)
    const int at =
        2 * kSubBuckets + (shift - 1) * kSubBuckets + static_cast<int>((ns >> shift) - kSubBuckets);
    return at < kBuckets ? at : kBuckets - 1;
  }
  static std::uint64_t middle(int index);

  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

// What one process measured. Trivially copyable: a forked child writes it to a pipe.
struct Measurement {
  std::int64_t operations = 0;
  std::int64_t admitted = 0;   // operations whose answer was "allowed"
  std::int64_t failures = 0;   // operations that failed (contention: busy after the timeout)
  std::int64_t recorded = -1;  // exactness runs: what the owner's state counts afterwards
  std::int64_t elapsed_ns = 0;
  std::int64_t cpu_ns = 0;  // the process's CPU time (user and system) while measuring
  Histogram latency;
  char error[512] = {};  // non-empty: the case failed with this message
};

// The number `text` gives for `option`, from `low` to `high`. Anything else is refused:
// `refuse` (which exits) gets a message saying what the option takes.
inline double number_option(const std::string& option, const char* text, double low, double high,
                            void (*refuse)(const std::string&)) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= low && value <= high)) {
    refuse(fmt::format("{} takes a number from {} to {}, not '{}'", option, low, high, text));
  }
  return value;
}

// postgresql: the server given by --postgres (postgresql.cpp), over its own connections.
enum class Setting { memory, wal_normal, wal_full, postgresql };

enum class Subject {
  upsert_int,     // bare INSERT ... ON CONFLICT DO UPDATE ... RETURNING, integer key
  upsert_text,    // the same with a text key (WITHOUT ROWID)
  select_int,     // bare point SELECT, integer key
  select_text,    // bare point SELECT, text key
  article,        // the SQL-only design of "SQLite-only Rate Limiting"
  upsert_state,   // storage without a decision: the bare upsert on the engine's state table
  upsert_narrow,  // and on the narrowest state row a text owner and a limit can have
  consume,        // quota::Engine
  check,
  record,
  consume_keyed,  // consume with an idempotency key, a new key each time (nothing to replay)
  replay,         // consume with the owner's one key, again and again: replays after the first
  consume_many,   // Engine::consume_many of kBatchSize requests (random owners); counted per request
};

// The requests of one Engine::consume_many call of the consume_many cases.
inline constexpr std::size_t kBatchSize = 100;

struct Case {
  Subject subject = Subject::upsert_int;
  Setting setting = Setting::wal_normal;
  quota::Algorithm algorithm = quota::Algorithm::fixed_window;  // engine subjects only
  std::int64_t owners = 1000;
  // 0: the general workload (random owners, limits rarely reached). Otherwise the sliding log
  // held at capacity: `owners` owners in turn, `log_limit` events live per owner.
  std::int64_t log_limit = 0;
  // Threads, each with its own connection, operating at once (postgresql only).
  int clients = 1;
  // Engine subjects: an Engine::watch of one of the owners is on while the case runs (its
  // name ends in /watched), so that the case against the same one without shows what
  // watching costs a consume.
  bool watched = false;
  // The limit locks an owner out after a denial (Limit::block, a minute): what carrying the
  // block costs the consumes that are allowed, beside the same case without it (/block).
  bool block = false;
  // The limit is in shadow mode (Limit::shadow): what answering for it costs a consume,
  // beside the same case without it (/shadow; memory only).
  bool shadow = false;
  // An override of the limit for another owner (not one the case consumes for): what an
  // override present costs the other owners' consumes (/overridden; memory only).
  bool overridden = false;
  // The limit counts per calendar month (Limit::calendar) at +09:00, its windows beginning on
  // the 31st (the last day of a shorter month): what computing a calendar window costs a
  // consume, beside the same case without it (/calendar). Its clock moves faster, so that an
  // owner sees as many requests per window as in the plain case (workloads.cpp).
  bool calendar = false;

  bool engine() const {
    return subject == Subject::consume || subject == Subject::check ||
           subject == Subject::record || subject == Subject::consume_keyed ||
           subject == Subject::replay || subject == Subject::consume_many;
  }
  std::string name() const;
};

const char* setting_name(Setting setting);

// The owners of a case: "user:<n>" (or n for an integer key), picked at random (the same
// sequence for every case with the same `seed`) or in turn.
class Owners {
 public:
  Owners(std::int64_t count, bool in_turn, std::int64_t position,
         std::uint64_t seed = 0x9E3779B97F4A7C15ULL)
      : count_(count), in_turn_(in_turn), position_(position), random_(seed) {}

  std::int64_t next() {
    if (in_turn_) return position_++ % count_;
    random_ ^= random_ >> 12;  // xorshift64*
    random_ ^= random_ << 25;
    random_ ^= random_ >> 27;
    return static_cast<std::int64_t>((random_ * 0x2545F4914F6CDD1DULL) >> 1) % count_;
  }

  std::string_view text(std::int64_t owner) {
    char* end = std::to_chars(buffer_ + 5, buffer_ + sizeof buffer_, owner).ptr;
    return {buffer_, static_cast<std::size_t>(end - buffer_)};
  }

 private:
  std::int64_t count_;
  bool in_turn_;
  std::int64_t position_;
  std::uint64_t random_;
  char buffer_[32] = {'u', 's', 'e', 'r', ':'};
};
const char* subject_name(Subject subject);

// How long each case runs: until `duration` has passed or `max_operations` are done, after
// `warmup` of unmeasured operations.
struct Budget {
  std::chrono::nanoseconds duration{std::chrono::seconds(1)};
  std::chrono::nanoseconds warmup{std::chrono::milliseconds(100)};
  std::int64_t max_operations = 50'000'000;
};

// Runs `operation` (which returns 1 when its answer is "allowed", else 0) until `budget`'s
// duration has passed or its operations are done, timing each with one steady_clock read
// (the time since the previous read). No warm-up: the caller does its own.
template <typename Operation>
Measurement measure(Operation&& operation, const Budget& budget) {
  using clock = std::chrono::steady_clock;
  Measurement measurement;
  const auto start = clock::now();
  const auto stop = start + budget.duration;
  auto last = start;
  while (measurement.operations < budget.max_operations) {
    measurement.admitted += operation();
    const auto now = clock::now();
    measurement.latency.add(static_cast<std::uint64_t>((now - last).count()));
    last = now;
    ++measurement.operations;
    if (now >= stop) break;
  }
  measurement.elapsed_ns = (last - start).count();
  return measurement;
}

// The CPU time this process has used so far (every thread, user and system), in ns.
inline std::int64_t process_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// measure() of consumes of (limit, owner) on `engine`, where a busy error (another connection
// held the lock past the timeout) counts as a failure, not an answer.
inline Measurement measure_consumes(quota::Engine& engine, std::string_view limit,
                                    std::string_view owner, const Budget& budget) {
  std::int64_t failures = 0;
  Measurement measurement = measure(
      [&]() -> int {
        try {
          return engine.consume(limit, owner).allowed;
        } catch (const quota::Error& error) {
          if (error.code() != quota::ErrorCode::busy) throw;
          ++failures;
          return 0;
        }
      },
      budget);
  measurement.failures = failures;
  return measurement;
}

// Page and cache settings to try (--page-size, --pragma), the same for the baselines and the
// engine: every case's database but the two processes' (contention.cpp), which is the
// engine's own file as Engine::open makes it.
struct FileSettings {
  // The page size the templates are built with; 0 for SQLite's default. A template of another
  // page size than the default has its own file name, so one work directory holds both.
  int page_size = 0;
  // "NAME = VALUE", each run as a PRAGMA on every case's connection after it is opened.
  std::vector<std::string> pragmas;
};

// The databases the cases start from. Each is built once, in `work_dir`, the first time a
// case needs it; a case then works on a copy (or, for the 1,000,000-owner databases, on the
// file itself: see workloads.cpp).
class Templates {
 public:
  explicit Templates(std::string work_dir, FileSettings settings = {})
      : work_dir_(std::move(work_dir)), settings_(std::move(settings)) {}
  // The template's path; builds it first when it does not exist yet.
  std::string prepare(const Case& c) const;
  const std::string& work_dir() const { return work_dir_; }
  const FileSettings& settings() const { return settings_; }

 private:
  std::string work_dir_;
  FileSettings settings_;
};

// Runs one case in this process: sets up its database from the template, warms up, then
// measures. `repetition` shifts the simulated clock so that repetitions on one file never
// go back in time.
Measurement run_case(const Case& c, const Templates& templates, const Budget& budget,
                     int repetition);

// Runs `operations` operations of the case with no timing, inside quota_bench_run_ops
// (callgrind: --toggle-collect='quota_bench_run_ops*' counts exactly those instructions).
//
// With `replacement`, its SQL `setup` runs once on the case's database and its `statement`
// replaces the case's operation, bound as the engine binds its own (:limit the case's limit,
// :owner, :cost 1, :now the simulated clock) and run through the C API: a statement variant
// is counted on the case's own data without rebuilding anything.
struct Replacement {
  std::string setup;
  std::string statement;
};
void count_case(const Case& c, const Templates& templates, std::int64_t operations,
                const Replacement* replacement = nullptr);

// Two processes consuming on one owner of one WAL/NORMAL file (see contention.cpp).
enum class BusyWait { sqlite_busy_timeout, engine };
const char* busy_wait_name(BusyWait wait);
struct ContentionRun {
  Measurement process[2];
  long peak_rss_kib[2] = {0, 0};
  std::int64_t maximum = 0;  // what the limit admits in total
};
ContentionRun run_contention(BusyWait wait, const std::string& work_dir, const Budget& budget,
                             std::int64_t maximum);

// The PostgreSQL cases (postgresql.cpp), on the server given by --postgres: a schema of the
// bench's own (quota_bench_<pid>), made once per run and dropped at its end, holding the bare
// counters and the engine's tables, limits and owners. Every connection runs with
// synchronous_commit on and that schema as its search_path.
struct PostgresqlScale {
  std::int64_t owners = 1000;
  std::int64_t exact_maximum = 1000;    // the small limit of the exactness runs
  std::int64_t exact_per_client = 250;  // consumes per client in an exactness run
};
class PostgresqlBench {
 public:
  // Connects to `uri` (a postgresql:// URI without options=), reads the server's version and
  // settings and builds the schema. Throws std::runtime_error when the server cannot be used.
  PostgresqlBench(const std::string& uri, PostgresqlScale scale);
  ~PostgresqlBench();  // drops the schema
  PostgresqlBench(const PostgresqlBench&) = delete;
  PostgresqlBench& operator=(const PostgresqlBench&) = delete;

  // The server: version, connection kind and the settings that decide a commit's cost.
  const nlohmann::json& server() const { return server_; }
  const PostgresqlScale& scale() const { return scale_; }
  // Runs one case (setting postgresql) with c.clients threads, after each has warmed up; the
  // engine's clock (shared by the threads) advances 1 ms per operation, from a start later
  // than any earlier case's: `sequence` counts the cases run before this one.
  Measurement run(const Case& c, const Budget& budget, int sequence) const;
  // 8 clients consuming on one owner of the small limit with the clock standing still:
  // exactly min(operations, exact_maximum) may be admitted. `round` names a fresh owner.
  Measurement run_exact(quota::Algorithm algorithm, int clients, int round) const;

 private:
  std::string uri_;  // with the schema and synchronous_commit in its options
  std::string schema_;
  PostgresqlScale scale_;
  nlohmann::json server_;
};
// quota-bench --groups (groups.cpp): prints its tables; returns the exit status.
int run_groups(const std::string& work_dir, const std::optional<std::string>& postgres,
               const Budget& budget, int repetitions);

// "postgresql://..." or "postgres://...".
bool is_postgresql_uri(std::string_view text);

// The report: the machine, targets and tables, from the JSON of a run.
nlohmann::json describe_machine(const std::string& build_type);
nlohmann::json evaluate_targets(const nlohmann::json& run);
nlohmann::json evaluate_postgresql_targets(const nlohmann::json& run);
std::string render_text(const nlohmann::json& run);
std::string render_markdown(const nlohmann::json& run);

}  // namespace quota_bench

#include "child.h"
