// Schema migrations: the numbered files of migrations/, embedded at build time, and the runner
// that applies them through any Store. Each backend supplies its own list (Store::migrations:
// SQLite's from src/sqlite/, PostgreSQL's from src/postgresql/); nothing here knows a driver.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quota::detail {

struct Migration {
  int version;
  const char* name;      // the file name without number and extension
  const char* checksum;  // SHA-256 of the text, lower-case hex
  const char* sql;
};

// The highest version of `migrations` (sorted by version), 0 for none.
int latest_version(const std::vector<Migration>& migrations);

struct AppliedMigration {
  int version = 0;
  std::string name;
  std::string checksum;
  std::int64_t applied_at_ms = 0;
};

// What a database holds, read without writing. `problem` is set (with a message that says
// what to do) when the database cannot be used by this build: a version newer than the
// build, or a checksum that differs from the built-in text.
struct SchemaStatus {
  int version = 0;  // the highest applied version, 0 for none
  std::vector<AppliedMigration> applied;
  std::vector<const Migration*> pending;
  bool too_new = false;
  std::string problem;
};

class Store;

// The latest version of the store's backend's migrations.
int latest_version(const Store& store);

SchemaStatus read_schema_status(Store& store);

// Throws Error (schema_too_new, checksum_mismatch) when `status.problem` is set.
void require_usable(const SchemaStatus& status);

// Applies every pending migration, each in its own IMMEDIATE transaction (or savepoint,
// when the connection is already inside a transaction).
// Appends each version to `applied` as it commits, so that a caller who runs it again after
// a failure knows every version it applied.
void apply_pending(Store& store, std::int64_t now_ms, std::vector<int>& applied);

}  // namespace quota::detail
