// The databases the cases start from and the operation each case repeats.
//
// Every case opens its connection the same way, with SQLiteCpp and the flags of
// quota::Engine::open (read-write, create, no mutex), then for a file `PRAGMA journal_mode =
// WAL` and `PRAGMA synchronous = NORMAL` or `FULL`, as Engine::open does; the engine cases
// then build an engine on that connection (`quota::sqlite::attach(db)`), the baselines use
// its sqlite3 handle with statements prepared once (sqlite3_prepare_v3,
// SQLITE_PREPARE_PERSISTENT, as the engine prepares its own). Page size, cache size and every other
// setting are SQLite's defaults for all of them, unless --page-size or --pragma set another
// (FileSettings), again for all of them alike. open_database repeats what Engine::open sets on its
// connection: a setting added there must be added here too, for the engine and the baselines alike.
//
// Time is simulated: the engine's clock (Options::clock) advances 1 ms per operation, so
// that runs are reproducible and every sliding_log event has a millisecond of its own (the
// log keeps one row per millisecond with usage, so this is its most expensive case).
#include <SQLiteCpp/Database.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "bench.h"
#include "quota/sqlite.h"

// The loop callgrind counts (bench/scripts/bench-instructions.sh:
// --toggle-collect='quota_bench_run_ops*', with the star because GCC may clone it);
// a C name, so that the option does not depend on C++ name mangling.
extern "C" __attribute__((noinline)) void quota_bench_run_ops(int (*operation)(void*),
                                                              void* context, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) operation(context);
}

namespace quota_bench {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kStartMs = 1'700'000'000'000;  // 2023-11-14, a realistic Unix ms time
// The general workload's limit: 100 per 10 s. With random owners at 1 ms per operation an
// owner of 1,000 sees about 10 requests per period, so nearly every consume is allowed and
// records, the path a limit in front of an action takes most often.
constexpr std::int64_t kMaximum = 100;
constexpr std::int64_t kPeriodMs = 10'000;
// The templates of at most this many owners have a concurrency limit too (build_engine).
constexpr std::int64_t kLeaseOwnersAtMost = 100'000;
// The calendar case's limit: kMaximum per month at +09:00, its windows beginning on the 31st
// at midnight there (the anchor is 2026-01-31T00:00+09:00 = 2026-01-30T15:00Z), the last day
// of a shorter month. Its clock moves a month's share of kPeriodMs per operation (31 days /
// 10,000 = 267.84 s), so that an owner sees as many requests per window as in the plain case
// (about 10 of its 100): the same share allowed, and a new window as often.
constexpr std::int64_t kCalendarAnchorMs = 1'769'785'200'000;
constexpr std::chrono::minutes kCalendarOffset{9 * 60};
constexpr std::int64_t kCalendarStepMs = 31LL * 24 * 60 * 60 * 1000 / kPeriodMs;
// The sliding log held at capacity: this many owners in turn, period = limit x owners ms.
constexpr std::int64_t kLogOwners = 10;
// Above this many owners a template is used in place rather than copied (see open_database).
constexpr std::int64_t kCopiedOwners = 1000;

const int kOpenFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;

// ---------------------------------------------------------------------------------------
// The baselines: a one-table counter, as small as an upsert counter can be.
constexpr const char* kBareSchema = R"(
CREATE TABLE counters (id INTEGER PRIMARY KEY, count INTEGER NOT NULL);
CREATE TABLE text_counters (key TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID;)";
constexpr const char* kUpsertInt =
    "INSERT INTO counters (id, count) VALUES (?1, 1) "
    "ON CONFLICT (id) DO UPDATE SET count = count + 1 RETURNING count";
constexpr const char* kUpsertText =
    "INSERT INTO text_counters (key, count) VALUES (?1, 1) "
    "ON CONFLICT (key) DO UPDATE SET count = count + 1 RETURNING count";
// The engine's fixed_window state row, as the bare upsert changes a counter: `used` only, no
// decision. The new-owner trigger fires as for every engine statement, and its WHEN (a
// request's cost) is false at once: every owner has its row.
constexpr const char* kUpsertState =
    "INSERT INTO quota_windows (limit_name, owner, maximum) VALUES ('bench_fixed_window', ?1, 0) "
    "ON CONFLICT (owner, limit_name) DO UPDATE SET used = used + 1 RETURNING used";
// The least a fixed or sliding window's state per owner and limit holds, keyed as narrowly as
// a text owner allows: the owner, a limit's integer id, the window, its count and the
// previous one's, the denials, and one integer for the answer. One limit's owners only.
constexpr const char* kNarrowSchema = R"(
CREATE TABLE narrow_state (
  owner TEXT NOT NULL, limit_id INTEGER NOT NULL, window_key INTEGER NOT NULL,
  used INTEGER NOT NULL, previous_used INTEGER NOT NULL, denied INTEGER NOT NULL,
  answer INTEGER NOT NULL, PRIMARY KEY (owner, limit_id)
) STRICT, WITHOUT ROWID;)";
constexpr const char* kUpsertNarrow =
    "INSERT INTO narrow_state (owner, limit_id, window_key, used, previous_used, denied, answer) "
    "VALUES (?1, 1, 0, 1, 0, 0, 0) "
    "ON CONFLICT (owner, limit_id) DO UPDATE SET used = used + 1 RETURNING used";
constexpr const char* kSelectInt = "SELECT count FROM counters WHERE id = ?1";
constexpr const char* kSelectText = "SELECT count FROM text_counters WHERE key = ?1";

// ---------------------------------------------------------------------------------------
// The SQL-only design of the article "SQLite-only Rate Limiting": its two tables, its two
// triggers, its example limit and its interface statement, copied verbatim from the article's
// text. One change: the interface statement's visitor id is a parameter (?1) instead of the
// literal 1 of the article's example, so that one prepared statement serves every visitor.
// visitor_limits references a table `visitors` that the article leaves to the application;
// SQLite does not enforce foreign keys unless asked (PRAGMA foreign_keys), so it is not
// created here, as in the article.
constexpr const char* kArticleSchema = R"(
CREATE TABLE IF NOT EXISTS limits (
  id INTEGER PRIMARY KEY ASC
  ,name TEXT UNIQUE NOT NULL
  ,maximum INTEGER NOT NULL CHECK ( maximum > 0 )
  ,period_minutes INTEGER NOT NULL CHECK ( period_minutes >= 1 )

  ,UNIQUE (name, maximum)
) STRICT;

CREATE TABLE IF NOT EXISTS visitor_limits (
  id INTEGER PRIMARY KEY ASC
  ,visitor_id INTEGER NOT NULL REFERENCES visitors(id)
  ,limit_id INTEGER NOT NULL REFERENCES limits(id)

  ,denied INTEGER NOT NULL DEFAULT 0 CHECK ( denied IN (0, 1) )

  -- set by trigger
  ,count INTEGER CHECK ( count >= 0 )
  ,resets_at INTEGER CHECK ( resets_at > 1680373723 )

  ,UNIQUE (visitor_id, limit_id)
) STRICT;

CREATE TRIGGER IF NOT EXISTS init_visitor_limit_counter
AFTER INSERT
ON visitor_limits
WHEN (NEW.count IS NULL OR NEW.resets_at IS NULL)
BEGIN
  UPDATE visitor_limits
    SET
      count = 1
      ,resets_at = (unixepoch() + (60 * (SELECT period_minutes FROM limits l WHERE l.id = NEW.limit_id)))
      ,denied = 0
  WHERE id = NEW.id;
END;

CREATE TRIGGER IF NOT EXISTS update_visitor_limit_counter_breaker
BEFORE INSERT
ON visitor_limits
BEGIN
  -- trip breaker for non-expired
  UPDATE visitor_limits
    SET denied = visitor_limits.count >= (SELECT maximum FROM limits l WHERE l.id = NEW.limit_id)
  WHERE visitor_limits.visitor_id = NEW.visitor_id
    AND visitor_limits.limit_id = NEW.limit_id;

  -- or reset if expired
  UPDATE visitor_limits
    SET
      count = 0
      ,resets_at = unixepoch() + (60 * (SELECT period_minutes FROM limits l WHERE l.id = NEW.limit_id))
      ,denied = 0
  WHERE visitor_limits.visitor_id = NEW.visitor_id
    AND visitor_limits.limit_id = NEW.limit_id
    AND unixepoch() > visitor_limits.resets_at;
END;

-- allow 5 messages per 2 minutes
INSERT INTO limits(name, maximum, period_minutes)
VALUES ('send_message', 5, 2);
)";
constexpr const char* kArticleStatement = R"(INSERT INTO visitor_limits(visitor_id, limit_id)
VALUES (?1, 1)
ON CONFLICT DO UPDATE SET count = count + 1
RETURNING denied, resets_at;)";

// ---------------------------------------------------------------------------------------

std::string limit_name(quota::Algorithm algorithm) {
  return "bench_" + std::string(quota::to_string(algorithm));
}

void execute(sqlite3* db, const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string what = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw std::runtime_error("SQL failed: " + what);
  }
}

// ---------------------------------------------------------------------------------------
// Templates.

std::string template_file(const Case& c) {
  if (c.log_limit > 0) return fmt::format("log_{}.db", c.log_limit);
  switch (c.subject) {
    case Subject::upsert_int:
    case Subject::upsert_text:
    case Subject::select_int:
    case Subject::select_text:
      return fmt::format("bare_{}.db", c.owners);
    case Subject::article:
      return fmt::format("article_{}.db", c.owners);
    case Subject::upsert_narrow:
      return fmt::format("narrow_{}.db", c.owners);
    default:
      return fmt::format("engine_{}.db", c.owners);
  }
}

// The owners' numbers 0 .. owners - 1 as the rows of `n(i)`, to put before an INSERT ... SELECT.
std::string owner_numbers(std::int64_t owners) {
  return fmt::format(
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {}) ", owners);
}

// Every owner with one counter row, written by one INSERT ... SELECT per table.
void build_bare(sqlite3* db, std::int64_t owners) {
  execute(db, kBareSchema);
  const std::string numbers = owner_numbers(owners);
  execute(db, "BEGIN");
  execute(db, numbers + "INSERT INTO counters (id, count) SELECT i, 1 FROM n");
  execute(db, numbers + "INSERT INTO text_counters (key, count) SELECT 'user:' || i, 1 FROM n");
  execute(db, "COMMIT");
}

// Every owner with one row of one limit, the window and figures of the engine's template (the
// window of kStartMs, a count of 1).
void build_narrow(sqlite3* db, std::int64_t owners) {
  execute(db, kNarrowSchema);
  execute(db,
          owner_numbers(owners) +
              fmt::format("INSERT INTO narrow_state SELECT 'user:' || i, 1, {}, 1, 0, 0, 1 FROM n",
                          kStartMs / kPeriodMs));
}

using Prepared = std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)>;

Prepared prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &statement, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(statement);
    throw std::runtime_error(fmt::format("cannot prepare {}: {}", sql, sqlite3_errmsg(db)));
  }
  return {statement, &sqlite3_finalize};
}

// The article's schema and limit; every visitor's row made by the article's own statement.
void build_article(sqlite3* db, std::int64_t owners) {
  execute(db, kArticleSchema);
  const Prepared statement = prepare(db, kArticleStatement);
  execute(db, "BEGIN");
  for (std::int64_t visitor = 1; visitor <= owners; ++visitor) {
    sqlite3_bind_int64(statement.get(), 1, visitor);
    while (sqlite3_step(statement.get()) == SQLITE_ROW) {
    }
    if (sqlite3_reset(statement.get()) != SQLITE_OK) {
      throw std::runtime_error(std::string("article: ") + sqlite3_errmsg(db));
    }
  }
  execute(db, "COMMIT");
}

// The quota schema, a limit per algorithm and one consume per owner and limit (the library's
// own statements, in one transaction), at times kStartMs + owner.
void build_engine(SQLite::Database& db, std::int64_t owners) {
  std::int64_t now = kStartMs;
  quota::Options options;
  options.clock = [&now] { return now; };
  quota::Engine engine = quota::sqlite::attach(db, options);
  Owners names(owners, true, 0);
  db.exec("BEGIN");
  for (quota::Algorithm algorithm :
       {quota::Algorithm::sliding_log, quota::Algorithm::fixed_window,
        quota::Algorithm::sliding_window, quota::Algorithm::token_bucket}) {
    const std::string limit = limit_name(algorithm);
    engine.define({limit, algorithm, kMaximum, std::chrono::milliseconds(kPeriodMs), {}});
    for (std::int64_t owner = 0; owner < owners; ++owner) {
      now = kStartMs + owner;
      engine.consume(limit, names.text(owner));
    }
  }
  // A concurrency limit of kMaximum leases with a TTL of kPeriodMs, each owner holding one
  // (consume/concurrency: a consume on it is an acquire). Only in the smaller templates, whose
  // cases include it: a million owners' leases would lengthen the large ones' build for
  // nothing.
  if (owners <= kLeaseOwnersAtMost) {
    const std::string limit = limit_name(quota::Algorithm::concurrency);
    engine.define({limit, quota::Algorithm::concurrency, kMaximum,
                   std::chrono::milliseconds(kPeriodMs), {}});
    for (std::int64_t owner = 0; owner < owners; ++owner) {
      now = kStartMs + owner;
      engine.acquire_lease(limit, names.text(owner));
    }
  }
  db.exec("COMMIT");
}

// A sliding log at capacity: kLogOwners owners in turn, one consume per ms, period = limit x
// owners ms, so each owner holds `limit` - 1 live events before its next consume.
void build_log(SQLite::Database& db, std::int64_t limit) {
  std::int64_t now = kStartMs;
  quota::Options options;
  options.clock = [&now] { return now; };
  quota::Engine engine = quota::sqlite::attach(db, options);
  const std::string name = limit_name(quota::Algorithm::sliding_log);
  engine.define({name,
                 quota::Algorithm::sliding_log,
                 limit,
                 std::chrono::milliseconds(limit * kLogOwners),
                 {}});
  Owners names(kLogOwners, true, 0);
  db.exec("BEGIN");
  for (std::int64_t i = 0; i < limit * kLogOwners; ++i) {
    now = kStartMs + i;
    engine.consume(name, names.text(names.next()));
  }
  db.exec("COMMIT");
}

void copy_database(const std::string& from, sqlite3* to) {
  sqlite3* source = nullptr;
  if (sqlite3_open_v2(from.c_str(), &source, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(source);
    throw std::runtime_error("cannot open template " + from);
  }
  sqlite3_backup* backup = sqlite3_backup_init(to, "main", source, "main");
  const int status = backup ? sqlite3_backup_step(backup, -1) : SQLITE_ERROR;
  sqlite3_backup_finish(backup);
  sqlite3_close(source);
  if (status != SQLITE_DONE) throw std::runtime_error("cannot copy template " + from);
}

void remove_database(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix);
}

void apply_pragmas(SQLite::Database& db, const FileSettings& settings) {
  for (const std::string& pragma : settings.pragmas) db.exec("PRAGMA " + pragma);
}

// The case's connection, on a copy of its template: in memory (SQLite's backup API), or a
// file. A template of more than kCopiedOwners owners is used in place: copying a database of
// hundreds of megabytes per case would cost more than the case, and what the cases change in
// it (a few percent of its owners' rows) does not change its shape.
std::unique_ptr<SQLite::Database> open_database(const Case& c, const Templates& templates) {
  const std::string from = templates.prepare(c);
  if (c.setting == Setting::memory) {
    auto db = std::make_unique<SQLite::Database>(":memory:", kOpenFlags);
    copy_database(from, db->getHandle());  // the copy takes the template's page size
    apply_pragmas(*db, templates.settings());
    return db;
  }
  std::string path = from;
  if (c.log_limit > 0 || c.owners <= kCopiedOwners) {
    path = templates.work_dir() + "/case.db";
    remove_database(path);
    fs::copy_file(from, path);
  }
  auto db = std::make_unique<SQLite::Database>(path, kOpenFlags);
  db->exec("PRAGMA journal_mode = WAL");
  db->exec(c.setting == Setting::wal_full ? "PRAGMA synchronous = FULL"
                                          : "PRAGMA synchronous = NORMAL");
  apply_pragmas(*db, templates.settings());
  return db;
}

// ---------------------------------------------------------------------------------------
// Operations: each returns 1 when its answer is "allowed" (a baseline: always), else 0.

// Steps the statement to its end, as the engine does, then resets it. Only a step that
// returns SQLITE_DONE runs SQLite's WAL hook, and with it the automatic checkpoint: a
// statement reset after its RETURNING row commits all the same but never checkpoints, so its
// WAL would grow for the whole case, sparing it the work every application pays.
// `status` is what the last step returned.
void finish(sqlite3* db, sqlite3_stmt* statement, int status) {
  while (status == SQLITE_ROW) status = sqlite3_step(statement);
  if (sqlite3_reset(statement) != SQLITE_OK || status != SQLITE_DONE) {
    throw std::runtime_error(std::string("the statement failed: ") + sqlite3_errmsg(db));
  }
}

struct StatementOperation {
  sqlite3* db;
  sqlite3_stmt* statement;
  Subject subject;
  Owners owners;

  int operator()() {
    const std::int64_t owner = owners.next();
    if (subject == Subject::upsert_text || subject == Subject::select_text ||
        subject == Subject::upsert_state || subject == Subject::upsert_narrow) {
      const std::string_view key = owners.text(owner);
      sqlite3_bind_text(statement, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    } else {
      sqlite3_bind_int64(statement, 1, subject == Subject::article ? owner + 1 : owner);
    }
    if (sqlite3_step(statement) != SQLITE_ROW) {
      sqlite3_reset(statement);
      throw std::runtime_error(fmt::format("{}: {}", subject_name(subject), sqlite3_errmsg(db)));
    }
    // The article's row: denied, resets_at.
    const int allowed = subject == Subject::article ? sqlite3_column_int64(statement, 0) == 0 : 1;
    finish(db, statement, SQLITE_ROW);
    return allowed;
  }
};

struct EngineOperation {
  quota::Engine* engine;
  Subject subject;
  std::string limit;
  Owners owners;

  std::uint64_t keys = 0;  // consume_keyed: the keys used so far
  // consume_many: the batch's owners and answers, and the next answer to return. A batch of
  // kBatchSize requests is made and decided when the last one's answers are used up, so each
  // operation is one request and the counts are per request.
  std::vector<std::string> batch_owners;
  std::vector<quota::Result> answers;
  std::size_t next_answer = 0;

  int operator()() {
    if (subject == Subject::consume_many) return next_of_batch();
    const std::string_view owner = owners.text(owners.next());
    switch (subject) {
      case Subject::check:
        return engine->check(limit, owner).allowed;
      case Subject::record:
        return engine->record(limit, owner).allowed;
      case Subject::consume_keyed:
        return engine->consume(limit, owner, 1, fmt::format("k{}", ++keys)).allowed;
      case Subject::replay:
        return engine->consume(limit, owner, 1, "the-key").allowed;
      default:
        return engine->consume(limit, owner).allowed;
    }
  }

  int next_of_batch() {
    if (next_answer == answers.size()) {
      batch_owners.resize(kBatchSize);
      std::vector<quota::BatchRequest> requests;
      requests.reserve(kBatchSize);
      for (std::string& name : batch_owners) {
        name = owners.text(owners.next());
        requests.push_back({limit, name, 1});
      }
      answers = engine->consume_many(requests);
      next_answer = 0;
    }
    return answers[next_answer++].allowed;
  }
};

// A statement given on the command line (count_case's replacement), bound like the engine's.
class NamedStatementOperation {
 public:
  NamedStatementOperation(sqlite3* db, sqlite3_stmt* statement, std::string limit, Owners owners,
                          std::int64_t* now)
      : db_(db),
        statement_(statement),
        limit_(std::move(limit)),
        owners_(owners),
        now_(now),
        // Looked up once, as the engine does (0: the statement has no such parameter).
        limit_at_(sqlite3_bind_parameter_index(statement, ":limit")),
        owner_at_(sqlite3_bind_parameter_index(statement, ":owner")),
        cost_at_(sqlite3_bind_parameter_index(statement, ":cost")),
        now_at_(sqlite3_bind_parameter_index(statement, ":now")) {}

  int operator()() {
    const std::string_view owner = owners_.text(owners_.next());
    if (limit_at_) {
      sqlite3_bind_text(statement_, limit_at_, limit_.data(), static_cast<int>(limit_.size()),
                        SQLITE_STATIC);
    }
    if (owner_at_) {
      sqlite3_bind_text(statement_, owner_at_, owner.data(), static_cast<int>(owner.size()),
                        SQLITE_STATIC);
    }
    if (cost_at_) sqlite3_bind_int64(statement_, cost_at_, 1);
    if (now_at_) sqlite3_bind_int64(statement_, now_at_, (*now_)++);
    const int status = sqlite3_step(statement_);
    const int allowed = status == SQLITE_ROW ? sqlite3_column_int(statement_, 0) != 0 : 0;
    finish(db_, statement_, status);
    return allowed;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_;
  std::string limit_;
  Owners owners_;
  std::int64_t* now_;
  int limit_at_, owner_at_, cost_at_, now_at_;
};

const char* statement_of(Subject subject) {
  switch (subject) {
    case Subject::upsert_int:
      return kUpsertInt;
    case Subject::upsert_text:
      return kUpsertText;
    case Subject::select_int:
      return kSelectInt;
    case Subject::select_text:
      return kSelectText;
    case Subject::upsert_state:
      return kUpsertState;
    case Subject::upsert_narrow:
      return kUpsertNarrow;
    default:
      return kArticleStatement;
  }
}

// Sets the case up and calls `use(operation)` with its operation.
template <typename Use>
void with_operation(const Case& c, const Templates& templates, int repetition,
                    const Replacement* replacement, Use&& use) {
  std::unique_ptr<SQLite::Database> db = open_database(c, templates);
  const bool log_at_capacity = c.log_limit > 0;
  const std::int64_t populated = log_at_capacity ? c.log_limit * kLogOwners : c.owners;
  // A file used in place keeps what earlier repetitions wrote: each starts far later.
  std::int64_t now = kStartMs + populated + (log_at_capacity ? 0 : repetition * 10'000'000'000);
  if (replacement) {
    execute(db->getHandle(), replacement->setup);
    const Prepared statement = prepare(db->getHandle(), replacement->statement.c_str());
    NamedStatementOperation operation{db->getHandle(), statement.get(), limit_name(c.algorithm),
                                      Owners(c.owners, log_at_capacity, populated), &now};
    use(operation);
    return;
  }
  if (!c.engine()) {
    const Prepared statement = prepare(db->getHandle(), statement_of(c.subject));
    StatementOperation operation{db->getHandle(), statement.get(), c.subject,
                                 Owners(c.owners, false, 0)};
    use(operation);
    return;
  }
  // The block, on the same limit and state as the case without it; taken off again after,
  // for a template used in place.
  const auto set_block = [&](const char* block_ms) {
    execute(db->getHandle(), fmt::format("UPDATE quota_limits SET block_ms = {} WHERE name = '{}'",
                                         block_ms, limit_name(c.algorithm)));
  };
  if (c.block) set_block("60000");
  // Shadow mode, the same way.
  const auto set_shadow = [&](int shadow) {
    execute(db->getHandle(), fmt::format("UPDATE quota_limits SET shadow = {} WHERE name = '{}'",
                                         shadow, limit_name(c.algorithm)));
  };
  if (c.shadow) set_shadow(1);
  // The override, of an owner the case never consumes for.
  if (c.overridden) {
    execute(db->getHandle(),
            fmt::format("INSERT INTO quota_overrides (limit_name, owner, policy) "
                        "VALUES ('{}', 'not-an-owner-of-the-case', 'exempt')",
                        limit_name(c.algorithm)));
  }
  quota::Options options;
  // Atomic: a watch's thread reads the clock too.
  std::atomic<std::int64_t> tick{now};
  const std::int64_t step = c.calendar ? kCalendarStepMs : 1;
  options.clock = [&tick, step] { return tick.fetch_add(step, std::memory_order_relaxed); };
  quota::Engine engine = quota::sqlite::attach(*db, options);
  // The calendar, on the same limit, maximum and state rows as the case without it (turning
  // a calendar on starts each owner's count afresh); the plain limit again after, for a
  // template used in place.
  if (c.calendar) {
    engine.define(quota::calendar_limit(limit_name(c.algorithm), kMaximum, quota::Calendar::month,
                                        kCalendarOffset, kCalendarAnchorMs));
  }
  EngineOperation operation{&engine, c.subject, limit_name(c.algorithm),
                            Owners(c.owners, log_at_capacity, populated), 0, {}, {}, 0};
  if (c.subject == Subject::replay) {
    // Every owner's key stored first, so that each measured operation is a replay (the
    // owners are drawn at random: a warm-up alone leaves some without one).
    Owners every(c.owners, true, 0);
    for (std::int64_t i = 0; i < c.owners; ++i) {
      engine.consume(operation.limit, every.text(every.next()), 1, "the-key");
    }
  }
  quota::Watch watch;
  std::atomic<std::int64_t> calls{0};
  if (c.watched) {
    watch = engine.watch(limit_name(c.algorithm), operation.owners.text(0),
                         [&calls](const quota::Usage&) { calls.fetch_add(1); });
  }
  use(operation);
  if (c.block) set_block("NULL");
  if (c.shadow) set_shadow(0);
  if (c.overridden) {
    execute(db->getHandle(), fmt::format("DELETE FROM quota_overrides WHERE limit_name = '{}'",
                                         limit_name(c.algorithm)));
  }
  if (c.calendar) {
    engine.define(
        {limit_name(c.algorithm), c.algorithm, kMaximum, std::chrono::milliseconds(kPeriodMs), {}});
  }
}

}  // namespace

std::string Templates::prepare(const Case& c) const {
  std::string file = template_file(c);
  if (settings_.page_size) file.insert(file.size() - 3, fmt::format("_p{}", settings_.page_size));
  const std::string path = work_dir_ + "/" + file;
  if (fs::exists(path)) return path;
  const std::string building = path + ".building";
  remove_database(building);
  {
    SQLite::Database db(building, kOpenFlags);
    // Before the first table: afterwards a page size takes a VACUUM.
    if (settings_.page_size) db.exec(fmt::format("PRAGMA page_size = {}", settings_.page_size));
    // Building only: a cache that holds the whole database and no rollback journal, so that
    // a million owners take seconds. The cases open the copy with SQLite's defaults.
    db.exec("PRAGMA cache_size = -2000000");
    db.exec("PRAGMA journal_mode = OFF");
    if (c.log_limit > 0) {
      build_log(db, c.log_limit);
    } else if (c.engine() || c.subject == Subject::upsert_state) {
      build_engine(db, c.owners);
    } else if (c.subject == Subject::upsert_narrow) {
      build_narrow(db.getHandle(), c.owners);
    } else if (c.subject == Subject::article) {
      build_article(db.getHandle(), c.owners);
    } else {
      build_bare(db.getHandle(), c.owners);
    }
  }
  fs::rename(building, path);
  return path;
}

Measurement run_case(const Case& c, const Templates& templates, const Budget& budget,
                     int repetition) {
  Measurement measurement;
  with_operation(c, templates, repetition, nullptr, [&](auto& operation) {
    const auto warm_until = std::chrono::steady_clock::now() + budget.warmup;
    while (std::chrono::steady_clock::now() < warm_until) operation();
    const std::int64_t cpu_before = process_cpu_ns();
    measurement = measure(operation, budget);
    measurement.cpu_ns = process_cpu_ns() - cpu_before;
  });
  return measurement;
}

void count_case(const Case& c, const Templates& templates, std::int64_t operations,
                const Replacement* replacement) {
  with_operation(c, templates, 0, replacement, [&](auto& operation) {
    using Operation = std::remove_reference_t<decltype(operation)>;
    for (int i = 0; i < 1000; ++i) operation();  // prepares the statements, warms the cache
    quota_bench_run_ops([](void* context) { return (*static_cast<Operation*>(context))(); },
                        &operation, operations);
  });
}

std::string Case::name() const {
  std::string name = subject_name(subject);
  if (engine()) name += "/" + std::string(quota::to_string(algorithm));
  name += fmt::format("/{}/{}", setting_name(setting), owners);
  if (log_limit > 0) name += fmt::format("/limit_{}", log_limit);
  if (clients > 1) name += fmt::format("/{}_clients", clients);
  if (watched) name += "/watched";
  if (block) name += "/block";
  if (shadow) name += "/shadow";
  if (overridden) name += "/overridden";
  if (calendar) name += "/calendar";
  return name;
}

const char* setting_name(Setting setting) {
  switch (setting) {
    case Setting::memory:
      return "memory";
    case Setting::wal_normal:
      return "wal_normal";
    case Setting::wal_full:
      return "wal_full";
    case Setting::postgresql:
      return "postgresql";
  }
  return "?";
}

const char* subject_name(Subject subject) {
  switch (subject) {
    case Subject::upsert_int:
      return "upsert_int";
    case Subject::upsert_text:
      return "upsert_text";
    case Subject::select_int:
      return "select_int";
    case Subject::select_text:
      return "select_text";
    case Subject::article:
      return "article";
    case Subject::upsert_state:
      return "upsert_state";
    case Subject::upsert_narrow:
      return "upsert_narrow";
    case Subject::consume:
      return "consume";
    case Subject::check:
      return "check";
    case Subject::record:
      return "record";
    case Subject::consume_keyed:
      return "consume_keyed";
    case Subject::replay:
      return "replay";
    case Subject::consume_many:
      return "consume_many";
  }
  return "?";
}

}  // namespace quota_bench
