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

std::vector<int> apply_pending(SQLite::Database& db, std::int64_t now_ms) {
  const SchemaStatus status = read_schema_status(db);
  require_usable(status);
  const bool in_transaction = sqlite3_get_autocommit(db.getHandle()) == 0;
  std::vector<int> applied;
  for (const Migration* migration : status.pending) {
    // Each migration commits on its own: a crash leaves the previous version intact.
    db.exec(in_transaction ? "SAVEPOINT quota_migration" : "BEGIN IMMEDIATE");
    try {
      db.exec(migration->sql);
      SQLite::Statement insert(db,
                               "INSERT INTO quota_migrations (version, name, checksum, "
                               "applied_at_ms) VALUES (?, ?, ?, ?)");
      insert.bind(1, migration->version);
      insert.bind(2, migration->name);
      insert.bind(3, migration->checksum);
      insert.bind(4, static_cast<int64_t>(now_ms));
      insert.exec();
      db.exec(in_transaction ? "RELEASE quota_migration" : "COMMIT");
    } catch (...) {
      try {
        db.exec(in_transaction ? "ROLLBACK TO quota_migration; RELEASE quota_migration"
                               : "ROLLBACK");
      } catch (...) {
        // The original error says more than a failed rollback.
      }
      throw;
    }
    applied.push_back(migration->version);
  }
  return applied;
}

}  // namespace quota::detail
