#include "quota/admin.h"

#include <fmt/format.h>

#include <functional>
#include <stdexcept>

#include "connection_string.h"
#include "idempotency.h"
#include "location.h"
#include "migrations.h"
#include "open_store.h"
#include "shown.h"
#include "sql/families.h"
#include "sql/lease_statements.h"
#include "statements.h"
#include "store.h"

namespace quota::admin {

namespace {

using detail::Store;

// The operations that run one statement each, in the order their names are listed.
constexpr detail::Operation kStatementOperations[] = {
    detail::Operation::consume, detail::Operation::check, detail::Operation::record,
    detail::Operation::reset, detail::Operation::refund};

// `location` classified, refused (invalid_argument) when it is neither a path nor a
// connection string.
detail::Location classified(std::string_view location) {
  detail::Location result = detail::classify_location(location);
  if (result.kind == detail::Location::Kind::refused) {
    throw Error(ErrorCode::invalid_argument, result.problem);
  }
  return result;
}

// Runs `read` on `location` without writing to it; returns whether a hot journal was rolled
// back first (SQLite only).
bool read_store(const std::string& location, std::chrono::milliseconds busy_timeout,
                const std::function<void(Store&)>& read) {
  return detail::use_store(classified(location), detail::AdminUse::read, busy_timeout, read);
}

Migration public_migration(const detail::Migration& migration) {
  return {migration.version, migration.name, migration.sql};
}

SchemaStatus status_of(Store& store) {
  const detail::SchemaStatus status = detail::read_schema_status(store);
  SchemaStatus result;
  result.version = status.version;
  result.latest_version = detail::latest_version(store);
  for (const detail::Migration* migration : status.pending) {
    result.pending.push_back(public_migration(*migration));
  }
  result.too_new = status.too_new;
  result.problem = status.problem;
  return result;
}

// Applies the pending migrations on `store` and reads the version they left.
void migrate_store(Store& store, std::int64_t now, Migrated& migrated) {
  detail::apply_pending(store, now, migrated.applied);
  migrated.version = detail::read_schema_status(store).version;
}

detail::Operation operation_named(std::string_view name) {
  for (detail::Operation operation : kStatementOperations) {
    if (name == detail::operation_name(operation)) return operation;
  }
  throw Error(
      ErrorCode::invalid_argument,
      fmt::format("unknown operation '{}': use consume, check, record, reset or refund", name));
}

}  // namespace

bool is_server(std::string_view location) {
  return detail::classify_location(location).kind == detail::Location::Kind::postgresql;
}

void require_location(std::string_view location) { classified(location); }

std::string shown(std::string_view location) {
  const detail::Location where = detail::classify_location(location);
  switch (where.kind) {
    case detail::Location::Kind::postgresql:
      return detail::mask_password(where.text);
    case detail::Location::Kind::refused:
      return "(a location that is neither a file name nor a PostgreSQL connection string, not "
             "shown)";
    case detail::Location::Kind::sqlite_path:
      break;
  }
  return detail::redacted(location);
}

std::string migrate_command(std::string_view location) {
  const detail::Location where = detail::classify_location(location);
  if (where.kind == detail::Location::Kind::sqlite_path) {
    if (detail::redacted(location) != location) {
      return "`quotactl migrate --db FILE` (the file name given is not repeated, as it looks "
             "like it holds a password; a PostgreSQL connection string is written "
             "postgresql://USER@HOST:PORT/DATABASE, with the password in PGPASSWORD or "
             "~/.pgpass)";
    }
    return fmt::format("`quotactl migrate --db {}`", detail::shell_quoted(location));
  }
  if (where.kind == detail::Location::Kind::refused) {
    return "`quotactl migrate --db LOCATION` (LOCATION a file name or a postgresql:// URI)";
  }
  bool had_password = false;
  const std::string bare = detail::without_password(where.text, &had_password);
  if (bare.rfind("(", 0) == 0) return "`quotactl migrate --db \"$QUOTA_DB\"`";
  return fmt::format("`quotactl migrate --db {}`{}", detail::shell_quoted(bare),
                     had_password ? " (the password is left out: give it in PGPASSWORD or "
                                    "~/.pgpass, or add it to the URI)"
                                  : "");
}

std::vector<Migration> migrations(std::string_view location) {
  std::vector<Migration> result;
  for (const detail::Migration& migration :
       detail::built_in_migrations(classified(location).kind)) {
    result.push_back(public_migration(migration));
  }
  return result;
}

SchemaStatus schema_status(const std::string& location, std::chrono::milliseconds busy_timeout) {
  SchemaStatus status;
  const bool recovered =
      read_store(location, busy_timeout, [&](Store& store) { status = status_of(store); });
  status.recovered_journal = recovered;
  return status;
}

void require_usable(const SchemaStatus& status) {
  if (status.problem.empty()) return;
  throw Error(status.too_new ? ErrorCode::schema_too_new : ErrorCode::checksum_mismatch,
              status.problem);
}

Summary summarize(const std::string& location, std::chrono::milliseconds busy_timeout) {
  Summary summary;
  const bool recovered = read_store(location, busy_timeout, [&](Store& store) {
    summary.schema = status_of(store);
    summary.journal_mode = store.journal_mode();
    const auto rows = [&](const char* table) -> std::int64_t {
      if (!store.has_table(table)) return 0;
      return detail::integer_of(
          store.query(fmt::format("SELECT count(*) FROM {}", table), {}).at(0).at(0));
    };
    summary.limits = rows("quota_limits");
    for (const detail::sql::StateTable* table : detail::sql::owner_tables()) {
      summary.state_rows += rows(table->name);
    }
  });
  summary.schema.recovered_journal = recovered;
  return summary;
}

Migrated migrate(const std::string& location, std::int64_t now_ms,
                 std::chrono::milliseconds busy_timeout) {
  Migrated migrated;
  detail::use_store(classified(location), detail::AdminUse::migrate, busy_timeout,
                    [&](Store& store) { migrate_store(store, now_ms, migrated); });
  return migrated;
}

Dialect dialect_of(std::string_view location) {
  return classified(location).kind == detail::Location::Kind::postgresql ? Dialect::postgresql
                                                                         : Dialect::sqlite;
}

const char* to_string(Dialect dialect) {
  return dialect == Dialect::postgresql ? detail::kPostgresql.name.data()
                                        : detail::kSqlite.name.data();
}

std::vector<std::string> statement_operations() {
  std::vector<std::string> names;
  for (detail::Operation operation : kStatementOperations) {
    names.emplace_back(detail::operation_name(operation));
  }
  return names;
}

std::vector<std::string> lease_operations() { return {"acquire", "renew", "release"}; }

std::string statement(Dialect dialect, std::string_view operation, Algorithm algorithm,
                      bool calendar) {
  const detail::Dialect& spelling =
      dialect == Dialect::postgresql ? detail::kPostgresql : detail::kSqlite;
  const bool lease_operation = operation == "acquire" || operation == "renew" ||
                               operation == "release";
  if (lease_operation && algorithm != Algorithm::concurrency) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{} works on concurrency limits, not {}: name a concurrency limit",
                            operation, quota::to_string(algorithm)));
  }
  if (operation == "acquire") {
    return detail::statement(spelling, detail::Operation::consume, detail::StatementKind::concurrency);
  }
  if (operation == "renew") return detail::sql::renew_statement(spelling);
  if (operation == "release") return detail::sql::release_statement(spelling);
  const detail::Operation named = operation_named(operation);
  if (named == detail::Operation::refund && algorithm == Algorithm::concurrency) {
    throw Error(ErrorCode::invalid_argument,
                "refund does not apply to concurrency limits: release the lease instead "
                "(quotactl sql release)");
  }
  if (calendar && algorithm != Algorithm::fixed_window) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("calendar periods count only with fixed_window, not {}",
                            quota::to_string(algorithm)));
  }
  try {
    return detail::statement(dialect == Dialect::postgresql ? detail::kPostgresql : detail::kSqlite,
                             named, detail::kind_of(algorithm, calendar));
  } catch (const std::logic_error&) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("this build has no statement for {} limits: use sliding_log or "
                            "fixed_window",
                            quota::to_string(algorithm)));
  }
}

namespace {

// The operation as a key's row names it (Engine::acquire_lease with a key stores "acquire").
std::string_view keyed_operation(std::string_view operation) {
  if (operation == "consume" || operation == "acquire" || operation == "record") return operation;
  throw Error(ErrorCode::invalid_argument,
              fmt::format("--key works with consume, record and acquire, not {}: drop --key, or "
                          "name one of those",
                          operation));
}

// The library's numbered marks in `dialect`'s spelling (PostgreSQL's store rewrites them so).
std::string spelled(Dialect dialect, const char* sql) {
  return dialect == Dialect::postgresql ? detail::dollar_parameters(sql) : std::string(sql);
}

}  // namespace

std::string keyed_request_text(std::string_view operation, std::int64_t cost) {
  return detail::request_text(keyed_operation(operation), cost);
}

std::vector<KeyedStep> keyed_statements(Dialect dialect, std::string_view operation,
                                        Algorithm algorithm, bool calendar) {
  const std::string_view keyed = keyed_operation(operation);
  std::string request = statement(dialect, operation, algorithm, calendar);
  return {
      {"find_key",
       spelled(dialect, detail::kFindKey),
       {"limit", "owner", "key", "now"},
       fmt::format("no row: go on. A row whose request is this request's text ('{}': the "
                   "operation and the cost) is the answer, replayed: end the transaction, "
                   "changing nothing. A row with another request is a conflict "
                   "(idempotency_conflict): end it, changing nothing",
                   detail::request_text(keyed, 1))},
      {"claim_key",
       spelled(dialect, detail::kClaimKey),
       {"limit", "owner", "key", "request", "expires_at_ms", "now"},
       "1 row changed: go on (expires_at_ms: now + the key's lifetime). 0 rows: another "
       "transaction stored the key first: run find_key again for its answer"},
      {"request",
       std::move(request),
       {"limit", "owner", "cost", "now"},
       "its row is the answer: go on"},
      {"store_answer",
       spelled(dialect, detail::kStoreAnswer),
       {"limit", "owner", "key", "decided_by", "allowed", "reason", "remaining", "retry_after_ms",
        "reset_at_ms", "denied", "shadow_denied", "lease", "lease_expires_at_ms"},
       "the request's answer into the key's row (decided_by NULL; allowed and shadow_denied as "
       "1 or 0; lease and lease_expires_at_ms the acquire's lease and expires_at_ms, NULL for "
       "any other request or when no lease was taken), then commit"},
  };
}

}  // namespace quota::admin
