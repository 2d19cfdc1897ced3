#include "session.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <filesystem>
#include <ostream>

#include "busy.h"
#include "journal.h"
#include "migrations.h"
#include "postgresql/postgresql_store.h"
#include "sqlite/sqlite_store.h"
#include "store.h"

namespace quotactl {

using quota::Error;
using quota::ErrorCode;

void Session::emit(const nlohmann::ordered_json& document) const {
  out << document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
}

std::string Session::paint(std::string_view text, Colour colour) const {
  if (!use_colour) return std::string(text);
  const char* code = "";
  switch (colour) {
    case Colour::green:
      code = "32";
      break;
    case Colour::red:
      code = "31";
      break;
    case Colour::yellow:
      code = "33";
      break;
    case Colour::bold:
      code = "1";
      break;
  }
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

std::string shown_location(const std::string& location) {
  return quota::detail::is_postgresql_uri(location) ? quota::detail::mask_password(location)
                                                    : location;
}

std::string migrate_hint(const std::string& location) {
  return fmt::format("`quotactl migrate --db {}`", shown_location(location));
}

std::unique_ptr<quota::detail::Store> borrowed_store(SQLite::Database& db,
                                                     std::chrono::milliseconds busy_timeout) {
  quota::detail::SqliteSettings settings;
  settings.busy_timeout = busy_timeout;
  settings.install_busy_handler = false;
  return quota::detail::sqlite_on_connection(db, settings);
}

bool Session::on_server() const { return quota::detail::is_postgresql_uri(db_path); }

std::string Session::shown_db() const { return shown_location(db_path); }

std::unique_ptr<quota::detail::Store> Session::connect() const {
  return quota::detail::open_postgresql(db_path, {busy_timeout});
}

bool Session::read_store(const std::function<void(quota::detail::Store&)>& read) const {
  if (on_server()) {
    const std::unique_ptr<quota::detail::Store> store = connect();
    // Whatever `read` runs, the server refuses to write on this connection.
    store->execute("SET default_transaction_read_only = on", {});
    read(*store);
    return false;
  }
  return read_database(db_path, busy_timeout,
                       [&](SQLite::Database& db) { read(*borrowed_store(db, busy_timeout)); });
}

quota::Error unknown_limit(std::string_view name) {
  return Error(ErrorCode::unknown_limit,
               fmt::format("unknown limit '{}': see `quotactl limit list`, or define it with "
                           "`quotactl limit set {} --max N --per DURATION`",
                           name, name),
               name);
}

quota::Limit existing_limit(quota::Engine& engine, const std::string& name) {
  std::optional<quota::Limit> limit = engine.get(name);
  if (!limit) throw unknown_limit(name);
  return std::move(*limit);
}

std::string message_of(const quota::Error& error) {
  // The library's message names its own calls (Engine::define); the name it carries is enough
  // for quotactl's.
  if (error.code() == ErrorCode::unknown_limit && !error.limit().empty()) {
    return unknown_limit(error.limit()).what();
  }
  return error.what();
}

quota::Error database_error(const SQLite::Exception& error, const std::string& path) {
  switch (error.getErrorCode() & 0xFF) {
    case SQLITE_NOTADB:
      return Error(ErrorCode::not_a_database,
                   fmt::format("'{}' is not a SQLite database: check --db (or $QUOTA_DB); "
                               "quotactl leaves such a file untouched",
                               path));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Error(ErrorCode::busy, fmt::format("'{}' stayed locked by another connection past "
                                                "the busy timeout: retry when it is less busy, "
                                                "or raise --busy-timeout",
                                                path));
    case SQLITE_READONLY:
      if (quota::detail::is_hot_journal(error)) {
        return Error(ErrorCode::io,
                     quota::detail::hot_journal_message("'" + path + "'", path + "-journal"));
      }
      [[fallthrough]];
    case SQLITE_CANTOPEN:
      return Error(ErrorCode::io,
                   fmt::format("'{}' cannot be written ({}): check the permissions of the file "
                               "and of its folder (WAL mode keeps -wal and -shm files beside it)",
                               path, error.what()));
    case SQLITE_FULL:
      return Error(ErrorCode::io, fmt::format("the disk holding '{}' is full ({}): free space and "
                                              "retry",
                                              path, error.what()));
    case SQLITE_CORRUPT:
      return Error(ErrorCode::io, fmt::format("'{}' is corrupt ({}): restore it from a backup",
                                              path, error.what()));
    default:
      return Error(ErrorCode::io, fmt::format("cannot use '{}' ({}): check the path, its "
                                              "permissions and the disk",
                                              path, error.what()));
  }
}

bool read_database(const std::string& path, std::chrono::milliseconds busy_timeout,
                   const std::function<void(SQLite::Database&)>& read) {
  std::error_code ignored;
  const auto kind = std::filesystem::status(path, ignored).type();
  if (kind == std::filesystem::file_type::not_found) {
    throw Error(ErrorCode::io, fmt::format("database '{}' does not exist: create it with {}", path,
                                           migrate_hint(path)));
  }
  if (kind == std::filesystem::file_type::directory) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give --db the path of a database file", path));
  }
  const quota::detail::BusyHandler busy(busy_timeout);
  bool recovered = false;
  try {
    busy.wait_out([&] {
      for (;;) {
        SQLite::Database db(path, SQLite::OPEN_READONLY);
        busy.install(db.getHandle());
        try {
          // SQLite reads the file's header only now: a file that is not a database fails here.
          db.exec("SELECT count(*) FROM sqlite_schema");
        } catch (const SQLite::Exception& error) {
          if (recovered || !quota::detail::is_hot_journal(error)) throw;
          quota::detail::roll_back_hot_journal(path, busy);
          recovered = true;
          continue;
        }
        read(db);
        return;
      }
    });
  } catch (const SQLite::Exception& error) {
    throw database_error(error, path);
  }
  return recovered;
}

quota::Engine Session::open_engine(bool live_clock) const {
  // The schema is checked first on a read-only connection, so that a file quotactl refuses is
  // never opened for writing at all (the engine, too, refuses before it writes), and so that
  // the message names the exact `quotactl migrate --db PATH` (or URI) to run.
  read_store([&](quota::detail::Store& store) {
    const quota::detail::SchemaStatus status = quota::detail::read_schema_status(store);
    quota::detail::require_usable(status);
    if (!status.pending.empty()) {
      throw Error(ErrorCode::not_migrated,
                  fmt::format("'{}' is at schema version {} and this build needs version {}: "
                              "run {}",
                              shown_db(), status.version, quota::detail::latest_version(store),
                              migrate_hint(db_path)));
    }
  });
  quota::Options options;
  options.create = false;
  options.migrate = false;
  if (!live_clock) options.clock = [now = now] { return now; };
  options.server_clock = server_clock;
  options.busy_timeout = busy_timeout;
  return quota::Engine::open(db_path, std::move(options));
}

}  // namespace quotactl
