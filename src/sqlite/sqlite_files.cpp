#include "sqlite/sqlite_files.h"

#include <SQLiteCpp/Database.h>
#include <fmt/format.h>

#include <filesystem>

#include "quota/admin.h"
#include "sqlite/busy.h"
#include "sqlite/journal.h"
#include "sqlite/sqlite_store.h"

namespace quota::detail {

namespace {

// The store of a connection held here (its busy handler installed by the caller).
std::unique_ptr<Store> borrowed_store(SQLite::Database& db,
                                      std::chrono::milliseconds busy_timeout) {
  SqliteSettings settings;
  settings.busy_timeout = busy_timeout;
  settings.install_busy_handler = false;
  return sqlite_on_connection(db, settings);
}

}  // namespace

void refuse_directory(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give the path of a database file", path));
  }
}

bool read_sqlite_file(const std::string& path, std::chrono::milliseconds busy_timeout,
                      const std::function<void(Store&)>& read) {
  std::error_code ignored;
  if (std::filesystem::status(path, ignored).type() == std::filesystem::file_type::not_found) {
    throw Error(ErrorCode::io,
                fmt::format("database '{}' does not exist: create it with {} or "
                            "quota::admin::migrate",
                            path, admin::migrate_command(path)));
  }
  refuse_directory(path);
  const BusyHandler busy(busy_timeout);
  bool recovered = false;
  try {
    // Opening and `read` are run again while another connection's lock is in the way.
    busy.wait_out([&] {
      for (;;) {
        const std::unique_ptr<SQLite::Database> reading = open_for_reading(path);
        SQLite::Database& db = *reading;
        busy.install(db.getHandle());
        try {
          // SQLite reads the file's header only now: a file that is not a database fails here.
          db.exec("SELECT count(*) FROM sqlite_schema");
        } catch (const SQLite::Exception& error) {
          if (recovered || !is_hot_journal(error)) throw;
          roll_back_hot_journal(path, busy);
          recovered = true;
          continue;
        }
        read(*borrowed_store(db, busy_timeout));
        return;
      }
    });
  } catch (const SQLite::Exception& error) {
    throw translate_sqlite(error, busy_timeout, path);
  }
  return recovered;
}

void write_sqlite_file(const std::string& path, std::chrono::milliseconds busy_timeout,
                       const std::function<void(Store&)>& write) {
  refuse_directory(path);
  const BusyHandler busy(busy_timeout);
  try {
    busy.wait_out([&] {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      busy.install(db.getHandle());
      use_wal(db);
      write(*borrowed_store(db, busy_timeout));
    });
  } catch (const SQLite::Exception& error) {
    throw translate_sqlite(error, busy_timeout, path);
  }
}

}  // namespace quota::detail
