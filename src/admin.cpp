#include "quota/admin.h"

#include <SQLiteCpp/Database.h>
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <stdexcept>

#include "busy.h"
#include "journal.h"
#include "migrations.h"
#include "postgresql/postgresql_store.h"
#include "sqlite/sqlite_store.h"
#include "statements.h"
#include "store.h"

namespace quota::admin {

namespace {

using detail::Store;

// The operations that run one statement each, in the order their names are listed.
constexpr detail::Operation kStatementOperations[] = {
    detail::Operation::consume, detail::Operation::check, detail::Operation::record,
    detail::Operation::reset, detail::Operation::refund};

// The store of a SQLite connection held here (its own busy handler installed by the caller).
std::unique_ptr<Store> borrowed_store(SQLite::Database& db,
                                      std::chrono::milliseconds busy_timeout) {
  detail::SqliteSettings settings;
  settings.busy_timeout = busy_timeout;
  settings.install_busy_handler = false;
  return detail::sqlite_on_connection(db, settings);
}

void require_file(const std::string& path) {
  std::error_code ignored;
  const auto kind = std::filesystem::status(path, ignored).type();
  if (kind == std::filesystem::file_type::not_found) {
    throw Error(ErrorCode::io,
                fmt::format("database '{}' does not exist: create it with `quotactl migrate --db "
                            "{}` or quota::admin::migrate",
                            path, path));
  }
  if (kind == std::filesystem::file_type::directory) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give the path of a database file", path));
  }
}

// Runs `read` on `location` without writing to it; returns whether a hot journal was rolled
// back first (SQLite only).
bool read_store(const std::string& location, std::chrono::milliseconds busy_timeout,
                const std::function<void(Store&)>& read) {
  if (is_server(location)) {
    const std::unique_ptr<Store> store = detail::open_postgresql(location, {busy_timeout});
    // Whatever `read` runs, the server refuses to write on this connection.
    store->execute(detail::kReadOnlySession, {});
    read(*store);
    return false;
  }
  require_file(location);
  const detail::BusyHandler busy(busy_timeout);
  bool recovered = false;
  try {
    // Opening and `read` are run again while another connection's lock is in the way.
    busy.wait_out([&] {
      for (;;) {
        const std::unique_ptr<SQLite::Database> reading = detail::open_read_only(location);
        SQLite::Database& db = *reading;
        busy.install(db.getHandle());
        try {
          // SQLite reads the file's header only now: a file that is not a database fails here.
          db.exec("SELECT count(*) FROM sqlite_schema");
        } catch (const SQLite::Exception& error) {
          if (recovered || !detail::is_hot_journal(error)) throw;
          detail::roll_back_hot_journal(location, busy);
          recovered = true;
          continue;
        }
        read(*borrowed_store(db, busy_timeout));
        return;
      }
    });
  } catch (const SQLite::Exception& error) {
    throw detail::translate_sqlite(error, busy_timeout, location);
  }
  return recovered;
}

Migration public_migration(const detail::Migration& migration) {
  return {migration.version, migration.name, migration.sql};
}

SchemaStatus status_of(Store& store) {
  const detail::SchemaStatus status = detail::read_schema_status(store);
  SchemaStatus result;
  result.version = status.version;
  result.latest_version = detail::latest_version(store);
  for (const detail::Migration* migration : status.pending) {
    result.pending.push_back(public_migration(*migration));
  }
  result.too_new = status.too_new;
  result.problem = status.problem;
  return result;
}

// Applies the pending migrations on `store` and reads the version they left.
void migrate_store(Store& store, std::int64_t now, Migrated& migrated) {
  detail::apply_pending(store, now, migrated.applied);
  migrated.version = detail::read_schema_status(store).version;
}

detail::Operation operation_named(std::string_view name) {
  for (detail::Operation operation : kStatementOperations) {
    if (name == detail::operation_name(operation)) return operation;
  }
  throw Error(
      ErrorCode::invalid_argument,
      fmt::format("unknown operation '{}': use consume, check, record, reset or refund", name));
}

}  // namespace

bool is_server(std::string_view location) { return detail::is_postgresql_uri(location); }

std::string shown(std::string_view location) {
  return is_server(location) ? detail::mask_password(location) : std::string(location);
}

std::vector<Migration> migrations(std::string_view location) {
  std::vector<Migration> result;
  for (const detail::Migration& migration : is_server(location)
                                                ? detail::built_in_postgresql_migrations()
                                                : detail::built_in_sqlite_migrations()) {
    result.push_back(public_migration(migration));
  }
  return result;
}

SchemaStatus schema_status(const std::string& location, std::chrono::milliseconds busy_timeout) {
  SchemaStatus status;
  const bool recovered =
      read_store(location, busy_timeout, [&](Store& store) { status = status_of(store); });
  status.recovered_journal = recovered;
  return status;
}

void require_usable(const SchemaStatus& status) {
  if (status.problem.empty()) return;
  throw Error(status.too_new ? ErrorCode::schema_too_new : ErrorCode::checksum_mismatch,
              status.problem);
}

Summary summarize(const std::string& location, std::chrono::milliseconds busy_timeout) {
  Summary summary;
  const bool recovered = read_store(location, busy_timeout, [&](Store& store) {
    summary.schema = status_of(store);
    if (store.dialect().name == detail::kSqlite.name) {
      summary.journal_mode = detail::text_of(store.query("PRAGMA journal_mode", {}).at(0).at(0));
    }
    const auto rows = [&](const char* table) -> std::int64_t {
      if (!store.has_table(table)) return 0;
      return detail::integer_of(
          store.query(fmt::format("SELECT count(*) FROM {}", table), {}).at(0).at(0));
    };
    summary.limits = rows("quota_limits");
    summary.state_rows = rows("quota_windows") + rows("quota_log_owners") + rows("quota_log") +
                         rows("quota_buckets");
  });
  summary.schema.recovered_journal = recovered;
  return summary;
}

Migrated migrate(const std::string& location, std::int64_t now_ms,
                 std::chrono::milliseconds busy_timeout) {
  Migrated migrated;
  if (is_server(location)) {
    migrate_store(*detail::open_postgresql(location, {busy_timeout}), now_ms, migrated);
    return migrated;
  }
  std::error_code ignored;
  if (std::filesystem::is_directory(location, ignored)) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give the path of a database file", location));
  }
  const detail::BusyHandler busy(busy_timeout);
  try {
    // Each attempt on a connection of its own: openers of a new file meet while it is still in
    // rollback-journal mode, where SQLite answers busy without waiting. The first read of this
    // connection also rolls back a transaction a killed process left unfinished.
    busy.wait_out([&] {
      SQLite::Database db(location, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      busy.install(db.getHandle());
      db.exec("PRAGMA journal_mode = WAL");
      migrate_store(*borrowed_store(db, busy_timeout), now_ms, migrated);
    });
  } catch (const SQLite::Exception& error) {
    throw detail::translate_sqlite(error, busy_timeout, location);
  }
  return migrated;
}

Dialect dialect_of(std::string_view location) {
  return is_server(location) ? Dialect::postgresql : Dialect::sqlite;
}

const char* to_string(Dialect dialect) {
  return dialect == Dialect::postgresql ? detail::kPostgresql.name.data()
                                        : detail::kSqlite.name.data();
}

std::vector<std::string> statement_operations() {
  std::vector<std::string> names;
  for (detail::Operation operation : kStatementOperations) {
    names.emplace_back(detail::operation_name(operation));
  }
  return names;
}

std::string statement(Dialect dialect, std::string_view operation, Algorithm algorithm,
                      bool calendar) {
  const detail::Operation named = operation_named(operation);
  if (calendar && algorithm != Algorithm::fixed_window) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("calendar periods count only with fixed_window, not {}",
                            quota::to_string(algorithm)));
  }
  try {
    return detail::statement(dialect == Dialect::postgresql ? detail::kPostgresql : detail::kSqlite,
                             named, detail::statement_algorithm(algorithm, calendar));
  } catch (const std::logic_error&) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("this build has no statement for {} limits: use sliding_log or "
                            "fixed_window",
                            quota::to_string(algorithm)));
  }
}

}  // namespace quota::admin
