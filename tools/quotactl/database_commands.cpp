// migrate and status: the two commands that work on a database of any schema version.
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "busy.h"
#include "commands.h"
#include "migrations.h"

namespace quotactl {
namespace {

using quota::Error;
using quota::ErrorCode;
using quota::detail::Migration;
using quota::detail::SchemaStatus;

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
SchemaStatus usable_status(const std::string& path, std::chrono::milliseconds busy_timeout) {
  SchemaStatus status;
  read_database(path, busy_timeout, [&](SQLite::Database& db) {
    status = quota::detail::read_schema_status(db);
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
      pending.size(), session.db_path);
  for (const Migration* migration : pending) {
    session.out << fmt::format("\n-- migration {}\n{}", migration_title(*migration),
                               migration->sql);
    if (std::string_view(migration->sql).ends_with('\n') == false) session.out << '\n';
  }
  return 0;
}

std::vector<int> apply(const std::string& path, std::int64_t now,
                       std::chrono::milliseconds busy_timeout) {
  const quota::detail::BusyHandler busy(busy_timeout);
  std::vector<int> applied;
  try {
    // Each attempt on a connection of its own: openers of a new file meet while it is still in
    // rollback-journal mode, where SQLite answers busy without waiting. The first read of this
    // connection also rolls back a transaction a killed process left unfinished.
    busy.wait_out([&] {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      busy.install(db.getHandle());
      db.exec("PRAGMA journal_mode = WAL");
      quota::detail::apply_pending(db, now, applied);
    });
  } catch (const SQLite::Exception& error) {
    throw database_error(error, path);
  }
  return applied;
}

}  // namespace

int run_migrate(Session& session, const Arguments& arguments) {
  const std::string& path = session.db_path;
  require_not_directory(path);
  std::error_code ignored;
  const bool exists = std::filesystem::exists(path, ignored);
  // An existing file is inspected read-only first: one that is not a database, or whose
  // schema this build cannot use, is refused before anything is written to it.
  SchemaStatus status;
  if (exists) {
    status = usable_status(path, session.busy_timeout);
  } else {
    for (const Migration& migration : quota::detail::built_in_migrations()) {
      status.pending.push_back(&migration);
    }
  }
  if (arguments.dry_run) return print_dry_run(session, status.pending, status.version);

  const std::vector<int> applied = apply(path, session.now, session.busy_timeout);
  const int version = applied.empty() ? status.version : applied.back();
  if (session.json) {
    session.emit({{"applied", applied}, {"schema_version", version}});
    return 0;
  }
  for (const Migration& migration : quota::detail::built_in_migrations()) {
    if (std::find(applied.begin(), applied.end(), migration.version) != applied.end()) {
      session.out << "applied " << migration_title(migration) << '\n';
    }
  }
  session.out << fmt::format("schema version {} ({}): '{}' is ready\n", version,
                             applied.empty() ? "already up to date" : "up to date", path);
  return 0;
}

namespace {

struct Counts {
  std::string journal_mode;
  std::int64_t limits = 0;
  std::int64_t state_rows = 0;
};

Counts count(SQLite::Database& db) {
  Counts counts;
  counts.journal_mode = db.execAndGet("PRAGMA journal_mode").getString();
  const auto rows = [&](const char* table) -> std::int64_t {
    if (!db.tableExists(table)) return 0;
    return db.execAndGet(fmt::format("SELECT count(*) FROM {}", table)).getInt64();
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
  const bool recovered =
      read_database(session.db_path, session.busy_timeout, [&](SQLite::Database& db) {
        status = quota::detail::read_schema_status(db);
        counts = count(db);
      });
  const int latest = quota::detail::latest_version();
  // A newer schema is reported, not refused: the operator needs to see it. An edited
  // migration is an error of this file that every command reports.
  const bool refused = !status.problem.empty() && !status.too_new;

  if (session.json) {
    nlohmann::ordered_json document = {{"path", session.db_path},
                                       {"schema_version", status.version},
                                       {"latest_version", latest},
                                       {"pending", versions(status.pending)},
                                       {"journal_mode", counts.journal_mode},
                                       {"limits", counts.limits},
                                       {"state_rows", counts.state_rows},
                                       {"recovered_journal", recovered}};
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
    session.out << fmt::format("database        {}\n", session.db_path)
                << fmt::format("schema version  {}\n", version)
                << fmt::format("pending         {}\n", pending)
                << fmt::format("journal mode    {}\n", counts.journal_mode)
                << fmt::format("limits          {}\n", counts.limits)
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
