#include "quota/engine.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "busy.h"
#include "checkpoint.h"
#include "gc.h"
#include "journal.h"
#include "migrations.h"
#include "statements.h"

namespace quota {

std::int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

using detail::Operation;

bool mentions_unknown_limit(const SQLite::Exception& error) {
  return std::string_view(error.what()).find("unknown limit") != std::string_view::npos;
}

Error unknown_limit(std::string_view name) {
  return Error(ErrorCode::unknown_limit,
               fmt::format("unknown limit '{}': define it first (quotactl limit set {} --max N "
                           "--per DURATION, or Engine::define)",
                           name, name),
               name);
}

// Turns SQLite's failures into the library's one error type, with what to do about them.
Error translate(const SQLite::Exception& error, std::chrono::milliseconds busy_timeout) {
  const std::string what = error.what();
  switch (error.getErrorCode() & 0xFF) {
    case SQLITE_BUSY:
      if (error.getExtendedErrorCode() == SQLITE_BUSY_SNAPSHOT) {
        return Error(ErrorCode::busy,
                     "another connection wrote to the database after this transaction first read "
                     "it, so the transaction cannot write (SQLITE_BUSY_SNAPSHOT): roll it back "
                     "and run it again; a transaction that consumes should begin with BEGIN "
                     "IMMEDIATE");
      }
      [[fallthrough]];
    case SQLITE_LOCKED:
      return Error(ErrorCode::busy,
                   fmt::format("the database stayed locked by another connection for longer than "
                               "the busy timeout ({} ms): retry later or raise the timeout",
                               busy_timeout.count()));
    case SQLITE_NOTADB:
      return Error(ErrorCode::not_a_database,
                   "the file is not a SQLite database (" + what +
                       "): point quota at a quota database or a new path");
    case SQLITE_CONSTRAINT:
      return Error(ErrorCode::invalid_argument,
                   "the database refused a value (" + what + "): check the arguments");
    case SQLITE_CORRUPT:
      return Error(ErrorCode::io,
                   "the database file is corrupt (" + what + "): restore it from a backup");
    case SQLITE_READONLY:
      if (detail::is_hot_journal(error)) {
        return Error(ErrorCode::io, detail::hot_journal_message("the database"));
      }
      return Error(ErrorCode::io,
                   "the database cannot be written (" + what +
                       "): check the permissions of the file and of its folder (WAL mode keeps "
                       "-wal and -shm files beside it)");
    case SQLITE_FULL:
      return Error(ErrorCode::io, "the disk is full (" + what + "): free space and retry");
    case SQLITE_CANTOPEN:
      return Error(ErrorCode::io, "a file of the database cannot be opened (" + what +
                                      "): check that the file and its folder exist and can be "
                                      "written (WAL mode keeps -wal and -shm files beside it)");
    case SQLITE_IOERR:
      return Error(ErrorCode::io, "the disk failed to read or write the database (" + what +
                                      "): check the disk and its free space, then retry");
    default:
      return Error(ErrorCode::io, "database error: " + what);
  }
}

// A failure of the database itself rather than of the request: what fail_open answers.
bool is_store_failure(ErrorCode code) {
  return code == ErrorCode::busy || code == ErrorCode::io || code == ErrorCode::not_a_database;
}

// A prepared statement of the engine with its parameter positions looked up once. The hot
// path uses SQLite's C API directly: SQLiteCpp cannot bind text with an explicit length
// without copying it.
struct Prepared {
  Prepared(SQLite::Database& db, const std::string& sql) {
    sqlite3_stmt* raw = nullptr;
    const int status = sqlite3_prepare_v3(db.getHandle(), sql.c_str(), -1,
                                          SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (status != SQLITE_OK) throw SQLite::Exception(db.getHandle(), status);
    statement.reset(raw);
    limit = sqlite3_bind_parameter_index(raw, ":limit");
    owner = sqlite3_bind_parameter_index(raw, ":owner");
    cost = sqlite3_bind_parameter_index(raw, ":cost");
    now = sqlite3_bind_parameter_index(raw, ":now");
  }

  struct Finalize {
    void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
  };
  std::unique_ptr<sqlite3_stmt, Finalize> statement;
  int limit = 0, owner = 0, cost = 0, now = 0;
};

void bind_text(sqlite3_stmt* statement, int index, std::string_view text) {
  if (index == 0) return;
  sqlite3_bind_text(statement, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
}

void bind_integer(sqlite3_stmt* statement, int index, std::int64_t value) {
  if (index == 0) return;
  sqlite3_bind_int64(statement, index, value);
}

Result read_result(sqlite3_stmt* row) {
  Result result;
  result.allowed = sqlite3_column_int64(row, 0) != 0;
  const auto* reason = reinterpret_cast<const char*>(sqlite3_column_text(row, 1));
  result.reason = parse_reason(reason ? reason : "").value_or(Reason::rate_limited);
  result.remaining = sqlite3_column_int64(row, 2);
  result.retry_after_ms = sqlite3_column_int64(row, 3);
  result.reset_at_ms = sqlite3_column_int64(row, 4);
  result.denied = sqlite3_column_int64(row, 5);
  result.shadow_denied = sqlite3_column_int64(row, 6) != 0;
  return result;
}

Limit read_limit(SQLite::Statement& row) {
  Limit limit;
  limit.name = row.getColumn(0).getString();
  limit.algorithm = parse_algorithm(row.getColumn(1).getString()).value_or(Algorithm::sliding_log);
  limit.maximum = row.getColumn(2).getInt64();
  limit.period = std::chrono::milliseconds(row.getColumn(3).getInt64());
  if (!row.getColumn(4).isNull()) limit.burst = row.getColumn(4).getInt64();
  limit.shadow = row.getColumn(5).getInt() != 0;
  return limit;
}

constexpr const char* kSelectLimits =
    "SELECT name, algorithm, maximum, period_ms, burst, shadow FROM quota_limits";

std::optional<Limit> get_locked(SQLite::Database& db, std::string_view name) {
  SQLite::Statement query(db, std::string(kSelectLimits) + " WHERE name = ?");
  query.bind(1, std::string(name));
  if (!query.executeStep()) return std::nullopt;
  return read_limit(query);
}

// A savepoint of one operation: rolled back unless released, so that a hook that throws
// (or any other failure) leaves nothing of the operation behind. Inside the application's
// open transaction it nests; otherwise it is the transaction.
class OperationSavepoint {
 public:
  explicit OperationSavepoint(SQLite::Database& db) : db_(db) {
    db_.exec("SAVEPOINT quota_operation");
  }
  ~OperationSavepoint() {
    if (open_) {
      // A destructor never throws; if even the rollback fails, the connection reports it at
      // the next statement.
      sqlite3_exec(db_.getHandle(), "ROLLBACK TO quota_operation; RELEASE quota_operation", nullptr,
                   nullptr, nullptr);
    }
  }
  OperationSavepoint(const OperationSavepoint&) = delete;
  OperationSavepoint& operator=(const OperationSavepoint&) = delete;

  // Undoes everything since the savepoint began and keeps it open.
  void roll_back() { db_.exec("ROLLBACK TO quota_operation"); }
  void release() {
    db_.exec("RELEASE quota_operation");
    open_ = false;
  }

 private:
  SQLite::Database& db_;
  bool open_ = true;
};

// Whether `a` decides a consume_all over `b`: a denial over an allowance, a longer wait
// over a shorter one (-1, never, is the longest), fewer units left among allowances.
bool decides_over(const Result& a, const Result& b) {
  if (a.allowed != b.allowed) return !a.allowed;
  if (!a.allowed) {
    if (b.retry_after_ms < 0) return false;
    return a.retry_after_ms < 0 || a.retry_after_ms > b.retry_after_ms;
  }
  return a.remaining < b.remaining;
}

}  // namespace

struct Engine::Impl {
  Impl(std::unique_ptr<SQLite::Database> owned_database, SQLite::Database& database,
       Options engine_options)
      : owned(std::move(owned_database)),
        db(database),
        options(std::move(engine_options)),
        busy(options.busy_timeout) {
    if (!options.clock) options.clock = system_clock_ms;
  }

  std::unique_ptr<SQLite::Database> owned;
  SQLite::Database& db;
  Options options;
  detail::BusyHandler busy;
  std::mutex mutex;  // one operation at a time on the connection
  std::map<std::pair<Operation, Algorithm>, std::unique_ptr<Prepared>> prepared;
  // limit name -> algorithm; std::less<> finds a string_view without building a string
  std::map<std::string, Algorithm, std::less<>> algorithms;
  // limit name -> its hooks (set_hooks); empty for most engines, so no lookup costs much
  std::map<std::string, Hooks, std::less<>> hooks;

  template <typename Function>
  auto guarded(Function&& function) -> decltype(function()) {
    std::lock_guard lock(mutex);
    try {
      return function();
    } catch (const SQLite::Exception& error) {
      throw translate(error, options.busy_timeout);
    }
  }

  // Runs one of the operations that answer whether a request may proceed (consume, check,
  // record) under Options::failure_policy: the one place where a failure of the database
  // may become an answer.
  Result decide(Operation operation, std::string_view limit, std::string_view owner,
                std::int64_t cost) {
    std::optional<Error> failure;
    {
      std::lock_guard lock(mutex);
      try {
        return run_with_hooks(operation, limit, owner, cost);
      } catch (const SQLite::Exception& error) {
        failure = translate(error, options.busy_timeout);
        const bool snapshot = error.getExtendedErrorCode() == SQLITE_BUSY_SNAPSHOT;
        if (options.failure_policy == FailurePolicy::fail_closed || snapshot ||
            !is_store_failure(failure->code())) {
          throw *failure;
        }
      }
    }
    if (options.on_error) options.on_error(*failure);
    Result answer;
    answer.reason = Reason::store_unavailable;
    answer.reset_at_ms = options.clock();
    return answer;
  }

  void start(bool file_database) {
    busy.install(db.getHandle());
    // Every step of start_once is safe to run again (migrations re-check inside their write
    // transaction), so it is waited out as a whole: openers of a new file meet while it is
    // still in rollback-journal mode, where SQLite answers busy without waiting.
    try {
      busy.wait_out([&] { start_once(file_database); }, db.getHandle());
    } catch (const SQLite::Exception& error) {
      throw translate(error, options.busy_timeout);
    }
    if (options.restart_checkpoint) detail::install_checkpoint(db.getHandle());
  }

  // Throws SQLite::Exception for a failure of SQLite, Error for a database it refuses.
  void start_once(bool file_database) {
    // Reading the header first: a file that is not a database fails here, unchanged. On a
    // connection that can write, this read also rolls back a transaction a killed process left
    // unfinished (a hot journal).
    db.exec("SELECT count(*) FROM sqlite_schema");
    // Every refusal comes before the switch to WAL, which rewrites the file's header: a
    // database this build will not use is left exactly as it was.
    const detail::SchemaStatus status = detail::read_schema_status(db);
    detail::require_usable(status);
    if (!status.pending.empty() && !options.migrate) {
      throw Error(ErrorCode::not_migrated,
                  fmt::format("the database is at schema version {} and needs migrations up "
                              "to {}: run `quotactl migrate` (or open with migrate enabled)",
                              status.version, detail::latest_version()));
    }
    if (file_database) {
      db.exec("PRAGMA journal_mode = WAL");
      db.exec(options.synchronous_full ? "PRAGMA synchronous = FULL"
                                       : "PRAGMA synchronous = NORMAL");
    }
    std::vector<int> applied;
    if (!status.pending.empty()) detail::apply_pending(db, options.clock(), applied);
  }

  Prepared& statement(Operation operation, Algorithm algorithm) {
    auto& slot = prepared[{operation, algorithm}];
    if (!slot) slot = std::make_unique<Prepared>(db, detail::statement(operation, algorithm));
    return *slot;
  }

  // The limit's algorithm, from the cache or the database; nullopt when there is no limit.
  std::optional<Algorithm> algorithm_of(std::string_view name, bool refresh) {
    const auto found = algorithms.find(name);
    if (found != algorithms.end()) {
      if (!refresh) return found->second;
      algorithms.erase(found);
    }
    const std::string key(name);
    SQLite::Statement query(db, "SELECT algorithm FROM quota_limits WHERE name = ?");
    query.bind(1, key);
    if (!query.executeStep()) return std::nullopt;
    const auto algorithm = parse_algorithm(query.getColumn(0).getString());
    if (algorithm) algorithms.emplace(key, *algorithm);
    return algorithm;
  }

  // Runs `operation`'s one statement. The statement of each algorithm only matches limits
  // of that algorithm, so a limit redefined by another connection is noticed (no row, or
  // "unknown limit") and the statement of its new algorithm is run instead.
  Result run(Operation operation, std::string_view limit, std::string_view owner,
             std::int64_t cost) {
    return run_at(operation, limit, owner, cost, now());
  }

  std::int64_t now() {
    const std::int64_t now = options.clock();
    if (now < 0) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("the clock returned {}: times are Unix milliseconds >= 0", now));
    }
    return now;
  }

  Result run_at(Operation operation, std::string_view limit, std::string_view owner,
                std::int64_t cost, std::int64_t now) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const auto algorithm = algorithm_of(limit, attempt > 0);
      if (!algorithm) throw unknown_limit(limit);
      try {
        const std::optional<Result> result =
            step(statement(operation, *algorithm), limit, owner, cost, now, read_result);
        if (result) return *result;
      } catch (const SQLite::Exception& error) {
        if (!mentions_unknown_limit(error)) throw;
      }
    }
    throw unknown_limit(limit);
  }

  // Binds the request to `prepared`, steps it to the end and resets it. Returns its first row
  // as `read` reads it, nullopt when there is none. The answer is read from the first row,
  // but it stands only once the statement is done: a write (and, outside a transaction, its
  // commit) that fails at the end, on a full disk say, throws SQLite::Exception.
  //
  // The bindings are left in place after the reset: every call binds all four parameters
  // before it steps, so the text they point to is never read again. Clearing them
  // (sqlite3_clear_bindings) expires a statement whose plan SQLite made with a bound value in
  // view, and SQLite 3.54 does that for every `column = :parameter` of the check statements,
  // so each check was prepared again (about 70 times its cost).
  template <typename Read>
  auto step(Prepared& prepared, std::string_view limit, std::string_view owner, std::int64_t cost,
            std::int64_t now, Read read) -> std::optional<decltype(read(nullptr))> {
    sqlite3_stmt* raw = prepared.statement.get();
    bind_text(raw, prepared.limit, limit);
    bind_text(raw, prepared.owner, owner);
    bind_integer(raw, prepared.cost, cost);
    bind_integer(raw, prepared.now, now);
    int status = sqlite3_step(raw);
    std::optional<decltype(read(nullptr))> row;
    if (status == SQLITE_ROW) {
      row = read(raw);
      while ((status = sqlite3_step(raw)) == SQLITE_ROW) {
      }
    }
    const int reset_status = sqlite3_reset(raw);
    if (status != SQLITE_DONE || reset_status != SQLITE_OK) {
      throw SQLite::Exception(db.getHandle(), reset_status != SQLITE_OK ? reset_status : status);
    }
    return row;
  }

  // `owner`'s usage of `limit` at `now`, by the limit's check statement (which changes
  // nothing); nullopt when the statement finds no such limit.
  std::optional<Usage> usage_at(Algorithm algorithm, std::string_view limit, std::string_view owner,
                                std::int64_t now) {
    return step(statement(Operation::check, algorithm), limit, owner, 1, now,
                [&](sqlite3_stmt* row) {
                  const Result result = read_result(row);
                  return Usage{std::string(limit),
                               std::string(owner),
                               sqlite3_column_int64(row, 7),
                               result.remaining,
                               result.denied,
                               result.reset_at_ms,
                               sqlite3_column_int64(row, 8),
                               sqlite3_column_int64(row, 9)};
                });
  }

  // ---------------------------------------------------------------------------------------
  // Hooks (docs/).   An operation on a limit without hooks runs its one statement and
  // nothing else; with hooks, it runs inside a savepoint so that a hook that throws takes
  // the whole operation back.

  const Hooks* hooks_of(std::string_view limit) const {
    if (hooks.empty()) return nullptr;
    const auto found = hooks.find(limit);
    return found == hooks.end() ? nullptr : &found->second;
  }

  // A consume that before_consume refused: the figures of a check, nothing written.
  Result hook_denial(const Request& request) {
    Result result =
        run_at(Operation::check, request.limit, request.owner, request.cost, request.now_ms);
    result.allowed = false;
    result.reason = Reason::hook_denied;
    result.retry_after_ms = -1;
    result.shadow_denied = false;
    return result;
  }

  // on_exceeded (on a denial), then `after`.
  static void after_decision(const Hooks& limit_hooks,
                             const std::function<void(const Request&, const Result&)>& after,
                             const Request& request, const Result& result) {
    if (!result.allowed && limit_hooks.on_exceeded) limit_hooks.on_exceeded(request, result);
    if (after) after(request, result);
  }

  // consume and record with the limit's hooks (if any); the other operations have none. A
  // limit without hooks runs its statement alone; with hooks, the before hook (which may
  // refuse a consume), the statement and the after hooks share one savepoint.
  Result run_with_hooks(Operation operation, std::string_view limit, std::string_view owner,
                        std::int64_t cost) {
    const bool consuming = operation == Operation::consume;
    const Hooks* limit_hooks =
        consuming || operation == Operation::record ? hooks_of(limit) : nullptr;
    if (!limit_hooks) return run(operation, limit, owner, cost);
    const Request request{limit, owner, cost, now()};
    OperationSavepoint savepoint(db);
    bool refused = false;
    if (consuming) {
      refused = limit_hooks->before_consume && !limit_hooks->before_consume(request);
    } else if (limit_hooks->before_record) {
      limit_hooks->before_record(request);
    }
    const Result result =
        refused ? hook_denial(request) : run_at(operation, limit, owner, cost, request.now_ms);
    after_decision(*limit_hooks, consuming ? limit_hooks->after_consume : limit_hooks->after_record,
                   request, result);
    savepoint.release();
    return result;
  }

  // consume_all: every limit's before_consume first, then every consume in one savepoint;
  // on a denial, everything is rolled back and the deciding limit alone is consumed again,
  // which denies again (same state, same time) and so counts the denial.
  Decision consume_all(const std::vector<Charge>& charges, std::int64_t cost) {
    const std::int64_t at = now();
    OperationSavepoint savepoint(db);
    for (const Charge& charge : charges) {
      const Hooks* limit_hooks = hooks_of(charge.limit);
      const Request request{charge.limit, charge.owner, cost, at};
      if (limit_hooks && limit_hooks->before_consume && !limit_hooks->before_consume(request)) {
        Decision decision{std::string(charge.limit), hook_denial(request)};
        after_decision(*limit_hooks, limit_hooks->after_consume, request, decision.result);
        savepoint.release();
        return decision;
      }
    }
    std::vector<Result> results;
    std::size_t deciding = 0;
    for (std::size_t i = 0; i < charges.size(); ++i) {
      results.push_back(run_at(Operation::consume, charges[i].limit, charges[i].owner, cost, at));
      if (decides_over(results[i], results[deciding])) deciding = i;
    }
    const bool allowed = results[deciding].allowed;
    if (!allowed) {
      savepoint.roll_back();
      results[deciding] =
          run_at(Operation::consume, charges[deciding].limit, charges[deciding].owner, cost, at);
    }
    for (std::size_t i = 0; i < charges.size(); ++i) {
      if (!allowed && i != deciding) continue;
      if (const Hooks* limit_hooks = hooks_of(charges[i].limit)) {
        after_decision(*limit_hooks, limit_hooks->after_consume,
                       {charges[i].limit, charges[i].owner, cost, at}, results[i]);
      }
    }
    savepoint.release();
    return {std::string(charges[deciding].limit), results[deciding]};
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::open(const std::string& path, Options options) {
  if (path.empty()) {
    throw Error(ErrorCode::invalid_argument, "no database path given: pass a file name");
  }
  const bool in_memory = path == ":memory:";
  if (!in_memory && !options.create && !std::filesystem::exists(path)) {
    throw Error(ErrorCode::io, fmt::format("database '{}' does not exist: create it with "
                                           "`quotactl migrate --db {}`",
                                           path, path));
  }
  if (!in_memory && std::filesystem::is_directory(path)) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give the path of a database file", path));
  }
  std::unique_ptr<SQLite::Database> database;
  try {
    const int flags =
        SQLite::OPEN_READWRITE | (options.create ? SQLite::OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
    database = std::make_unique<SQLite::Database>(path, flags);
  } catch (const SQLite::Exception& error) {
    throw Error(ErrorCode::io, fmt::format("cannot open database '{}' ({}): check the path and "
                                           "its permissions",
                                           path, error.what()));
  }
  SQLite::Database& db = *database;
  auto impl = std::make_unique<Impl>(std::move(database), db, std::move(options));
  impl->start(!in_memory);
  return Engine(std::move(impl));
}

Engine::Engine(SQLite::Database& database, Options options)
    : impl_(std::make_unique<Impl>(nullptr, database, std::move(options))) {
  impl_->start(false);
}

void Engine::define(const Limit& limit) {
  validate_limit(limit);
  impl_->guarded([&] {
    // Same algorithm: the owners' rows stay and are read with the new numbers from their
    // next operation on (a window row written under another period counts in the window
    // that holds its seen_ms). Another algorithm: quota_limits' trigger discards the state.
    SQLite::Statement upsert(
        impl_->db,
        "INSERT INTO quota_limits (name, algorithm, maximum, period_ms, burst, "
        "shadow) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
        "algorithm = excluded.algorithm, maximum = excluded.maximum, "
        "period_ms = excluded.period_ms, burst = excluded.burst, "
        "shadow = excluded.shadow");
    upsert.bind(1, limit.name);
    upsert.bind(2, std::string(to_string(limit.algorithm)));
    upsert.bind(3, static_cast<int64_t>(limit.maximum));
    upsert.bind(4, static_cast<int64_t>(limit.period.count()));
    if (limit.algorithm == Algorithm::token_bucket) {
      upsert.bind(5, static_cast<int64_t>(limit.capacity()));
    } else {
      upsert.bind(5);
    }
    upsert.bind(6, limit.shadow ? 1 : 0);
    upsert.exec();
    impl_->algorithms[limit.name] = limit.algorithm;
  });
}

std::optional<Limit> Engine::get(std::string_view name) {
  validate_limit_name(name);
  return impl_->guarded([&] { return get_locked(impl_->db, name); });
}

std::vector<Limit> Engine::list() {
  return impl_->guarded([&] {
    SQLite::Statement query(impl_->db, std::string(kSelectLimits) + " ORDER BY name");
    std::vector<Limit> limits;
    while (query.executeStep()) limits.push_back(read_limit(query));
    return limits;
  });
}

bool Engine::remove(std::string_view name) {
  validate_limit_name(name);
  return impl_->guarded([&] {
    SQLite::Statement erase(impl_->db, "DELETE FROM quota_limits WHERE name = ?");
    erase.bind(1, std::string(name));
    impl_->algorithms.erase(std::string(name));
    return erase.exec() > 0;
  });
}

Result Engine::check(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->decide(Operation::check, limit, owner, cost);
}

Result Engine::consume(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->decide(Operation::consume, limit, owner, cost);
}

Result Engine::record(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->decide(Operation::record, limit, owner, cost);
}

Result Engine::reset(std::string_view limit, std::string_view owner) {
  validate_limit_name(limit);
  validate_owner(owner);
  return impl_->guarded([&] { return impl_->run(Operation::reset, limit, owner, 1); });
}

Result Engine::refund(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->guarded([&] { return impl_->run(Operation::refund, limit, owner, cost); });
}

Decision Engine::consume_all(const std::vector<std::string_view>& limits, std::string_view owner,
                             std::int64_t cost) {
  std::vector<Charge> charges;
  charges.reserve(limits.size());
  for (std::string_view limit : limits) charges.push_back({limit, owner});
  return consume_all(charges, cost);
}

Decision Engine::consume_all(const std::vector<Charge>& charges, std::int64_t cost) {
  if (charges.empty()) {
    throw Error(ErrorCode::invalid_argument, "consume_all needs at least one limit: name them");
  }
  for (std::size_t i = 0; i < charges.size(); ++i) {
    validate_limit_name(charges[i].limit);
    const auto named_before = charges.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find_if(charges.begin(), named_before, [&](const Charge& earlier) {
          return earlier.limit == charges[i].limit;
        }) != named_before) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("limit '{}' is named twice: name each limit once", charges[i].limit));
    }
    validate_owner(charges[i].owner);
  }
  validate_cost(cost);
  return impl_->guarded([&] { return impl_->consume_all(charges, cost); });
}

void Engine::set_hooks(std::string_view limit, Hooks hooks) {
  validate_limit_name(limit);
  impl_->guarded([&] {
    if (hooks.empty()) {
      if (const auto found = impl_->hooks.find(limit); found != impl_->hooks.end()) {
        impl_->hooks.erase(found);
      }
    } else {
      impl_->hooks.insert_or_assign(std::string(limit), std::move(hooks));
    }
  });
}

void Engine::set_override(const Override& override) {
  validate_override(override);
  impl_->guarded([&] {
    if (override.limit != kEveryLimit) {
      const std::optional<Limit> limit = get_locked(impl_->db, override.limit);
      if (!limit) throw unknown_limit(override.limit);
      if (override.maximum) {
        Limit as_owner_sees_it = *limit;
        as_owner_sees_it.maximum = *override.maximum;
        if (limit->algorithm == Algorithm::token_bucket) {
          as_owner_sees_it.burst = override.burst.value_or(*override.maximum);
        } else {
          as_owner_sees_it.burst = override.burst;
        }
        try {
          validate_limit(as_owner_sees_it);
        } catch (const Error& error) {
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("the override for owner '{}' does not fit limit '{}': {}",
                                  override.owner, override.limit, error.what()));
        }
      }
    }
    SQLite::Statement upsert(impl_->db,
                             "INSERT INTO quota_overrides (limit_name, owner, policy, maximum, "
                             "burst) VALUES (?, ?, ?, ?, ?) ON CONFLICT (limit_name, owner) DO "
                             "UPDATE SET policy = excluded.policy, maximum = excluded.maximum, "
                             "burst = excluded.burst");
    upsert.bind(1, override.limit);
    upsert.bind(2, override.owner);
    upsert.bind(3, std::string(to_string(override.policy)));
    if (override.maximum) upsert.bind(4, static_cast<int64_t>(*override.maximum));
    if (override.burst) upsert.bind(5, static_cast<int64_t>(*override.burst));
    upsert.exec();
  });
}

bool Engine::remove_override(std::string_view limit, std::string_view owner) {
  if (limit != kEveryLimit) validate_limit_name(limit);
  validate_owner(owner);
  return impl_->guarded([&] {
    SQLite::Statement erase(impl_->db,
                            "DELETE FROM quota_overrides WHERE limit_name = ? AND owner = ?");
    erase.bind(1, std::string(limit));
    erase.bind(2, std::string(owner));
    return erase.exec() > 0;
  });
}

std::vector<Override> Engine::overrides(std::optional<std::string_view> limit) {
  if (limit && *limit != kEveryLimit) validate_limit_name(*limit);
  return impl_->guarded([&] {
    SQLite::Statement query(impl_->db,
                            "SELECT limit_name, owner, policy, maximum, burst FROM quota_overrides "
                            "WHERE ?1 IS NULL OR limit_name = ?1 ORDER BY limit_name, owner");
    if (limit) query.bind(1, std::string(*limit));
    std::vector<Override> found;
    while (query.executeStep()) {
      Override row;
      row.limit = query.getColumn(0).getString();
      row.owner = query.getColumn(1).getString();
      row.policy = parse_policy(query.getColumn(2).getString()).value_or(Policy::deny);
      if (!query.getColumn(3).isNull()) row.maximum = query.getColumn(3).getInt64();
      if (!query.getColumn(4).isNull()) row.burst = query.getColumn(4).getInt64();
      found.push_back(std::move(row));
    }
    return found;
  });
}

std::vector<Usage> Engine::usage(std::string_view limit, std::size_t top, UsageOrder order) {
  validate_limit_name(limit);
  return impl_->guarded([&] {
    const auto algorithm = impl_->algorithm_of(limit, true);
    if (!algorithm) throw unknown_limit(limit);
    // Every owner with state, answered by the same check statement as Engine::check, so the
    // figures are exactly the engine's at the engine's clock. Only the table of the limit's
    // algorithm holds its owners (a change of algorithm discards the others' rows).
    SQLite::Statement owners(impl_->db, fmt::format("SELECT owner FROM {} WHERE limit_name = ?1",
                                                    detail::state_table(*algorithm)));
    owners.bind(1, std::string(limit));
    std::vector<std::string> names;
    while (owners.executeStep()) names.push_back(owners.getColumn(0).getString());
    owners.reset();

    const std::int64_t now = impl_->now();
    std::vector<Usage> rows;
    for (const std::string& owner : names) {
      const std::optional<Usage> row = impl_->usage_at(*algorithm, limit, owner, now);
      if (row && (row->used > 0 || row->denied > 0 || row->shadow_denied > 0)) {
        rows.push_back(*row);
      }
    }
    std::stable_sort(rows.begin(), rows.end(), [order](const Usage& a, const Usage& b) {
      if (order == UsageOrder::denied && a.denied != b.denied) return a.denied > b.denied;
      if (order == UsageOrder::shadow_denied && a.shadow_denied != b.shadow_denied) {
        return a.shadow_denied > b.shadow_denied;
      }
      return a.used != b.used ? a.used > b.used : a.owner < b.owner;
    });
    if (top > 0 && rows.size() > top) rows.resize(top);
    return rows;
  });
}

Usage Engine::owner_usage(std::string_view limit, std::string_view owner) {
  validate_limit_name(limit);
  validate_owner(owner);
  return impl_->guarded([&] {
    const auto algorithm = impl_->algorithm_of(limit, true);
    if (!algorithm) throw unknown_limit(limit);
    const std::optional<Usage> row = impl_->usage_at(*algorithm, limit, owner, impl_->now());
    if (!row) throw unknown_limit(limit);
    return *row;
  });
}

std::int64_t Engine::gc(std::size_t batch_rows,
                        const std::function<void(const GcProgress&)>& progress) {
  // Each batch takes the lock on its own, so that other threads' operations run between them.
  const detail::Exclusive exclusive = [this](const std::function<void(SQLite::Database&)>& work) {
    impl_->guarded([&] { work(impl_->db); });
  };
  return detail::collect_garbage(exclusive, impl_->options.clock(), batch_rows, progress);
}

int Engine::schema_version() {
  return impl_->guarded([&] { return detail::read_schema_status(impl_->db).version; });
}

}  // namespace quota
