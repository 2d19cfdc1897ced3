// The PostgreSQL store: the engine's statements run on a server through libpq.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "migrations.h"
#include "store.h"

typedef struct pg_conn PGconn;

namespace quota::detail {

// Whether `location` is a PostgreSQL connection URI (postgresql://… or postgres://…).
bool is_postgresql_uri(std::string_view location);

// Where the password of postgresql://user:password@host/... lies in `uri`, as [first, last):
// empty when there is none.
std::pair<std::size_t, std::size_t> user_info_password(std::string_view uri);

// `uri` with its password, if any, replaced by "***" (in the user-info part and in a
// `password=` parameter), for every message that names the database.
std::string mask_password(std::string_view uri);

// PostgreSQL's migrations (migrations/postgresql/*.sql), embedded at build time, by version.
// Its first migration is version 6, the whole schema at once: the same version means the same
// schema as SQLite's.
const std::vector<Migration>& built_in_postgresql_migrations();

struct PostgresqlSettings {
  // How long a statement waits for a row lock held by another transaction (lock_timeout)
  // before the store reports ErrorCode::busy.
  std::chrono::milliseconds busy_timeout{5000};
};

// Connects to `uri` and returns its store. Throws Error (io) when the server cannot be
// reached or refuses the connection; the message never contains the password.
std::unique_ptr<Store> open_postgresql(const std::string& uri, PostgresqlSettings settings);

// A store on the application's own connection, which must outlive it: its statements take
// part in whatever transaction the application has open on it.
std::unique_ptr<Store> postgresql_on_connection(PGconn* connection, PostgresqlSettings settings);

}  // namespace quota::detail
