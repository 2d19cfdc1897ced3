// The one way in to a database: the store of a location, whichever driver it needs.
//
// Engine::open, Engine::watch's second connection, quota::sqlite::attach,
// quota::postgresql::attach and quota::admin all open their store here, and src/open_store.cpp
// is the only file above the drivers that includes a driver's header: it chooses the driver by
// the location's classification (src/location.h). In a build without PostgreSQL the
// PostgreSQL driver is src/postgresql/absent.cpp, whose every opening refuses with an error
// that says how to get a build that has it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "location.h"
#include "store.h"

namespace SQLite {
class Database;
}
struct pg_conn;

namespace quota::detail {

struct Migration;  // src/migrations.h

// What a store is opened for, and with which of Options' settings.
struct StoreSettings {
  enum class Purpose {
    // The engine's own connection (Engine::open): it may create a missing SQLite file
    // (`create`), sets the journal mode and synchronous, and checkpoints.
    engine,
    // A second connection to the database of an engine that is open (Engine::watch's): it
    // only reads, and sets nothing on the database.
    reader,
  };
  Purpose purpose = Purpose::engine;
  std::chrono::milliseconds busy_timeout{5000};
  bool create = true;  // a missing SQLite file is created (not with read_only)
  bool read_only = false;
  bool synchronous_full = false;
  bool restart_checkpoint = true;
};

// The store of `location` (classified, not refused). Throws Error: io when the SQLite file
// does not exist and may not be created, or cannot be opened; what the driver throws when the
// server cannot be reached; invalid_argument for a PostgreSQL location in a build without it.
std::unique_ptr<Store> open_store(const Location& location, const StoreSettings& settings);

// A store on the application's own connection, which must outlive it (quota::sqlite::attach,
// quota::postgresql::attach); only busy_timeout and restart_checkpoint count.
std::unique_ptr<Store> attach_store(SQLite::Database& connection, const StoreSettings& settings);
std::unique_ptr<Store> attach_store(pg_conn* connection, const StoreSettings& settings);

// quota::admin's way in, for a store it uses once.
enum class AdminUse {
  // Reads without writing: PostgreSQL's session refuses to write; a SQLite file is opened
  // read-only, and a hot journal that a killed process left is rolled back first.
  read,
  // Creates a missing SQLite file, in WAL mode, and may write (migrations).
  migrate,
};

// Runs `use` on the store of `location` (classified, not refused) for `how`, again on a new
// connection while another connection's lock is in the way (SQLite, until `busy_timeout`), so
// `use` must be safe to run again. Returns whether a hot journal was rolled back first.
// Throws Error.
bool use_store(const Location& location, AdminUse how, std::chrono::milliseconds busy_timeout,
               const std::function<void(Store&)>& use);

// The built-in migrations of the backend that `kind` names (src/migrations.h), by version.
const std::vector<Migration>& built_in_migrations(Location::Kind kind);

}  // namespace quota::detail
