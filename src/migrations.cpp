#include "migrations.h"

#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <map>

#include "quota/error.h"

namespace quota::detail {

int latest_version() {
  const auto& all = built_in_migrations();
  return all.empty() ? 0 : all.back().version;
}

SchemaStatus read_schema_status(SQLite::Database& db) {
  SchemaStatus status;
  if (db.tableExists("quota_migrations")) {
    SQLite::Statement query(
        db, "SELECT version, name, checksum, applied_at_ms FROM quota_migrations ORDER BY version");
    while (query.executeStep()) {
      status.applied.push_back({query.getColumn(0).getInt(), query.getColumn(1).getString(),
                                query.getColumn(2).getString(), query.getColumn(3).getInt64()});
      status.version = std::max(status.version, status.applied.back().version);
    }
  }
  std::map<int, const AppliedMigration*> applied_by_version;
  for (const auto& applied : status.applied) applied_by_version[applied.version] = &applied;

  for (const auto& migration : built_in_migrations()) {
    const auto found = applied_by_version.find(migration.version);
    if (found == applied_by_version.end()) {
      status.pending.push_back(&migration);
    } else if (found->second->checksum != migration.checksum && status.problem.empty()) {
      status.problem = fmt::format(
          "migration {:04}_{} in the database has checksum {} but this build's text has {}: "
          "the migration was edited after it was applied; restore the original file or use "
          "the build that applied it",
          migration.version, migration.name, found->second->checksum, migration.checksum);
    }
  }
  if (status.version > latest_version()) {
    status.too_new = true;
    status.problem = fmt::format(
        "the database is at schema version {} but this build knows only up to {}: "
        "use a newer build of quota with this file",
        status.version, latest_version());
  }
  return status;
}

void require_usable(const SchemaStatus& status) {
  if (status.problem.empty()) return;
  throw Error(status.too_new ? ErrorCode::schema_too_new : ErrorCode::checksum_mismatch,
              status.problem);
}

namespace {

// Whether `version` is recorded as applied, read inside the caller's write transaction.
bool is_applied(SQLite::Database& db, int version) {
  if (!db.tableExists("quota_migrations")) return false;
  SQLite::Statement query(db, "SELECT 1 FROM quota_migrations WHERE version = ?");
  query.bind(1, version);
  return query.executeStep();
}

}  // namespace

void apply_pending(SQLite::Database& db, std::int64_t now_ms, std::vector<int>& applied) {
  const SchemaStatus status = read_schema_status(db);
  require_usable(status);
  const bool in_transaction = sqlite3_get_autocommit(db.getHandle()) == 0;
  for (const Migration* migration : status.pending) {
    // Each migration commits on its own: a crash leaves the previous version intact. The
    // pending list was read before the write lock; another connection may have applied the
    // migration since, which is only known once the lock is held.
    db.exec(in_transaction ? "SAVEPOINT quota_migration" : "BEGIN IMMEDIATE");
    try {
      const bool already = is_applied(db, migration->version);
      if (!already) {
        db.exec(migration->sql);
        SQLite::Statement insert(db,
                                 "INSERT INTO quota_migrations (version, name, checksum, "
                                 "applied_at_ms) VALUES (?, ?, ?, ?)");
        insert.bind(1, migration->version);
        insert.bind(2, migration->name);
        insert.bind(3, migration->checksum);
        insert.bind(4, static_cast<int64_t>(now_ms));
        insert.exec();
      }
      db.exec(in_transaction ? "RELEASE quota_migration" : "COMMIT");
      if (!already) applied.push_back(migration->version);
    } catch (...) {
      try {
        db.exec(in_transaction ? "ROLLBACK TO quota_migration; RELEASE quota_migration"
                               : "ROLLBACK");
      } catch (...) {
        // The original error says more than a failed rollback.
      }
      throw;
    }
  }
  // What another connection applied meanwhile must match this build as well.
  require_usable(read_schema_status(db));
}

}  // namespace quota::detail
