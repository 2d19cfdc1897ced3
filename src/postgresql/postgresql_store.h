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

// The one way a PostgreSQL connection string (a URI or libpq's key=value form, as
// classify_location gives it) is ever shown: libpq parses it (percent-encoding decoded, every
// spelling of a key) and it is written anew in its own form, with each secret (password,
// sslpassword) as "***". A string libpq cannot parse is shown as a phrase that quotes none of
// it.
std::string mask_password(std::string_view conninfo);

// The same, with the secrets left out rather than masked, for a command that a message
// suggests running; `had_password` is set when one was left out.
std::string without_password(std::string_view conninfo, bool* had_password);

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
