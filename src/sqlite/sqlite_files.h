// A SQLite database file opened by quota::admin (src/admin.cpp): read without writing, or
// migrated. Engine::open's file goes through open_sqlite (src/sqlite/sqlite_store.h) instead.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "store.h"

namespace quota::detail {

// Throws Error (io) when `path` is a directory, saying to give a database file's path. Every
// opening of a file path goes through it (open_sqlite and the two below).
void refuse_directory(const std::string& path);

// Runs `read` on the existing file `path`, opened read-only, and runs it again (on a new
// connection) while another connection's lock is in the way, until `busy_timeout`. A hot
// journal that a killed process left is rolled back first; returns whether one was. Throws
// Error (io) when the file does not exist or is a directory, and SQLite's failures as Error.
bool read_sqlite_file(const std::string& path, std::chrono::milliseconds busy_timeout,
                      const std::function<void(Store&)>& read);

// Runs `write` on the file `path` (created when missing) in WAL mode, each attempt on a
// connection of its own while another connection's lock is in the way, until `busy_timeout`:
// openers of a new file meet while it is still in rollback-journal mode, where SQLite answers
// busy without waiting. The first read of each connection also rolls back a transaction a
// killed process left unfinished. `write` must be safe to run again. Throws Error.
void write_sqlite_file(const std::string& path, std::chrono::milliseconds busy_timeout,
                       const std::function<void(Store&)>& write);

}  // namespace quota::detail
