// The SQLite store: the engine's statements on a SQLite connection, through SQLite's C API
// on the hot path (SQLiteCpp cannot bind text with an explicit length without copying it).
#include "sqlite/sqlite_store.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "sqlite/busy.h"
#include "sqlite/checkpoint.h"
#include "sqlite/journal.h"
#include "sqlite/sqlite_files.h"

namespace quota::detail {

void throw_sqlite(const SQLite::Exception& error, std::chrono::milliseconds busy_timeout,
                  bool timed_out) {
  if ((error.getErrorCode() & 0xFF) == SQLITE_BUSY &&
      error.getExtendedErrorCode() == SQLITE_BUSY_SNAPSHOT) {
    throw TransactionConflict(
        ErrorCode::busy,
        "another connection wrote to the database after this transaction first read it, so the "
        "transaction cannot write (SQLITE_BUSY_SNAPSHOT): roll it back and run it again; a "
        "transaction that consumes should begin with BEGIN IMMEDIATE");
  }
  throw translate_sqlite(error, busy_timeout, {}, timed_out);
}

namespace {

// Why this process cannot write the database at `path` (unknown when empty), and what to do.
std::string why_read_only(const std::string& path) {
  constexpr const char* kCheck =
      "check the permissions of the file and of its folder (WAL mode keeps -wal and -shm files "
      "beside it)";
  if (path.empty()) return kCheck;
  if (access(path.c_str(), W_OK) != 0) {
    return "the file is read-only for this user: run as a user who may write it, or use only "
           "what reads";
  }
  std::error_code ignored;
  const std::filesystem::path folder = std::filesystem::absolute(path, ignored).parent_path();
  if (access(folder.c_str(), W_OK) != 0) {
    return "its folder " + folder.string() +
           " cannot be written, and WAL mode keeps -wal and -shm files beside the database: run "
           "as a user who may write the folder, or use only what reads";
  }
  return kCheck;
}

}  // namespace

Error translate_sqlite(const SQLite::Exception& error, std::chrono::milliseconds busy_timeout,
                       const std::string& path, bool timed_out) {
  const std::string what = error.what();
  if (what.find("unknown limit") != std::string::npos) {
    return Error(ErrorCode::unknown_limit, "unknown limit: " + what);
  }
  // How the messages name the database: by its path when the caller knows it.
  const auto named = [&](const char* otherwise) {
    return path.empty() ? std::string(otherwise) : "'" + path + "'";
  };
  switch (error.getErrorCode() & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      if (!timed_out) {
        return Error(ErrorCode::busy,
                     fmt::format("{} was locked by another connection, and SQLite answered busy "
                                 "at once instead of waiting (a transaction that read before it "
                                 "writes cannot wait for the write lock): retry; a transaction "
                                 "of your own that writes should begin with BEGIN IMMEDIATE",
                                 named("the database")));
      }
      if (!path.empty()) {
        return Error(ErrorCode::busy,
                     fmt::format("{} stayed locked by another connection past the busy timeout "
                                 "({} ms): retry when it is less busy, or raise the timeout",
                                 named(""), busy_timeout.count()));
      }
      return Error(ErrorCode::busy,
                   fmt::format("the database stayed locked by another connection for longer than "
                               "the busy timeout ({} ms): retry later or raise the timeout",
                               busy_timeout.count()));
    case SQLITE_NOTADB:
      return Error(ErrorCode::not_a_database,
                   named("the file") + " is not a SQLite database (" + what +
                       "): point quota at a quota database or a new path");
    case SQLITE_CONSTRAINT:
      return Error(ErrorCode::invalid_argument,
                   "the database refused a value (" + what + "): check the arguments");
    case SQLITE_CORRUPT:
      return Error(ErrorCode::io, named("the database file") + " is corrupt (" + what +
                                      "): restore it from a backup");
    case SQLITE_READONLY:
      if (is_hot_journal(error)) {
        return Error(ErrorCode::io, path.empty()
                                        ? hot_journal_message("the database")
                                        : hot_journal_message(named(""), path + "-journal"));
      }
      return Error(ErrorCode::io, named("the database") + " cannot be written (" + what +
                                      "): " + why_read_only(path));
    case SQLITE_FULL:
      return Error(ErrorCode::io, (path.empty() ? "the disk" : "the disk holding " + named("")) +
                                      " is full (" + what + "): free space and retry");
    case SQLITE_CANTOPEN:
      return Error(ErrorCode::io, "a file of " + named("the database") + " cannot be opened (" +
                                      what +
                                      "): check that the file and its folder exist and can be "
                                      "written (WAL mode keeps -wal and -shm files beside it)");
    case SQLITE_IOERR:
      return Error(ErrorCode::io, "the disk failed to read or write " + named("the database") +
                                      " (" + what +
                                      "): check the disk and its free space, then "
                                      "retry");
    default:
      return Error(ErrorCode::io, path.empty() ? "database error: " + what
                                               : "cannot use " + named("") + " (" + what +
                                                     "): check the path, its permissions and "
                                                     "the disk");
  }
}

namespace {

// A prepared request statement with its parameter positions looked up once.
struct Prepared {
  Prepared(sqlite3* db, const std::string& sql) {
    sqlite3_stmt* raw = nullptr;
    const int status =
        sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (status != SQLITE_OK) throw SQLite::Exception(db, status);
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

Row read_row(sqlite3_stmt* row) {
  Row values;
  const int columns = sqlite3_column_count(row);
  values.reserve(static_cast<std::size_t>(columns));
  for (int c = 0; c < columns; ++c) {
    switch (sqlite3_column_type(row, c)) {
      case SQLITE_NULL:
        values.emplace_back(std::monostate{});
        break;
      case SQLITE_INTEGER:
      case SQLITE_FLOAT:
        values.emplace_back(static_cast<std::int64_t>(sqlite3_column_int64(row, c)));
        break;
      default: {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(row, c));
        values.emplace_back(
            std::string(text ? text : "", static_cast<std::size_t>(sqlite3_column_bytes(row, c))));
      }
    }
  }
  return values;
}

class SqliteStore final : public Store {
 public:
  SqliteStore(std::unique_ptr<SQLite::Database> owned, SQLite::Database& database,
              SqliteSettings settings)
      : owned_(std::move(owned)), db_(database), settings_(settings), busy_(settings.busy_timeout) {
    if (settings_.install_busy_handler) busy_.install(db_.getHandle());
  }

  const Dialect& dialect() const override { return kSqlite; }
  Capabilities capabilities() const override {
    return {.single_writer = true, .atomic_statements = true};
  }
  const std::vector<Migration>& migrations() const override { return built_in_sqlite_migrations(); }

  std::optional<Row> run(Operation operation, StatementKind kind,
                         const StatementRequest& request) override {
    // On the database's clock (:now NULL) the statement runs whole: its two parts would each
    // read the clock, and the answer's wait would be measured from a later time than the
    // decision's.
    if (const PlainParts* parts = request.now ? plain_parts(kSqlite, operation, kind) : nullptr) {
      return run_parts(operation, kind, *parts, request);
    }
    return guarded([&] { return step(statement(operation, kind), request); });
  }

  // A plain consume or record as its two parts (src/statements.h, plain_parts), in the
  // transaction open, or in one of its own (BEGIN IMMEDIATE: the write lock from the start,
  // for the busy handler to wait for).
  std::optional<Row> run_parts(Operation operation, StatementKind kind, const PlainParts& parts,
                               const StatementRequest& request) {
    return guarded([&]() -> std::optional<Row> {
      auto& [write, answer] = parts_[{operation, kind}];
      if (!write) {
        write = std::make_unique<Prepared>(db_.getHandle(), parts.write);
        answer = std::make_unique<Prepared>(db_.getHandle(), parts.answer);
      }
      const bool own = !in_transaction();
      if (own) begin_exclusive(Exclusive::requests);
      try {
        step(*write, request);
        // No row changed: an owner without state (the engine runs the general statement).
        std::optional<Row> row;
        if (sqlite3_changes64(db_.getHandle()) > 0) row = step(*answer, request);
        if (own) commit();
        return row;
      } catch (...) {
        if (own) rollback();
        throw;
      }
    });
  }

  // Binds `request` to `prepared`, steps it to its end and returns its first row. Throws
  // SQLite::Exception.
  std::optional<Row> step(Prepared& prepared, const StatementRequest& request) {
    sqlite3_stmt* raw = prepared.statement.get();
    // The bindings stay in place after the reset: every call binds all four parameters
    // before it steps, so the text they point to is never read again. Clearing them
    // (sqlite3_clear_bindings) expires a statement whose plan SQLite made with a bound
    // value in view, and SQLite 3.54 does that for every `column = :parameter` of the check
    // statements, so each check would be prepared again (about 70 times its cost).
    bind_text(raw, prepared.limit, request.limit);
    bind_text(raw, prepared.owner, request.owner);
    bind_integer(raw, prepared.cost, request.cost);
    if (request.now) {
      bind_integer(raw, prepared.now, *request.now);
    } else if (prepared.now != 0) {
      sqlite3_bind_null(raw, prepared.now);
    }
    // The answer is read from the first row, but it stands only once the statement is
    // done: a write (and, outside a transaction, its commit) that fails at the end, on a
    // full disk say, fails the call.
    int status = sqlite3_step(raw);
    std::optional<Row> row;
    if (status == SQLITE_ROW) {
      row = read_row(raw);
      while ((status = sqlite3_step(raw)) == SQLITE_ROW) {
      }
    }
    const int reset_status = sqlite3_reset(raw);
    if (status != SQLITE_DONE || reset_status != SQLITE_OK) {
      throw SQLite::Exception(db_.getHandle(), reset_status != SQLITE_OK ? reset_status : status);
    }
    return row;
  }

  std::vector<std::optional<Row>> run_all(const std::vector<Step>& steps) override {
    begin_exclusive(Exclusive::requests);
    std::vector<std::optional<Row>> rows;
    rows.reserve(steps.size());
    try {
      for (const Step& step : steps) {
        std::optional<Row> row = run(step.operation, step.kind, step.request);
        if (!row && is_specialised(step.kind)) {
          row = run(step.operation, general_kind(step.kind), step.request);
        }
        rows.push_back(std::move(row));
      }
      commit();
    } catch (...) {
      rollback();
      throw;
    }
    return rows;
  }

  std::vector<Row> query(const std::string& sql, const std::vector<Value>& parameters) override {
    return guarded([&] {
      std::vector<Row> rows;
      step_all(sql, parameters, &rows);
      return rows;
    });
  }

  std::int64_t execute(const std::string& sql, const std::vector<Value>& parameters) override {
    return guarded([&] {
      step_all(sql, parameters, nullptr);
      return static_cast<std::int64_t>(sqlite3_changes(db_.getHandle()));
    });
  }

  // Every savepoint is of an operation that writes. Outside a transaction it begins one
  // that holds the write lock from the start (BEGIN IMMEDIATE, which the busy handler waits
  // for), and its release commits it: a deferred transaction that read first could not
  // upgrade to a write while another connection writes (SQLite answers busy at once,
  // without waiting, or SQLITE_BUSY_SNAPSHOT).
  void savepoint(std::string_view name) override {
    const bool begins = !in_transaction();
    if (begins) guarded([&] { step_all("BEGIN IMMEDIATE", {}, nullptr); });
    try {
      exec(fmt::format("SAVEPOINT {}", name));
    } catch (...) {
      if (begins) sqlite3_exec(db_.getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    savepoints_.push_back({std::string(name), begins});
  }
  void rollback_to(std::string_view name) override { exec(fmt::format("ROLLBACK TO {}", name)); }
  void release(std::string_view name) override {
    // Forgotten only once done: a commit that failed is undone by abandon.
    if (began_transaction(name)) {
      guarded([&] { step_all("COMMIT", {}, nullptr); });
    } else {
      exec(fmt::format("RELEASE {}", name));
    }
    forget_savepoint(name);
  }
  void abandon(std::string_view name) noexcept override {
    // If even the rollback fails, the connection reports it at the next statement.
    const std::string sql = forget_savepoint(name)
                                ? std::string("ROLLBACK")
                                : fmt::format("ROLLBACK TO {0}; RELEASE {0}", name);
    sqlite3_exec(db_.getHandle(), sql.c_str(), nullptr, nullptr, nullptr);
  }

  void retry_while_busy(const std::function<void()>& step) override {
    // Every step of the opening is safe to run again (migrations re-check inside their write
    // transaction), so it is waited out as a whole: openers of a new file meet while it is
    // still in rollback-journal mode, where SQLite answers busy without waiting
    // (BusyHandler::wait_out). Inside it SQLite's failures stay SQLite's, for wait_out to
    // tell a busy answer from the others.
    struct Untranslated {
      bool& flag;
      explicit Untranslated(bool& raw) : flag(raw) { flag = true; }
      ~Untranslated() { flag = false; }
    } untranslated(raw_errors_);
    const std::uint64_t timeouts = BusyHandler::timeouts();
    try {
      busy_.wait_out(step, db_.getHandle());
    } catch (const SQLite::Exception& error) {
      fail(error, BusyHandler::timeouts() != timeouts);
    }
  }

  void probe() override {
    // A file that is not a database fails here, unchanged.
    exec("SELECT count(*) FROM sqlite_schema");
  }

  void prepare_for_writing() override {
    if (!settings_.file || settings_.read_only) return;
    guarded([&] { use_wal(db_); });
    exec(settings_.synchronous_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
  }

  void started() override {
    // What opening read before the migrations changed the schema would be prepared again at
    // its next use: the cache starts from the schema as it now is.
    cached_.clear();
    if (settings_.restart_checkpoint) install_checkpoint(db_.getHandle());
  }

  bool in_transaction() override { return sqlite3_get_autocommit(db_.getHandle()) == 0; }

  std::optional<Location> watch_location() override {
    // "" for an in-memory or temporary database
    const char* file = sqlite3_db_filename(db_.getHandle(), "main");
    if (!file || !*file) return std::nullopt;
    return Location{Location::Kind::sqlite_path, file, {}};
  }

  std::optional<std::string> journal_mode() override {
    std::string mode = text_of(query("PRAGMA journal_mode", {}).at(0).at(0));
    // A connection opened immutable says "delete" whatever the file's mode.
    const char* file = sqlite3_db_filename(db_.getHandle(), "main");
    if (mode != "wal" && file && *file && has_wal_header(file)) mode = "wal";
    return mode;
  }

  bool has_table(std::string_view name) override {
    return guarded([&] { return db_.tableExists(std::string(name)); });
  }

  void begin_exclusive(Exclusive) override {
    // BEGIN IMMEDIATE takes the write lock from the start, so that the busy handler waits
    // for it; inside the application's transaction it is a savepoint of that.
    // Prepared once (cached): a lone plain consume begins and commits one of these.
    nested_exclusive_ = in_transaction();
    guarded([&] {
      step_all(nested_exclusive_ ? "SAVEPOINT quota_exclusive" : "BEGIN IMMEDIATE", {}, nullptr);
    });
  }

  void commit() override {
    guarded([&] { step_all(nested_exclusive_ ? "RELEASE quota_exclusive" : "COMMIT", {}, nullptr); });
  }

  void rollback() noexcept override {
    // SQLite may have rolled back already (an I/O error, or the application's transaction).
    sqlite3_exec(
        db_.getHandle(),
        nested_exclusive_ ? "ROLLBACK TO quota_exclusive; RELEASE quota_exclusive" : "ROLLBACK",
        nullptr, nullptr, nullptr);
  }

  void execute_script(const std::string& sql) override { exec(sql); }

 private:
  template <typename Function>
  auto guarded(Function&& function) -> decltype(function()) {
    const std::uint64_t timeouts = BusyHandler::timeouts();
    try {
      return function();
    } catch (const SQLite::Exception& error) {
      if (raw_errors_) throw;
      fail(error, BusyHandler::timeouts() != timeouts);
    }
  }

  // Whether the innermost savepoint named `name` began the transaction.
  bool began_transaction(std::string_view name) const {
    for (auto it = savepoints_.rbegin(); it != savepoints_.rend(); ++it) {
      if (it->name == name) return it->began_transaction;
    }
    return false;
  }
  // Forgets the innermost savepoint named `name`; whether it began the transaction.
  bool forget_savepoint(std::string_view name) noexcept {
    for (auto it = savepoints_.rbegin(); it != savepoints_.rend(); ++it) {
      if (it->name == name) {
        const bool began = it->began_transaction;
        savepoints_.erase(std::next(it).base());
        return began;
      }
    }
    return false;
  }

  // throw_sqlite, naming the file when it cannot be written or opened; `timed_out` as
  // translate_sqlite's.
  [[noreturn]] void fail(const SQLite::Exception& error, bool timed_out = true) {
    const int code = error.getErrorCode() & 0xFF;
    if ((code == SQLITE_READONLY && !is_hot_journal(error)) || code == SQLITE_CANTOPEN) {
      const char* file = sqlite3_db_filename(db_.getHandle(), "main");
      throw translate_sqlite(error, settings_.busy_timeout, file ? file : "");
    }
    throw_sqlite(error, settings_.busy_timeout, timed_out);
  }

  void exec(const std::string& sql) {
    guarded([&] { db_.exec(sql); });
  }

  // Binds ?1, ?2, ... to `sql` (prepared once: cached) and steps it to its end, keeping the
  // rows in `rows` (when given). Throws SQLite::Exception.
  void step_all(const std::string& sql, const std::vector<Value>& parameters,
                std::vector<Row>* rows) {
    sqlite3* db = db_.getHandle();
    sqlite3_stmt* raw = cached(sql);
    // Reset after every use, whatever happens, so that it holds no read open. Its bindings are
    // not cleared (SQLite expires a statement planned with a bound value in view when they
    // are: see the request statements): every parameter is bound again at each use, NULL too.
    struct Done {
      sqlite3_stmt* statement;
      ~Done() { sqlite3_reset(statement); }
    } done{raw};
    int status = SQLITE_OK;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      if (const auto* integer = std::get_if<std::int64_t>(&parameters[i])) {
        sqlite3_bind_int64(raw, index, *integer);
      } else if (const auto* text = std::get_if<std::string>(&parameters[i])) {
        sqlite3_bind_text(raw, index, text->data(), static_cast<int>(text->size()), SQLITE_STATIC);
      } else {
        sqlite3_bind_null(raw, index);
      }
    }
    while ((status = sqlite3_step(raw)) == SQLITE_ROW) {
      if (rows) rows->push_back(read_row(raw));
    }
    if (status != SQLITE_DONE) throw SQLite::Exception(db, sqlite3_reset(raw));
  }

  // The statement of `sql`, prepared once: the engine's other statements (a key's lookup, the
  // limits' reads, gc's batches) are few and run again and again, and preparing costs more
  // than running most of them. Bounded: a connection that somehow runs many distinct texts
  // starts the cache afresh.
  sqlite3_stmt* cached(const std::string& sql) {
    const auto found = cached_.find(sql);
    if (found != cached_.end()) return found->second.get();
    if (cached_.size() >= kCachedStatements) cached_.clear();
    sqlite3* db = db_.getHandle();
    sqlite3_stmt* raw = nullptr;
    const int status = sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr);
    if (status != SQLITE_OK) throw SQLite::Exception(db, status);
    return cached_.emplace(sql, std::unique_ptr<sqlite3_stmt, Prepared::Finalize>(raw))
        .first->second.get();
  }

  Prepared& statement(Operation operation, StatementKind kind) {
    auto& slot = prepared_[{operation, kind}];
    if (!slot) {
      slot = std::make_unique<Prepared>(db_.getHandle(), detail::statement(operation, kind));
    }
    return *slot;
  }

  std::unique_ptr<SQLite::Database> owned_;
  SQLite::Database& db_;
  SqliteSettings settings_;
  BusyHandler busy_;
  std::map<std::pair<Operation, StatementKind>, std::unique_ptr<Prepared>> prepared_;
  // The plain consumes' and records' parts: the write, and the answer's read.
  std::map<std::pair<Operation, StatementKind>,
           std::pair<std::unique_ptr<Prepared>, std::unique_ptr<Prepared>>>
      parts_;
  static constexpr std::size_t kCachedStatements = 64;
  std::unordered_map<std::string, std::unique_ptr<sqlite3_stmt, Prepared::Finalize>> cached_;
  // While the opening is waited out: SQLite's failures are thrown as they are.
  bool raw_errors_ = false;
  // Whether the exclusive transaction in progress is a savepoint of an open transaction.
  bool nested_exclusive_ = false;
  // The savepoints open, innermost last, each with whether it began the transaction.
  struct Savepoint {
    std::string name;
    bool began_transaction;
  };
  std::vector<Savepoint> savepoints_;
};

}  // namespace

void use_wal(SQLite::Database& database) { database.exec("PRAGMA journal_mode = WAL"); }

namespace {

// Whether `db`, opened read-only on `path`, cannot be read for want of a -shm file that SQLite
// cannot make: the first read fails so, no -wal or -journal file holds anything for it, and
// the folder cannot be written.
bool needs_immutable(const std::string& path, SQLite::Database& db) {
  try {
    db.exec("SELECT count(*) FROM sqlite_schema");
    return false;
  } catch (const SQLite::Exception& error) {
    const int code = error.getErrorCode() & 0xFF;
    if (code != SQLITE_READONLY && code != SQLITE_CANTOPEN) return false;
  }
  std::error_code ignored;
  if (std::filesystem::exists(path + "-wal", ignored) ||
      std::filesystem::exists(path + "-journal", ignored)) {
    return false;
  }
  std::filesystem::path folder = std::filesystem::absolute(path, ignored).parent_path();
  return access(folder.c_str(), W_OK) != 0;
}

// `path` as a file: URI that opens it immutable.
std::string immutable_uri(const std::string& path) {
  std::error_code ignored;
  std::string uri = "file:";
  for (const char c : std::filesystem::absolute(path, ignored).lexically_normal().string()) {
    if (c == '%' || c == '?' || c == '#') {
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

bool has_wal_header(const std::string& path) {
  // Bytes 18 and 19 of the header, the file format's write and read versions, are 2 in WAL
  // mode (https://www.sqlite.org/fileformat2.html#file_format_version_numbers).
  std::ifstream file(path, std::ios::binary);
  char header[20] = {};
  if (!file.read(header, sizeof header)) return false;
  return std::string_view(header, 16) == std::string_view("SQLite format 3\0", 16) &&
         header[18] == 2 && header[19] == 2;
}

std::unique_ptr<SQLite::Database> open_for_reading(const std::string& path) {
  std::error_code ignored;
  if (!has_wal_header(path) || std::filesystem::exists(path + "-wal", ignored) ||
      std::filesystem::exists(path + "-shm", ignored)) {
    return open_read_only(path);
  }
  const std::filesystem::path folder = std::filesystem::absolute(path, ignored).parent_path();
  if (access(path.c_str(), W_OK) == 0 && access(folder.c_str(), W_OK) == 0) {
    // As the last connection to close, it removes the -wal and -shm files it made.
    auto db =
        std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
    db->exec("PRAGMA query_only = 1");
    return db;
  }
  // No connection has it open in WAL mode, so the file holds every commit.
  return std::make_unique<SQLite::Database>(
      immutable_uri(path), SQLite::OPEN_READONLY | SQLite::OPEN_URI | SQLITE_OPEN_NOMUTEX);
}

std::unique_ptr<SQLite::Database> open_read_only(const std::string& path) {
  auto db = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  if (!needs_immutable(path, *db)) return db;
  return std::make_unique<SQLite::Database>(
      immutable_uri(path), SQLite::OPEN_READONLY | SQLite::OPEN_URI | SQLITE_OPEN_NOMUTEX);
}

std::unique_ptr<Store> open_sqlite(const std::string& path, bool create, SqliteSettings settings) {
  if (settings.file) refuse_directory(path);
  std::unique_ptr<SQLite::Database> database;
  try {
    // URIs on, whatever SQLite's build says, so that a "file:" path means what
    // classify_location (src/location.h) takes it for.
    const int flags = SQLite::OPEN_READWRITE | (create ? SQLite::OPEN_CREATE : 0) |
                      SQLite::OPEN_URI | SQLITE_OPEN_NOMUTEX;
    database = settings.read_only ? open_read_only(path)
                                  : std::make_unique<SQLite::Database>(path, flags);
  } catch (const SQLite::Exception& error) {
    throw Error(ErrorCode::io, fmt::format("cannot open database '{}' ({}): check the path and "
                                           "its permissions",
                                           path, error.what()));
  }
  SQLite::Database& db = *database;
  return std::make_unique<SqliteStore>(std::move(database), db, settings);
}

std::unique_ptr<Store> sqlite_on_connection(SQLite::Database& database, SqliteSettings settings) {
  settings.file = false;
  return std::make_unique<SqliteStore>(nullptr, database, settings);
}

}  // namespace quota::detail
