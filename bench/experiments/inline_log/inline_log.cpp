// An experiment for issue 20 part 3 ("a cheaper sliding log"): would keeping a sliding_log
// owner's live events inside its row, as a JSON array, make a consume cheaper than today's
// event table? Not part of the product: it links SQLite directly and reads its statements from
// files (run.sh builds and runs it; docs/performance-notes.md keeps the results).
//
// Subjects, each on a database of its own made from BASE (migrated and given the limits
// log10, log100, log1000 by quotactl; see run.sh):
//   current  the engine's sliding_log consume, exactly as `quotactl sql consume` prints it
//            (quota_log_owners and quota_log, with their triggers)
//   inline   inline_consume.sql on inline_schema.sql's quota_log_inline: the same decision,
//            the events kept in the owner's row as a JSON array of [at_ms, cost]
//   compact  inline_compact_consume.sql, the same table: an event of cost 1 kept as its bare
//            at_ms in the array, [at_ms, cost] only for another cost
//   fixed    inline_fixed_consume.sql, the same table: no JSON, the events as fixed-width text
//            records (at_ms and running total), walked from the oldest only as far as they
//            have expired
//   bare     INSERT ... ON CONFLICT DO UPDATE SET count = count + 1 RETURNING count on a
//            one-table counter with a text key (bench/workloads.cpp's upsert_text)
//
// Workload (timing): 1,000 owners in turn, one consume of cost 1 per simulated ms, period =
// limit x 1,000 ms, so that each owner holds limit - 1 live events at its next consume and
// every consume is allowed with nothing to spare: the log held at capacity, as bench's
// "sliding log at capacity" case. Each database is first filled by the current statement
// itself (limit x 1,000 consumes), and the inline ones converted from it; each measurement
// copies its template (sqlite3_backup) into `:memory:` or into a fresh file in WAL mode with
// synchronous = NORMAL, runs --warmup consumes unmeasured, then --ops measured ones, timed
// by the wall clock and by the thread's CPU time (user + system), which a machine shared with
// other jobs disturbs less. The repetitions are interleaved: every repetition measures every
// (limit, storage, subject), the subjects in an order that rotates from one repetition to the
// next.
//
// Verification: a random sequence of consumes (a few owners, several limits, costs of 1 to
// more than the maximum, time steps of 0 to twice the period, some going backwards) run by
// the four statements, each on a database of its own; every answer (allowed, reason,
// remaining, retry_after_ms, reset_at_ms, denied) must be equal. The timed runs also compare
// the layouts' answers.
//
// Footprint: per subject and limit, the WAL frames (pages) one consume commits (a file with the
// automatic checkpoint off), the database's pages, and the inline array's size.
#include <sqlite3.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kStartMs = 1'700'000'000'000;
constexpr std::int64_t kOwners = 1000;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Statement files open with `--` comment lines (quotactl's and ours); SQLite skips comments,
// but a trailing `;` and newline would leave a tail, so the text is trimmed.
std::string statement_text(const std::string& path) {
  std::string text = read_text(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ';' || text.back() == ' '))
    text.pop_back();
  return text;
}

class Database {
 public:
  explicit Database(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &handle_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK)
      fail("cannot open " + path);
  }
  ~Database() { sqlite3_close_v2(handle_); }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  sqlite3* get() const { return handle_; }

  void exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(handle_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      std::string what = message ? message : "?";
      sqlite3_free(message);
      fail("SQL failed: " + what + "\n  in: " + sql.substr(0, 200));
    }
  }

  std::int64_t integer(const std::string& sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(handle_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK)
      fail(std::string("prepare: ") + sqlite3_errmsg(handle_));
    std::int64_t value = 0;
    if (sqlite3_step(statement) == SQLITE_ROW) value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    return value;
  }

  // Copies `from`'s main database over this one.
  void copy_from(sqlite3* from) {
    sqlite3_backup* backup = sqlite3_backup_init(handle_, "main", from, "main");
    const int status = backup ? sqlite3_backup_step(backup, -1) : SQLITE_ERROR;
    sqlite3_backup_finish(backup);
    if (status != SQLITE_DONE) fail(std::string("backup: ") + sqlite3_errmsg(handle_));
  }

 private:
  sqlite3* handle_ = nullptr;
};

struct Answer {
  std::int64_t allowed = 0;
  std::string reason;
  std::int64_t remaining = 0, retry_after_ms = 0, reset_at_ms = 0, denied = 0;
  bool operator==(const Answer& other) const {
    return allowed == other.allowed && reason == other.reason && remaining == other.remaining &&
           retry_after_ms == other.retry_after_ms && reset_at_ms == other.reset_at_ms &&
           denied == other.denied;
  }
};

std::string show(const Answer& a) {
  char text[160];
  std::snprintf(text, sizeof text,
                "allowed %lld %s remaining %lld retry %lld reset %lld denied %lld",
                static_cast<long long>(a.allowed), a.reason.c_str(),
                static_cast<long long>(a.remaining), static_cast<long long>(a.retry_after_ms),
                static_cast<long long>(a.reset_at_ms), static_cast<long long>(a.denied));
  return text;
}

// One prepared consume (or the bare upsert), bound by the parameters' names.
class Consume {
 public:
  Consume(Database& db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v3(db.get(), sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &statement_,
                           nullptr) != SQLITE_OK)
      fail(std::string("prepare: ") + sqlite3_errmsg(db.get()));
    limit_ = sqlite3_bind_parameter_index(statement_, ":limit");
    owner_ = sqlite3_bind_parameter_index(statement_, ":owner");
    cost_ = sqlite3_bind_parameter_index(statement_, ":cost");
    now_ = sqlite3_bind_parameter_index(statement_, ":now");
    key_ = sqlite3_bind_parameter_index(statement_, "?1");
  }
  ~Consume() { sqlite3_finalize(statement_); }
  Consume(const Consume&) = delete;
  Consume& operator=(const Consume&) = delete;

  // Runs the statement to its end (so that SQLite's WAL hook and checkpoint run, as in the
  // engine), keeping the first row.
  Answer run(const std::string& limit, const std::string& owner, std::int64_t cost,
             std::int64_t now) {
    if (limit_) sqlite3_bind_text(statement_, limit_, limit.data(), limit.size(), SQLITE_STATIC);
    if (owner_) sqlite3_bind_text(statement_, owner_, owner.data(), owner.size(), SQLITE_STATIC);
    if (key_) sqlite3_bind_text(statement_, key_, owner.data(), owner.size(), SQLITE_STATIC);
    if (cost_) sqlite3_bind_int64(statement_, cost_, cost);
    if (now_) sqlite3_bind_int64(statement_, now_, now);
    Answer answer;
    int status = sqlite3_step(statement_);
    if (status != SQLITE_ROW) fail(std::string("step: ") + sqlite3_errmsg(db_.get()));
    answer.allowed = sqlite3_column_int64(statement_, 0);
    if (sqlite3_column_count(statement_) >= 6) {
      const unsigned char* reason = sqlite3_column_text(statement_, 1);
      answer.reason = reason ? reinterpret_cast<const char*>(reason) : "";
      answer.remaining = sqlite3_column_int64(statement_, 2);
      answer.retry_after_ms = sqlite3_column_int64(statement_, 3);
      answer.reset_at_ms = sqlite3_column_int64(statement_, 4);
      answer.denied = sqlite3_column_int64(statement_, 5);
    }
    while ((status = sqlite3_step(statement_)) == SQLITE_ROW) {
    }
    if (status != SQLITE_DONE) fail(std::string("step: ") + sqlite3_errmsg(db_.get()));
    sqlite3_reset(statement_);
    return answer;
  }

 private:
  Database& db_;
  sqlite3_stmt* statement_ = nullptr;
  int limit_ = 0, owner_ = 0, cost_ = 0, now_ = 0, key_ = 0;
};

std::string owner_name(std::int64_t owner) { return "user:" + std::to_string(owner); }
std::string limit_name(std::int64_t limit) { return "log" + std::to_string(limit); }

struct Settings {
  std::string base;         // migrated database with the limits
  std::string current_sql;  // `quotactl sql consume` output
  std::string directory;    // this folder (inline_schema.sql, inline_consume.sql)
  std::string work;         // templates and WAL files
  std::vector<std::int64_t> limits{10, 100, 1000};
  int repetitions = 5;
  std::int64_t warmup = 1000;
  std::int64_t ops = 4000;
  std::int64_t verify = 30000;
  bool timing = true;
};

enum class Subject { bare, current, inline_log, compact, fixed };
constexpr Subject kSubjects[] = {Subject::bare, Subject::current, Subject::inline_log,
                                 Subject::compact, Subject::fixed};
constexpr int kSubjectCount = 5;
const char* subject_name(Subject s) {
  switch (s) {
    case Subject::bare:
      return "bare";
    case Subject::current:
      return "current";
    case Subject::inline_log:
      return "inline";
    case Subject::compact:
      return "compact";
    case Subject::fixed:
      return "fixed";
  }
  return "?";
}

const char* kBareSchema =
    "CREATE TABLE text_counters (key TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID;";
const char* kBareUpsert =
    "INSERT INTO text_counters (key, count) VALUES (?1, 1) "
    "ON CONFLICT (key) DO UPDATE SET count = count + 1 RETURNING count";

// The inline layout from the engine's: each owner's events live at its seen_ms, as a JSON
// array (what a migration converting state in place would do). The rows are inserted with
// cost NULL, which the "new owner" trigger ignores, and given their cost after.
const char* kConvert = R"(
INSERT INTO quota_log_inline (limit_name, owner, maximum, period_ms, events, total, base,
  newest_at_ms, denied, seen_ms, cost, last_allowed, last_reason, last_remaining,
  last_retry_after_ms, last_reset_at_ms, shadow_denied, blocked_until_ms)
SELECT o.limit_name, o.owner, o.maximum, o.period_ms,
  (SELECT {events} FROM (
     SELECT e.at_ms, e.cost, e.total FROM quota_log AS e
     WHERE e.owner = o.owner AND e.limit_name = o.limit_name
       AND e.at_ms > o.seen_ms - l.period_ms ORDER BY e.at_ms)),
  {fixed_columns},
  o.denied, o.seen_ms, NULL, o.last_allowed, o.last_reason, o.last_remaining,
  o.last_retry_after_ms, o.last_reset_at_ms, o.shadow_denied, o.blocked_until_ms
FROM quota_log_owners AS o JOIN quota_limits AS l ON l.name = o.limit_name;
UPDATE quota_log_inline SET cost = (
  SELECT o.cost FROM quota_log_owners AS o
  WHERE o.owner = quota_log_inline.owner AND o.limit_name = quota_log_inline.limit_name);
DELETE FROM quota_log; DELETE FROM quota_log_owners;)";

// kConvert for `subject`'s events.
std::string convert(Subject subject) {
  std::string sql = kConvert;
  const std::string events =
      subject == Subject::compact
          ? "json_group_array(CASE cost WHEN 1 THEN at_ms ELSE json_array(at_ms, cost) END)"
      : subject == Subject::fixed ? "group_concat(printf('%015d%015d', at_ms, total), '')"
                                  : "json_group_array(json_array(at_ms, cost))";
  // The fixed records' running totals are quota_log's: the row keeps the owner's total and
  // the total before its first live event.
  const std::string fixed_columns =
      subject == Subject::fixed
          ? "o.total, coalesce((SELECT e.total - e.cost FROM quota_log AS e WHERE e.owner = "
            "o.owner AND e.limit_name = o.limit_name AND e.at_ms > o.seen_ms - l.period_ms "
            "ORDER BY e.at_ms LIMIT 1), o.total), o.newest_at_ms"
          : "NULL, NULL, NULL";
  sql.replace(sql.find("{events}"), 8, events);
  sql.replace(sql.find("{fixed_columns}"), 15, fixed_columns);
  return sql;
}

std::string template_path(const Settings& s, Subject subject, std::int64_t limit) {
  return s.work + "/" + subject_name(subject) + "_" + std::to_string(limit) + ".db";
}

void save(Database& db, const std::string& path) {
  fs::remove(path);
  Database file(path);
  file.copy_from(db.get());
}

// Builds the three templates of `limit`: the log at capacity, made by the current statement.
void build_templates(const Settings& s, std::int64_t limit) {
  const auto started = std::chrono::steady_clock::now();
  Database db(":memory:");
  {
    Database base(s.base);
    db.copy_from(base.get());
  }
  const std::string name = limit_name(limit);
  {
    Consume consume(db, statement_text(s.current_sql));
    db.exec("BEGIN");
    for (std::int64_t i = 0; i < limit * kOwners; ++i) {
      const Answer a = consume.run(name, owner_name(i % kOwners), 1, kStartMs + i);
      if (!a.allowed) fail("the fill was denied at " + std::to_string(i));
    }
    db.exec("COMMIT");
  }
  save(db, template_path(s, Subject::current, limit));
  db.exec(read_text(s.directory + "/inline_schema.sql"));
  for (Subject subject : {Subject::inline_log, Subject::compact, Subject::fixed}) {
    Database copy(":memory:");
    copy.copy_from(db.get());
    copy.exec(convert(subject));
    copy.exec("VACUUM");
    save(copy, template_path(s, subject, limit));
  }
  Database bare(":memory:");
  bare.exec(kBareSchema);
  bare.exec(
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < 1000) "
      "INSERT INTO text_counters SELECT 'user:' || i, 1 FROM n");
  save(bare, template_path(s, Subject::bare, limit));
  std::printf("templates of limit %lld built in %.1f s\n", static_cast<long long>(limit),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

enum class Storage { memory, wal };

// A fresh copy of a template: in memory, or a file in WAL mode, synchronous = NORMAL.
std::unique_ptr<Database> open_copy(const Settings& s, Subject subject, std::int64_t limit,
                                    Storage storage, bool autocheckpoint = true) {
  Database source(template_path(s, subject, limit));
  if (storage == Storage::memory) {
    auto db = std::make_unique<Database>(":memory:");
    db->copy_from(source.get());
    return db;
  }
  const std::string path = s.work + "/run.db";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix);
  auto db = std::make_unique<Database>(path);
  db->copy_from(source.get());
  db->exec("PRAGMA journal_mode = WAL");
  db->exec("PRAGMA synchronous = NORMAL");
  if (!autocheckpoint) db->exec("PRAGMA wal_autocheckpoint = 0");
  return db;
}

std::string statement_of(const Settings& s, Subject subject) {
  switch (subject) {
    case Subject::bare:
      return kBareUpsert;
    case Subject::current:
      return statement_text(s.current_sql);
    case Subject::inline_log:
      return statement_text(s.directory + "/inline_consume.sql");
    case Subject::compact:
      return statement_text(s.directory + "/inline_compact_consume.sql");
    case Subject::fixed:
      return statement_text(s.directory + "/inline_fixed_consume.sql");
  }
  return "";
}

// The consumes that keep the log at capacity, after the template's limit x 1,000: the i-th at
// kStartMs + limit x 1,000 + i, owner i mod 1,000.
struct RunResult {
  double microseconds_per_op = 0;
  double cpu_microseconds_per_op = 0;  // the thread's CPU time (user and system)
  std::uint64_t answers_hash = 0;
  std::int64_t allowed = 0;
};

double thread_cpu_microseconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

RunResult run_case(const Settings& s, Subject subject, std::int64_t limit, Storage storage) {
  auto db = open_copy(s, subject, limit, storage);
  Consume consume(*db, statement_of(s, subject));
  const std::string name = limit_name(limit);
  std::vector<std::string> owners;
  for (std::int64_t i = 0; i < kOwners; ++i) owners.push_back(owner_name(i));
  const std::int64_t first = limit * kOwners;
  RunResult result;
  std::uint64_t hash = 1469598103934665603ULL;
  auto step = [&](std::int64_t i) {
    const Answer a = consume.run(name, owners[i % kOwners], 1, kStartMs + first + i);
    for (std::int64_t v : {a.allowed, a.remaining, a.retry_after_ms, a.reset_at_ms, a.denied})
      hash = (hash ^ static_cast<std::uint64_t>(v)) * 1099511628211ULL;
    result.allowed += a.allowed;
  };
  for (std::int64_t i = 0; i < s.warmup; ++i) step(i);
  const double cpu_started = thread_cpu_microseconds();
  const auto started = std::chrono::steady_clock::now();
  for (std::int64_t i = s.warmup; i < s.warmup + s.ops; ++i) step(i);
  const auto elapsed = std::chrono::steady_clock::now() - started;
  result.cpu_microseconds_per_op =
      (thread_cpu_microseconds() - cpu_started) / static_cast<double>(s.ops);
  result.microseconds_per_op =
      std::chrono::duration<double, std::micro>(elapsed).count() / static_cast<double>(s.ops);
  result.answers_hash = hash;
  return result;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Prints one table of the medians: µs per consume of each subject, and the ratios (each the
// median of the repetitions' own ratios: the subjects of one repetition ran next to each other).
using Figures = std::map<std::tuple<std::int64_t, int, int>, std::vector<double>>;

void print_table(const Settings& s, Figures& figures, const char* title) {
  std::printf("\n%s\n\n| limit | storage |", title);
  for (Subject subject : kSubjects) std::printf(" %s |", subject_name(subject));
  for (Subject subject : kSubjects)
    if (subject != Subject::bare && subject != Subject::current)
      std::printf(" %s ÷ current |", subject_name(subject));
  for (Subject subject : kSubjects)
    if (subject != Subject::bare) std::printf(" %s ÷ bare |", subject_name(subject));
  std::printf("\n|---:|---|");
  for (int i = 0; i < kSubjectCount + (kSubjectCount - 2) + (kSubjectCount - 1); ++i)
    std::printf("---:|");
  std::printf("\n");
  for (std::int64_t limit : s.limits) {
    for (int storage = 0; storage < 2; ++storage) {
      auto series = [&](Subject subject) -> std::vector<double>& {
        return figures[{limit, storage, static_cast<int>(subject)}];
      };
      auto ratio = [&](Subject a, Subject b) {
        std::vector<double> r;
        for (std::size_t i = 0; i < series(a).size(); ++i) r.push_back(series(a)[i] / series(b)[i]);
        return median(r);
      };
      std::printf("| %lld | %s |", static_cast<long long>(limit),
                  storage == 0 ? "memory" : "WAL/NORMAL");
      for (Subject subject : kSubjects) std::printf(" %.1f |", median(series(subject)));
      for (Subject subject : kSubjects)
        if (subject != Subject::bare && subject != Subject::current)
          std::printf(" %.2f× |", ratio(subject, Subject::current));
      for (Subject subject : kSubjects)
        if (subject != Subject::bare) std::printf(" %.2f× |", ratio(subject, Subject::bare));
      std::printf("\n");
    }
  }
}

void timing(const Settings& s) {
  const Storage storages[] = {Storage::memory, Storage::wal};
  Figures wall, cpu;  // (limit, storage, subject) -> µs per consume of each repetition
  std::map<std::pair<std::int64_t, int>, std::uint64_t> hashes;
  for (int repetition = 0; repetition < s.repetitions; ++repetition) {
    for (std::int64_t limit : s.limits) {
      for (Storage storage : storages) {
        for (int k = 0; k < kSubjectCount; ++k) {
          const Subject subject = kSubjects[(k + repetition) % kSubjectCount];
          const RunResult r = run_case(s, subject, limit, storage);
          const auto key =
              std::make_tuple(limit, static_cast<int>(storage), static_cast<int>(subject));
          wall[key].push_back(r.microseconds_per_op);
          cpu[key].push_back(r.cpu_microseconds_per_op);
          if (subject != Subject::bare) {
            if (r.allowed != s.warmup + s.ops)
              fail(std::string(subject_name(subject)) + " denied at capacity");
            auto [slot, fresh] =
                hashes.try_emplace({limit, static_cast<int>(storage)}, r.answers_hash);
            if (!fresh && slot->second != r.answers_hash)
              fail("the layouts' answers differ at limit " + std::to_string(limit));
          }
          std::printf("rep %d limit %lld %s %s: %.2f us/op wall, %.2f cpu\n", repetition + 1,
                      static_cast<long long>(limit), storage == Storage::memory ? "memory" : "wal",
                      subject_name(subject), r.microseconds_per_op, r.cpu_microseconds_per_op);
          std::fflush(stdout);
        }
      }
    }
  }
  print_table(s, wall, "Wall-clock µs per consume (median of the repetitions)");
  print_table(s, cpu, "CPU µs per consume, the thread's user + system time (median)");
}

// WAL frames per consume (automatic checkpoint off), pages of the database, and the inline
// array's size.
void footprint(const Settings& s) {
  std::printf(
      "\n| limit | subject | WAL frames per consume | database pages (4 KiB) | events text, "
      "bytes per owner |\n|---:|---|---:|---:|---:|\n");
  for (std::int64_t limit : s.limits) {
    for (Subject subject : kSubjects) {
      auto db = open_copy(s, subject, limit, Storage::wal, false);
      const std::int64_t pages = db->integer("PRAGMA page_count");
      const std::int64_t page_size = db->integer("PRAGMA page_size");
      const std::int64_t bytes =
          subject == Subject::inline_log || subject == Subject::compact || subject == Subject::fixed
              ? db->integer("SELECT avg(length(events)) FROM quota_log_inline")
              : 0;
      Consume consume(*db, statement_of(s, subject));
      const std::string name = limit_name(limit);
      const std::int64_t first = limit * kOwners;
      const std::int64_t n = 2000;
      for (std::int64_t i = 0; i < n; ++i)
        consume.run(name, owner_name(i % kOwners), 1, kStartMs + first + i);
      const std::string wal = s.work + "/run.db-wal";
      const double frames = static_cast<double>(fs::file_size(wal) - 32) /
                            static_cast<double>(page_size + 24) / static_cast<double>(n);
      std::printf("| %lld | %s | %.2f | %lld | %s |\n", static_cast<long long>(limit),
                  subject_name(subject), frames, static_cast<long long>(pages),
                  bytes ? std::to_string(bytes).c_str() : "");
    }
  }
}

// A simple deterministic generator (xorshift64*).
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1DULL;
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() >> 11) % n; }
};

// Both statements over the same random requests; every answer must be equal.
void verify(const Settings& s) {
  Database base(s.base);
  Database current(":memory:"), inline_db(":memory:"), compact_db(":memory:"), fixed_db(":memory:");
  current.copy_from(base.get());
  for (Database* db : {&inline_db, &compact_db, &fixed_db}) {
    db->copy_from(base.get());
    db->exec(read_text(s.directory + "/inline_schema.sql"));
  }
  Consume by_current(current, statement_of(s, Subject::current));
  Consume by_inline(inline_db, statement_of(s, Subject::inline_log));
  Consume by_compact(compact_db, statement_of(s, Subject::compact));
  Consume by_fixed(fixed_db, statement_of(s, Subject::fixed));
  struct Case {
    std::string limit;
    std::int64_t maximum, period;
  };
  const std::vector<Case> cases = {{"v3", 3, 1000},
                                   {"v20", 20, 5000},
                                   {"log10", 10, 10000},
                                   {"log100", 100, 100000},
                                   {"log1000", 1000, 1000000}};
  Random random{0x9E3779B97F4A7C15ULL};
  std::map<std::string, std::int64_t> reasons;
  std::int64_t backwards = 0, same_ms = 0;
  std::map<std::string, std::int64_t> clock;  // per limit: the time requests are sent at
  for (std::int64_t i = 0; i < s.verify; ++i) {
    const Case& c = cases[random.below(static_cast<std::int64_t>(cases.size()))];
    const std::string owner = "v:" + std::to_string(random.below(3));
    std::int64_t& now = clock.try_emplace(c.limit, kStartMs).first->second;
    const std::int64_t roll = random.below(100);
    // Steps mostly small against the period (so that owners reach their maximum), some long
    // (so that events expire), some zero (two events in one millisecond), some backwards
    // (evaluated at the row's seen_ms).
    if (roll < 8) {
      now -= random.below(c.period / 2) + 1;
      ++backwards;
    } else if (roll < 18) {
      ++same_ms;
    } else if (roll < 23) {
      now += random.below(2 * c.period);
    } else {
      now += random.below(c.period / (c.maximum * 2) + 2);
    }
    const std::int64_t cost_roll = random.below(100);
    const std::int64_t cost = cost_roll < 70   ? 1
                              : cost_roll < 97 ? random.below(c.maximum) + 1
                                               : c.maximum + 1 + random.below(3);
    const Answer x = by_current.run(c.limit, owner, cost, now);
    const Answer y = by_inline.run(c.limit, owner, cost, now);
    const Answer z = by_compact.run(c.limit, owner, cost, now);
    const Answer w = by_fixed.run(c.limit, owner, cost, now);
    if (!(x == y) || !(x == z) || !(x == w))
      fail("request " + std::to_string(i) + " (" + c.limit + ", " + owner + ", cost " +
           std::to_string(cost) + ", now " + std::to_string(now) + "): current " + show(x) +
           ", inline " + show(y) + ", compact " + show(z) + ", fixed " + show(w));
    ++reasons[x.reason];
  }
  std::printf("verified %lld consumes: every answer equal (", static_cast<long long>(s.verify));
  for (const auto& [reason, count] : reasons)
    std::printf("%s %lld, ", reason.c_str(), static_cast<long long>(count));
  std::printf("%lld sent at an earlier time than the one before, %lld in the same ms)\n",
              static_cast<long long>(backwards), static_cast<long long>(same_ms));
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--base")
      s.base = value();
    else if (arg == "--current")
      s.current_sql = value();
    else if (arg == "--dir")
      s.directory = value();
    else if (arg == "--work")
      s.work = value();
    else if (arg == "--repetitions")
      s.repetitions = std::stoi(value());
    else if (arg == "--ops")
      s.ops = std::stoll(value());
    else if (arg == "--warmup")
      s.warmup = std::stoll(value());
    else if (arg == "--verify")
      s.verify = std::stoll(value());
    else if (arg == "--verify-only")
      s.timing = false;
    else if (arg == "--limits") {
      s.limits.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) s.limits.push_back(std::stoll(item));
    } else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  if (s.base.empty() || s.current_sql.empty() || s.directory.empty() || s.work.empty()) {
    std::fprintf(stderr,
                 "usage: inline_log --base DB --current SQL --dir DIR --work DIR "
                 "[--limits 10,100,1000] [--repetitions 5] [--warmup 1000] [--ops 4000] "
                 "[--verify 30000] [--verify-only]\n");
    return 2;
  }
  try {
    std::printf("SQLite %s\n", sqlite3_libversion());
    verify(s);
    if (!s.timing) return 0;
    for (std::int64_t limit : s.limits) build_templates(s, limit);
    footprint(s);
    timing(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inline_log: %s\n", e.what());
    return 1;
  }
  return 0;
}
