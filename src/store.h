// The storage seam: what the engine asks of a database, and nothing more.
//
// The engine (src/engine.cpp) keeps everything that decides: validation, the lock, the
// failure policy, hooks, consume_all. A Store only executes: it runs the statements of
// src/statements.cpp and the few other statements the engine needs, in its database's
// dialect, and turns that database's failures into quota::Error. Two stores exist:
// src/sqlite/ (a file or the application's own connection) and src/postgresql/ (a server
// reached through libpq).
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

#include "migrations.h"
#include "quota/limit.h"
#include "sql/dialect.h"
#include "statements.h"

namespace quota::detail {

using Value = std::variant<std::monostate, std::int64_t, std::string>;
using Row = std::vector<Value>;

std::int64_t integer_of(const Value& value);       // 0 for NULL
std::string text_of(const Value& value);           // "" for NULL
bool is_null(const Value& value);

// The one request of a request statement: :limit, :owner, :cost and :now.
struct Request4 {
  std::string_view limit;
  std::string_view owner;
  std::int64_t cost = 1;
  std::int64_t now = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual const Dialect& dialect() const = 0;

  // Runs the statement of (operation, algorithm) for `request` to its end and returns its
  // first row, or nullopt when it returned none (check: no such limit). Throws Error; a
  // statement that the database refused because the limit does not exist (its message says
  // "unknown limit") is ErrorCode::unknown_limit.
  virtual std::optional<Row> run(Operation operation, Algorithm algorithm,
                                 const Request4& request) = 0;

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

  // The schema: what the database holds, and applying this build's pending migrations.
  virtual SchemaStatus schema_status() = 0;
  virtual std::vector<int> migrate(std::int64_t now_ms) = 0;
};

}  // namespace quota::detail
