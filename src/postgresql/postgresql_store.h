// The PostgreSQL store: the engine's statements run on a server through libpq.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "connection_string.h"
#include "migrations.h"
#include "store.h"

typedef struct pg_conn PGconn;

namespace quota::detail {

// PostgreSQL's migrations (migrations/postgresql/*.sql), embedded at build time, by version.
// Its first migration is version 6, the whole schema at once: the same version means the same
// schema as SQLite's.
const std::vector<Migration>& built_in_postgresql_migrations();

struct PostgresqlSettings {
  // How long a statement waits for a row lock held by another transaction (lock_timeout)
  // before the store reports ErrorCode::busy.
  std::chrono::milliseconds busy_timeout{5000};
};

// Connects to `conninfo` (a URI or key=value string) and returns its store. Throws Error:
// invalid_argument for a string libpq cannot parse, io when the server cannot be reached or
// refuses the connection. No message contains a password, whatever spelling carried it.
std::unique_ptr<Store> open_postgresql(const std::string& conninfo, PostgresqlSettings settings);

// A store on the application's own connection, which must outlive it: its statements take
// part in whatever transaction the application has open on it.
std::unique_ptr<Store> postgresql_on_connection(PGconn* connection, PostgresqlSettings settings);

}  // namespace quota::detail
