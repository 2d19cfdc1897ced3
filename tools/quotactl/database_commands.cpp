// migrate and status: the two commands that work on a database of any schema version.
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "busy.h"
#include "commands.h"
#include "migrations.h"
#include "sql/dialect.h"
#include "store.h"

namespace quotactl {
namespace {

using quota::Error;
using quota::ErrorCode;
using quota::detail::Migration;
using quota::detail::SchemaStatus;
using quota::detail::Store;

std::string migration_title(const Migration& migration) {
  return fmt::format("{:04}_{}", migration.version, migration.name);
}

nlohmann::ordered_json versions(const std::vector<const Migration*>& migrations) {
  auto array = nlohmann::ordered_json::array();
  for (const Migration* migration : migrations) array.push_back(migration->version);
  return array;
}

void require_not_directory(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give --db the path of a database file", path));
  }
}

// The schema status of an existing database, refused (exit 3) when this build cannot use it.
SchemaStatus usable_status(const Session& session) {
  SchemaStatus status;
  session.read_store([&](Store& store) {
    status = quota::detail::read_schema_status(store);
    quota::detail::require_usable(status);
  });
  return status;
}

int print_dry_run(Session& session, const std::vector<const Migration*>& pending, int version) {
  if (session.json) {
    session.emit({{"pending", versions(pending)}, {"schema_version", version}});
    return 0;
  }
  if (pending.empty()) {
    session.out << fmt::format("schema is up to date (version {}); nothing would be applied\n",
                               version);
    return 0;
  }
  session.out << fmt::format(
      "-- dry run: {} migration(s) would be applied to '{}', each in its "
      "own transaction; nothing was changed\n",
      pending.size(), session.shown_db());
  for (const Migration* migration : pending) {
    session.out << fmt::format("\n-- migration {}\n{}", migration_title(*migration),
                               migration->sql);
    if (std::string_view(migration->sql).ends_with('\n') == false) session.out << '\n';
  }
  return 0;
}

struct Migrated {
  std::vector<int> applied;  // the versions this run applied
  int version = 0;           // the schema's version afterwards
};

// Applies the pending migrations on `store` and reads the version they left. Another
// quotactl may be migrating the same database at once: each migration is applied by one of
// them (the store's begin_exclusive), and the version read afterwards counts both.
void migrate_store(Store& store, std::int64_t now, Migrated& migrated) {
  quota::detail::apply_pending(store, now, migrated.applied);
  migrated.version = quota::detail::read_schema_status(store).version;
}

Migrated apply(const Session& session) {
  Migrated migrated;
  if (session.on_server()) {
    migrate_store(*session.connect(), session.now, migrated);
    return migrated;
  }
  const std::string& path = session.db_path;
  const quota::detail::BusyHandler busy(session.busy_timeout);
  try {
    // Each attempt on a connection of its own: openers of a new file meet while it is still in
    // rollback-journal mode, where SQLite answers busy without waiting. The first read of this
    // connection also rolls back a transaction a killed process left unfinished.
    busy.wait_out([&] {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      busy.install(db.getHandle());
      db.exec("PRAGMA journal_mode = WAL");
      migrate_store(*borrowed_store(db, session.busy_timeout), session.now, migrated);
    });
  } catch (const SQLite::Exception& error) {
    throw database_error(error, path);
  }
  return migrated;
}

}  // namespace

int run_migrate(Session& session, const Arguments& arguments) {
  // An existing database is inspected read-only first: a file that is not a database, or a
  // schema this build cannot use, is refused before anything is written to it. Only a file
  // may be missing (migrate creates it); a server's database always exists.
  bool exists = session.on_server();
  if (!exists) {
    require_not_directory(session.db_path);
    std::error_code ignored;
    exists = std::filesystem::exists(session.db_path, ignored);
  }
  SchemaStatus status;
  if (exists) {
    status = usable_status(session);
  } else {
    for (const Migration& migration : quota::detail::built_in_migrations()) {
      status.pending.push_back(&migration);
    }
  }
  if (arguments.dry_run) return print_dry_run(session, status.pending, status.version);

  const Migrated migrated = apply(session);
  if (session.json) {
    session.emit({{"applied", migrated.applied}, {"schema_version", migrated.version}});
    return 0;
  }
  for (const Migration* migration : status.pending) {
    if (std::find(migrated.applied.begin(), migrated.applied.end(), migration->version) !=
        migrated.applied.end()) {
      session.out << "applied " << migration_title(*migration) << '\n';
    }
  }
  session.out << fmt::format("schema version {} ({}): '{}' is ready\n", migrated.version,
                             migrated.applied.empty() ? "already up to date" : "up to date",
                             session.shown_db());
  return 0;
}

namespace {

struct Counts {
  std::optional<std::string> journal_mode;  // a SQLite file's; a server has none
  std::int64_t limits = 0;
  std::int64_t state_rows = 0;
};

Counts count(Store& store) {
  Counts counts;
  if (store.dialect().name == quota::detail::kSqlite.name) {
    counts.journal_mode =
        quota::detail::text_of(store.query("PRAGMA journal_mode", {}).at(0).at(0));
  }
  const auto rows = [&](const char* table) -> std::int64_t {
    if (!store.has_table(table)) return 0;
    return quota::detail::integer_of(
        store.query(fmt::format("SELECT count(*) FROM {}", table), {}).at(0).at(0));
  };
  counts.limits = rows("quota_limits");
  // Every row that holds per-owner state: owners of window, log and bucket limits, and log
  // events.
  counts.state_rows =
      rows("quota_windows") + rows("quota_log_owners") + rows("quota_log") + rows("quota_buckets");
  return counts;
}

}  // namespace

int run_status(Session& session, const Arguments&) {
  SchemaStatus status;
  Counts counts;
  int latest = 0;
  const bool recovered = session.read_store([&](Store& store) {
    status = quota::detail::read_schema_status(store);
    latest = quota::detail::latest_version(store);
    counts = count(store);
  });
  // A newer schema is reported, not refused: the operator needs to see it. An edited
  // migration is an error of this file that every command reports.
  const bool refused = !status.problem.empty() && !status.too_new;

  if (session.json) {
    nlohmann::ordered_json document = {
        {"path", session.shown_db()},      {"schema_version", status.version},
        {"latest_version", latest},        {"pending", versions(status.pending)},
        {"journal_mode", nullptr},         {"limits", counts.limits},
        {"state_rows", counts.state_rows}, {"recovered_journal", recovered}};
    if (counts.journal_mode) document["journal_mode"] = *counts.journal_mode;
    if (!status.problem.empty()) document["problem"] = status.problem;
    session.emit(document);
  } else {
    std::string pending = "none";
    if (!status.pending.empty()) {
      pending.clear();
      for (const Migration* migration : status.pending) {
        pending += (pending.empty() ? "" : ", ") + migration_title(*migration);
      }
      pending += fmt::format(" (run {})", migrate_hint(session.db_path));
    }
    std::string version = fmt::format("{} (this build knows up to {})", status.version, latest);
    if (status.too_new) {
      version += fmt::format(" {}", session.paint("newer than this build", Colour::yellow));
    }
    session.out << fmt::format("{}{}\n",
                               session.on_server() ? "server          " : "database        ",
                               session.shown_db())
                << fmt::format("schema version  {}\n", version)
                << fmt::format("pending         {}\n", pending);
    if (counts.journal_mode)
      session.out << fmt::format("journal mode    {}\n", *counts.journal_mode);
    session.out << fmt::format("limits          {}\n", counts.limits)
                << fmt::format("state rows      {}\n", counts.state_rows);
    if (recovered) {
      session.out << fmt::format(
          "recovered       rolled back a transaction that a process left unfinished ('{}-journal')"
          "\n",
          session.db_path);
    }
    if (!status.problem.empty()) session.out << fmt::format("problem         {}\n", status.problem);
  }
  if (refused) throw Error(ErrorCode::checksum_mismatch, status.problem);
  return 0;
}

}  // namespace quotactl
