// The SQLite store: a database file (or ":memory:") the engine opens, or the application's
// own connection.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "migrations.h"
#include "store.h"

namespace SQLite {
class Database;
class Exception;
}  // namespace SQLite

namespace quota::detail {

// SQLite's migrations (migrations/*.sql), embedded at build time, by version.
const std::vector<Migration>& built_in_sqlite_migrations();

struct SqliteSettings {
  std::chrono::milliseconds busy_timeout{5000};
  bool synchronous_full = false;
  bool restart_checkpoint = true;
  // Whether the engine opened the connection itself: only then does it set the journal mode
  // and synchronous, and start the opening over when SQLite answers busy without waiting.
  bool file = false;
  // Install the engine's busy handler on the connection. Off for a connection that quotactl
  // or a migration check only borrows, with a timeout of its own.
  bool install_busy_handler = true;
  // Open the file read-only (Options::read_only; open_read_only).
  bool read_only = false;
};

// A read-only connection to the SQLite file `path`. A WAL database that has no -wal file (and
// no hot journal), in a folder that cannot be written, cannot be read as SQLite reads a WAL
// database (its -shm file cannot be made): it is opened immutable, read as the file holds it.
std::unique_ptr<SQLite::Database> open_read_only(const std::string& path);

// Whether the SQLite file at `path` is a database in WAL mode (its header says so).
bool has_wal_header(const std::string& path);

// A connection that only reads the SQLite file `path`, and leaves no file behind: a WAL
// database that no connection has open (no -wal or -shm file) is opened read-write with
// query_only when this process may write it (closing, the last connection removes the -wal
// and -shm files it made), else immutable (a read-only connection would make both files and
// leave them); any other file as open_read_only opens it.
std::unique_ptr<SQLite::Database> open_for_reading(const std::string& path);

// Opens `path` (created when `create`), installs the busy handler. Throws Error (io) when
// the file cannot be opened, or is a directory (settings.file).
std::unique_ptr<Store> open_sqlite(const std::string& path, bool create, SqliteSettings settings);

// A store on a connection the caller keeps open for as long as the store lives (the
// application's, with quota::sqlite::attach, or a borrowed one of quota::admin's). `install` puts the busy
// handler (and the checkpoint, when settings ask for it) on it.
std::unique_ptr<Store> sqlite_on_connection(SQLite::Database& database, SqliteSettings settings);

// Sets the connection's journal mode to WAL: the one place that does, for a file the engine
// opens (Store::prepare_for_writing) and one that quota::admin migrates. Throws
// SQLite::Exception.
void use_wal(SQLite::Database& database);

// SQLite's failures as the library's one error type, with what to do about them, naming the
// database by `path` when one is given; throw_sqlite throws it, as TransactionConflict for a
// write refused to a stale snapshot. `timed_out`: whether a busy failure came after the busy
// timeout had passed (BusyHandler::timeouts), or at once, which its message then says.
Error translate_sqlite(const SQLite::Exception& error, std::chrono::milliseconds busy_timeout,
                       const std::string& path = {}, bool timed_out = true);
[[noreturn]] void throw_sqlite(const SQLite::Exception& error,
                               std::chrono::milliseconds busy_timeout, bool timed_out = true);

}  // namespace quota::detail
