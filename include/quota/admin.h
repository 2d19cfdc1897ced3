// Administration of a quota database: what quotactl's migrate, status and sql do, for tools of
// an operator's own. A location is a SQLite file's path or a postgresql:// (postgres://) URI,
// as Engine::open takes it. Everything here opens a connection of its own and closes it.
//
//   quota::admin::SchemaStatus status = quota::admin::schema_status("app.db");
//   if (!status.pending.empty()) quota::admin::migrate("app.db", quota::system_clock_ms());
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/error.h"
#include "quota/export.h"
#include "quota/limit.h"

namespace quota::admin {

// Whether `location` names a PostgreSQL server rather than a SQLite file: a postgresql:// or
// postgres:// URI (the scheme in any case), or libpq's key=value form ("host=db dbname=app").
QUOTA_API bool is_server(std::string_view location);

// Throws Error (invalid_argument) when `location` is neither: a string that is almost a
// PostgreSQL URI (`postgres:app`, `postgresq://…`, a space before `postgresql://`, another
// scheme such as `mysql://`), or one that holds a NUL byte. The message quotes nothing of it
// that could hold a credential, and says what to write instead. Every function here that
// opens a location refuses such a one the same way, as Engine::open does.
QUOTA_API void require_location(std::string_view location);

// `location` as messages and output should name it: a path as is, but for what looks like a
// password in it (a connection string taken for a file name: `u:pw@host/db`,
// `jdbc:postgresql://h/db?password=pw`, `PASSWORD=pw HOST=h`), written "***"; a PostgreSQL
// connection string as libpq reads it, with every password (the URI's user-info, `password=` or
// `sslpassword=` however spelled or percent-encoded) as "***"; a string that cannot be read,
// or that require_location refuses, as a phrase that quotes none of it.
QUOTA_API std::string shown(std::string_view location);

// The command that creates or migrates `location`, in backquotes, ready to paste into a
// shell: `quotactl migrate --db 'app.db'`. A server's connection string is written without
// its password (never a masked "***"), and the text after the command says where to give it;
// a file name that looks like it holds a password is not repeated (`--db FILE`).
QUOTA_API std::string migrate_command(std::string_view location);

// One migration of this build: migrations/NNNN_name.sql, or migrations/postgresql/'s.
struct Migration {
  int version = 0;
  std::string name;  // the file name without number and extension
  std::string sql;   // the text the library applies
};

// Every migration this build knows for `location`'s kind of database, by version (a new
// SQLite file gets all of SQLite's).
QUOTA_API std::vector<Migration> migrations(std::string_view location);

// What a database holds, read without writing to it.
struct SchemaStatus {
  int version = 0;         // the highest applied version, 0 for none
  int latest_version = 0;  // the latest this build knows for the database's kind
  std::vector<Migration> pending;
  // The version is newer than this build's latest: `problem` says so.
  bool too_new = false;
  // Set, with what to do, when this build cannot use the database: a version newer than the
  // build, or an applied migration whose checksum differs from this build's text.
  std::string problem;
  // A SQLite file that a killed process left with a hot journal: that transaction was rolled
  // back first, as any connection that can write would (the one change reading makes).
  bool recovered_journal = false;
};

// The schema status of an existing database, read on a connection that does not write (on a
// server, its transactions are read-only). A SQLite file is opened read-only (SQLite may create
// the -wal and -shm files of a WAL database beside it); while another connection's lock is in
// the way the read is tried again until `busy_timeout` has passed. Throws Error: io for a
// missing file, a directory or a server that cannot be reached, not_a_database, busy.
QUOTA_API SchemaStatus schema_status(
    const std::string& location, std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));

// Throws Error when `status.problem` is set: schema_too_new for a newer schema,
// checksum_mismatch for an edited migration.
QUOTA_API void require_usable(const SchemaStatus& status);

// schema_status and what the database holds, read the same way (quotactl status).
struct Summary {
  SchemaStatus schema;
  std::optional<std::string> journal_mode;  // a SQLite file's (PRAGMA journal_mode)
  std::int64_t limits = 0;                  // rows of quota_limits
  // Rows that name an owner: every algorithm's state (window, log, bucket and lease owners,
  // log events, leases) and idempotency keys.
  std::int64_t state_rows = 0;
};
QUOTA_API Summary summarize(const std::string& location,
                            std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));

struct Migrated {
  std::vector<int> applied;  // the versions this call applied, in order
  int version = 0;           // the schema's version afterwards
};

// Applies every pending migration to `location` (a file is created, in WAL mode, when it does
// not exist), each in its own transaction, recorded in quota_migrations at `now_ms`. Callers
// on other hosts or processes may migrate the same database at once: each migration is
// applied by one of them, and `version` counts both. A database this build cannot use
// (require_usable) is refused before anything is written. Throws Error.
QUOTA_API Migrated migrate(const std::string& location, std::int64_t now_ms,
                           std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));

// The SQL dialects the statements are written in.
enum class Dialect { sqlite, postgresql };
QUOTA_API Dialect dialect_of(std::string_view location);
QUOTA_API const char* to_string(Dialect dialect);  // "sqlite", "postgresql"

// The operations that run one statement each, as they are named: consume, check, record,
// reset, refund.
QUOTA_API std::vector<std::string> statement_operations();

// The one statement the library runs for `operation` (one of statement_operations()) on a
// limit of `algorithm`, with a calendar period (Limit::calendar) or not, in `dialect`'s
// spelling: SQLite's takes :limit, :owner, :cost and :now, PostgreSQL's $1 to $4 in that order
// (docs/sql.md). A fixed_window limit with a calendar period has statements of its own, and
// each statement answers "unknown limit" for a limit of another kind. Throws Error
// (invalid_argument) for another operation, or a calendar with another algorithm, or a lease
// operation (lease_operations()) with an algorithm other than concurrency.
QUOTA_API std::string statement(Dialect dialect, std::string_view operation, Algorithm algorithm,
                                bool calendar = false);

// The operations of concurrency leases that `statement` also names: acquire (a concurrency
// limit's consume), renew (:lease, :ttl, :now; PostgreSQL $1 to $3) and release (:lease,
// :now; $1, $2). renew and release are the same for every concurrency limit.
QUOTA_API std::vector<std::string> lease_operations();

// One statement of the keyed protocol (SPEC §14; docs/sql.md, "Idempotency keys").
struct KeyedStep {
  std::string name;                     // find_key, claim_key, request, store_answer
  std::string sql;                      // in the dialect's spelling
  std::vector<std::string> parameters;  // the values it takes, in order
  std::string then;                     // what to do with its answer
};

// The statements the library runs, in order and in one transaction, for `operation`
// (consume, record, or acquire: a concurrency limit's consume) made with an idempotency key:
// the key's lookup, its claim, the request's own statement (`statement`'s), and the store of
// its answer; the texts the library runs (src/idempotency.h). SQLite's keyed statements take
// ?1, ?2, ..., PostgreSQL's $1, $2, ..., in the order of `parameters`. Throws Error
// (invalid_argument) for another operation, and as `statement` does.
QUOTA_API std::vector<KeyedStep> keyed_statements(Dialect dialect, std::string_view operation,
                                                  Algorithm algorithm, bool calendar = false);

// What a keyed request stores as its request text, which a retry must match: "consume 1"
// (the operation as the library runs it, and the cost).
QUOTA_API std::string keyed_request_text(std::string_view operation, std::int64_t cost);

}  // namespace quota::admin
