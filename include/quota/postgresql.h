// quota on the application's own PostgreSQL connection (libpq).
//
//   #include <libpq-fe.h>
//   #include "quota/postgresql.h"
//
//   PGconn* connection = PQconnectdb("postgresql:///app");
//   quota::Engine engine = quota::postgresql::attach(connection);
//
// Engine::open("postgresql://...") makes a connection of its own and needs none of this.
#pragma once

#include "quota/engine.h"
#include "quota/export.h"

struct pg_conn;  // libpq's PGconn

namespace quota::postgresql {

// An Engine on the application's own connection (open, and outliving the Engine): operations
// take part in the application's transaction there — a consume inside its open transaction
// commits or rolls back with it (operations that need a savepoint make one inside it). The
// connection's session settings are left as they are: lock waits end at its own
// lock_timeout, not at Options::busy_timeout. Opening checks the schema (and migrates it, with
// Options::migrate) on that connection. Throws Error.
QUOTA_API Engine attach(pg_conn* connection, Options options = {});

}  // namespace quota::postgresql
