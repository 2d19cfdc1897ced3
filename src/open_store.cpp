#include "open_store.h"

#include <fmt/format.h>

#include <filesystem>

#include "postgresql/postgresql_store.h"
#include "shown.h"
#include "sqlite/sqlite_files.h"
#include "sqlite/sqlite_store.h"

namespace quota::detail {

namespace {

bool is_postgresql(const Location& location) {
  return location.kind == Location::Kind::postgresql;
}

std::unique_ptr<Store> open_postgresql_store(const Location& location,
                                             const StoreSettings& settings) {
  std::unique_ptr<Store> store = open_postgresql(location.text, {settings.busy_timeout});
  if (settings.read_only) store->execute(kReadOnlySession, {});
  return store;
}

// The engine's own connection to a SQLite file (or a database in memory).
std::unique_ptr<Store> open_sqlite_for_engine(const Location& location,
                                              const StoreSettings& settings) {
  const std::string& path = location.text;
  const bool in_memory = location.in_memory;
  const bool create = settings.create && !settings.read_only;
  // Advice for the library's caller, whatever its language: quotactl, which checks first,
  // gives its own (`quotactl migrate`).
  if (!in_memory && !create && !std::filesystem::exists(path)) {
    throw Error(ErrorCode::io,
                settings.read_only
                    ? fmt::format("database '{}' does not exist, and an engine opened read-only "
                                  "creates nothing: check the path, or create the database "
                                  "first by opening it once without read_only",
                                  path)
                    : fmt::format("database '{}' does not exist: check the path, or open it "
                                  "with create enabled (the default) to create it",
                                  path));
  }
  SqliteSettings sqlite;
  sqlite.busy_timeout = settings.busy_timeout;
  sqlite.synchronous_full = settings.synchronous_full;
  sqlite.restart_checkpoint = settings.restart_checkpoint && !settings.read_only;
  sqlite.read_only = settings.read_only && !in_memory;
  sqlite.file = !in_memory;
  return open_sqlite(path, create, sqlite);
}

// A connection that only reads: no journal mode to set, no checkpoint to run.
std::unique_ptr<Store> open_sqlite_reader(const std::string& path,
                                          const StoreSettings& settings) {
  SqliteSettings sqlite;
  sqlite.busy_timeout = settings.busy_timeout;
  sqlite.restart_checkpoint = false;
  return open_sqlite(path, false, sqlite);
}

// `open()`, whose errors name the file by a path that may hold what looks like a password
// (a connection string taken for a file name): they say "***" for it.
template <typename Open>
auto redacting(Open&& open) {
  try {
    return open();
  } catch (const Error& error) {
    const std::string message = redacted(error.what());
    if (message == error.what()) throw;
    throw Error(error.code(), message);
  }
}

}  // namespace

std::unique_ptr<Store> open_store(const Location& location, const StoreSettings& settings) {
  if (is_postgresql(location)) return open_postgresql_store(location, settings);
  return redacting([&] {
    if (settings.purpose == StoreSettings::Purpose::reader) {
      return open_sqlite_reader(location.text, settings);
    }
    return open_sqlite_for_engine(location, settings);
  });
}

std::unique_ptr<Store> attach_store(SQLite::Database& connection, const StoreSettings& settings) {
  SqliteSettings sqlite;
  sqlite.busy_timeout = settings.busy_timeout;
  sqlite.restart_checkpoint = settings.restart_checkpoint;
  return sqlite_on_connection(connection, sqlite);
}

std::unique_ptr<Store> attach_store(pg_conn* connection, const StoreSettings& settings) {
  return postgresql_on_connection(connection, {settings.busy_timeout});
}

bool use_store(const Location& location, AdminUse how, std::chrono::milliseconds busy_timeout,
               const std::function<void(Store&)>& use) {
  if (is_postgresql(location)) {
    StoreSettings settings;
    settings.busy_timeout = busy_timeout;
    // Whatever `use` runs to read, the server refuses to write on this connection.
    settings.read_only = how == AdminUse::read;
    use(*open_postgresql_store(location, settings));
    return false;
  }
  return redacting([&] {
    if (how == AdminUse::read) return read_sqlite_file(location.text, busy_timeout, use);
    write_sqlite_file(location.text, busy_timeout, use);
    return false;
  });
}

const std::vector<Migration>& built_in_migrations(Location::Kind kind) {
  return kind == Location::Kind::postgresql ? built_in_postgresql_migrations()
                                            : built_in_sqlite_migrations();
}

}  // namespace quota::detail
