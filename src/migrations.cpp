#include "migrations.h"

#include <fmt/format.h>

#include <map>

#include "quota/error.h"
#include "store.h"

namespace quota::detail {

int latest_version(const std::vector<Migration>& migrations) {
  return migrations.empty() ? 0 : migrations.back().version;
}

int latest_version(const Store& store) { return latest_version(store.migrations()); }

SchemaStatus read_schema_status(Store& store) {
  SchemaStatus status;
  if (store.has_table("quota_migrations")) {
    for (const Row& row : store.query(
             "SELECT version, name, checksum, applied_at_ms FROM quota_migrations ORDER BY version",
             {})) {
      status.applied.push_back({static_cast<int>(integer_of(row.at(0))), text_of(row.at(1)),
                                text_of(row.at(2)), integer_of(row.at(3))});
      status.version = std::max(status.version, status.applied.back().version);
    }
  }
  std::map<int, const AppliedMigration*> applied_by_version;
  for (const auto& applied : status.applied) applied_by_version[applied.version] = &applied;

  const int latest = latest_version(store);
  for (const auto& migration : store.migrations()) {
    const auto found = applied_by_version.find(migration.version);
    if (found == applied_by_version.end()) {
      // PostgreSQL's first migration is the whole schema at a version SQLite reached in
      // steps: a database that has any later version needs no earlier one.
      if (status.version < migration.version) status.pending.push_back(&migration);
    } else if (found->second->checksum != migration.checksum && status.problem.empty()) {
      status.problem = fmt::format(
          "migration {:04}_{} in the database has checksum {} but this build's text has {}: "
          "the migration was edited after it was applied; restore the original file or use "
          "the build that applied it",
          migration.version, migration.name, found->second->checksum, migration.checksum);
    }
  }
  if (status.version > latest) {
    status.too_new = true;
    status.problem = fmt::format(
        "the database is at schema version {} but this build knows only up to {}: "
        "use a newer build of quota with this file",
        status.version, latest);
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
bool is_applied(Store& store, int version) {
  if (!store.has_table("quota_migrations")) return false;
  return !store
              .query("SELECT 1 FROM quota_migrations WHERE version = ?1",
                     {Value(std::int64_t{version})})
              .empty();
}

}  // namespace

void apply_pending(Store& store, std::int64_t now_ms, std::vector<int>& applied) {
  const SchemaStatus status = read_schema_status(store);
  require_usable(status);
  for (const Migration* migration : status.pending) {
    // Each migration commits on its own: a crash leaves the previous version intact. The
    // pending list was read before the write lock; another connection may have applied the
    // migration since, which is only known once the lock is held.
    store.begin_exclusive(Exclusive::migration);
    try {
      const bool already = is_applied(store, migration->version);
      if (!already) {
        store.execute_script(migration->sql);
        store.execute(
            "INSERT INTO quota_migrations (version, name, checksum, applied_at_ms) "
            "VALUES (?1, ?2, ?3, ?4)",
            {Value(std::int64_t{migration->version}), Value(std::string(migration->name)),
             Value(std::string(migration->checksum)), Value(now_ms)});
      }
      store.commit();
      if (!already) applied.push_back(migration->version);
    } catch (...) {
      // The original error says more than a failed rollback.
      store.rollback();
      throw;
    }
  }
  // What another connection applied meanwhile must match this build as well.
  require_usable(read_schema_status(store));
}

}  // namespace quota::detail
