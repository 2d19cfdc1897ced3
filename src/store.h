// The storage seam: what the engine asks of a database, and nothing more.
//
// The engine (src/engine/) keeps everything that decides: validation, the lock, the
// failure policy, hooks, consume_all. A Store only executes: it runs the statements of
// src/statements.cpp and the few other statements the engine needs, in its database's
// dialect, and turns that database's failures into quota::Error. Two stores exist:
// src/sqlite/ (a file or the application's own connection) and src/postgresql/ (a server
// reached through libpq); src/open_store.h opens the one a location names. The engine never
// asks which one it has: where the databases behave differently, it asks the store's
// capabilities().
//
// Statements other than the request statements are written once, with numbered parameters
// `?1`, `?2`, ... (SQLite's spelling); a store whose dialect numbers them otherwise rewrites
// the marks when it prepares them. Values are NULL, a 64-bit integer or text; a store reads
// its database's truth values as the integers 0 and 1.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "quota/error.h"
#include "location.h"
#include "quota/limit.h"
#include "quota/result.h"
#include "sql/dialect.h"
#include "statements.h"

namespace quota::detail {

struct Migration;  // src/migrations.h

using Value = std::variant<std::monostate, std::int64_t, std::string>;
using Row = std::vector<Value>;

std::int64_t integer_of(const Value& value);  // 0 for NULL
std::string text_of(const Value& value);      // "" for NULL
bool is_null(const Value& value);

// The Result a statement's row holds in its columns first, first + 1, ...: allowed, reason,
// remaining, retry_after_ms, reset_at_ms, denied, shadow_denied (every request statement
// answers them first; a key's stored answer holds them after its request text).
Result result_of(const Row& row, std::size_t first = 0);

// The request of a request statement, as it is bound: :limit, :owner, :cost and :now (none:
// NULL, the database's own clock).
struct StatementRequest {
  std::string_view limit;
  std::string_view owner;
  std::int64_t cost = 1;
  std::optional<std::int64_t> now;
};

// A busy error that asks for the caller's transaction to be run again rather than for a
// verdict (SQLite's SQLITE_BUSY_SNAPSHOT): the failure policy never answers it.
class TransactionConflict : public Error {
 public:
  using Error::Error;
};

// What a transaction of begin_exclusive keeps other connections from doing meanwhile.
enum class Exclusive {
  migration,  // migrating (and, on SQLite, any write)
  state,      // writing the state tables (gc's batches)
  // another configuration's apply (Engine::apply), which reads every limit and override
  // before it writes: two at once would each plan from the state before the other and end
  // in a mix of both files. PostgreSQL: an advisory lock until the transaction ends; SQLite:
  // as requests (BEGIN IMMEDIATE already excludes every other writer)
  configuration,
  // nothing beyond what the requests' own statements lock (a batch of requests: group
  // commit, consume_many); SQLite still takes the write lock at once (BEGIN IMMEDIATE), so
  // that a batch that reads before it writes never meets a stale snapshot
  requests,
};

// Makes the session of a PostgreSQL connection refuse to write (Options::read_only, and
// quota::admin's reads).
inline constexpr const char* kReadOnlySession = "SET default_transaction_read_only = on";

// One request statement of a batch (Store::run_all).
struct Step {
  Operation operation;
  StatementKind kind;
  StatementRequest request;
};

// What a store's database does where databases differ, for the engine to ask instead of
// comparing names.
struct Capabilities {
  // One writer at a time holds the whole database (SQLite's write lock): a transaction of
  // requests shuts out every other writer while it runs, so group commit bounds a batch by
  // time as well as by count. Otherwise (PostgreSQL's row locks) a batch excludes only the
  // writers of its own rows.
  bool single_writer = false;
  // A failed statement undoes only itself and the transaction goes on (SQLite's statement
  // journal). Otherwise (PostgreSQL) a failed statement aborts the whole transaction, and a
  // request of a batch that may fail runs in a savepoint of its own.
  bool atomic_statements = false;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual const Dialect& dialect() const = 0;
  virtual Capabilities capabilities() const = 0;

  // This backend's built-in migrations, by version (src/migrations.h runs them).
  virtual const std::vector<Migration>& migrations() const = 0;

  // Runs the statement of (operation, kind) for `request` to its end and returns its
  // first row, or nullopt when it returned none (check: no such limit). Throws Error; a
  // statement that the database refused because the limit does not exist (its message says
  // "unknown limit") is ErrorCode::unknown_limit.
  virtual std::optional<Row> run(Operation operation, StatementKind kind,
                                 const StatementRequest& request) = 0;

  // Runs every step's statement in order, in one transaction of its own (a savepoint of the
  // transaction already open), and returns each one's first row as run does; a failure of
  // any rolls all of them back and throws. A step of a plain or flat kind (is_specialised) that answers no
  // row (an owner without state) runs its general kind in the same transaction, as the
  // engine does for a lone request. PostgreSQL sends them in one round trip (pipeline mode;
  // with plain steps the commit waits for their answers, so that the general statements of
  // those that answered nothing run before it); SQLite runs them one after the other.
  virtual std::vector<std::optional<Row>> run_all(const std::vector<Step>& steps) = 0;

  // Runs any other statement with `parameters` for ?1, ?2, ... and returns every row.
  virtual std::vector<Row> query(const std::string& sql, const std::vector<Value>& parameters) = 0;
  // The same for a statement that returns no rows; the number of rows it changed.
  virtual std::int64_t execute(const std::string& sql, const std::vector<Value>& parameters) = 0;

  // A savepoint that nests inside whatever transaction is open (or is the transaction).
  virtual void savepoint(std::string_view name) = 0;
  virtual void rollback_to(std::string_view name) = 0;  // undoes, and keeps it open
  virtual void release(std::string_view name) = 0;
  // Best effort, for destructors: rolls back to and releases `name`, throwing nothing.
  virtual void abandon(std::string_view name) noexcept = 0;

  // Opening, as the engine drives it (src/engine/engine_impl.cpp, Engine::Impl::start):
  //   retry_while_busy(step): runs `step`, again while the database answers busy without
  //     waiting (SQLite, while a new file is being set up by several openers), until the busy
  //     timeout; a store that always waits runs it once.
  //   prepare_for_writing(): what a store does once the schema is known to be usable and
  //     before the migrations (SQLite: a file switches to WAL).
  //   started(): after the migrations (SQLite: its automatic checkpoint).
  virtual void retry_while_busy(const std::function<void()>& step) = 0;
  virtual void prepare_for_writing() = 0;
  virtual void started() = 0;
  // Before the schema is read: SQLite reads the file's header, so that a file that is not a
  // database fails first, unchanged.
  virtual void probe() = 0;

  // Whether a transaction is open on the connection (the application's, or a savepoint's).
  virtual bool in_transaction() = 0;

  // Where Engine::watch opens a connection of its own to the same database (src/open_store.h):
  // the SQLite file's path, or a PostgreSQL connection string with the connection's own
  // settings; nullopt when no other connection can reach the database (an in-memory one).
  virtual std::optional<Location> watch_location() = 0;

  // The journal mode that `quotactl status` shows (SQLite's PRAGMA journal_mode: "wal",
  // "delete", ...); nullopt for a database that has none (PostgreSQL).
  virtual std::optional<std::string> journal_mode() = 0;

  // For the migrations (src/migrations.cpp) and gc (src/gc.cpp): whether a table exists; a
  // transaction that excludes `what` from other connections until commit or rollback
  // (SQLite: BEGIN IMMEDIATE, which excludes every writer; PostgreSQL: an advisory lock for
  // migrations, the state tables locked against writers for gc), or a savepoint inside a
  // transaction that is already open; a migration's text, which may hold several statements.
  virtual bool has_table(std::string_view name) = 0;
  virtual void begin_exclusive(Exclusive what) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  virtual void execute_script(const std::string& sql) = 0;
};

}  // namespace quota::detail
