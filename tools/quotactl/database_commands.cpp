// migrate and status: the two commands that work on a database of any schema version.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "commands.h"

namespace quotactl {
namespace {

using quota::Error;
using quota::ErrorCode;
using quota::admin::Migration;
using quota::admin::SchemaStatus;

std::string migration_title(const Migration& migration) {
  return fmt::format("{:04}_{}", migration.version, migration.name);
}

nlohmann::ordered_json versions(const std::vector<Migration>& migrations) {
  auto array = nlohmann::ordered_json::array();
  for (const Migration& migration : migrations) array.push_back(migration.version);
  return array;
}

void require_not_directory(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give --db the path of a database file", path));
  }
}

int print_dry_run(Session& session, const std::vector<Migration>& pending, int version) {
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
  for (const Migration& migration : pending) {
    session.out << fmt::format("\n-- migration {}\n{}", migration_title(migration), migration.sql);
    if (std::string_view(migration.sql).ends_with('\n') == false) session.out << '\n';
  }
  return 0;
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
    status = session.usable_status();
  } else {
    status.pending = quota::admin::migrations(session.db_path);
  }
  if (arguments.dry_run) return print_dry_run(session, status.pending, status.version);

  // Another quotactl may be migrating the same database at once: each migration is applied by
  // one of them, and the version read afterwards counts both.
  const quota::admin::Migrated migrated =
      quota::admin::migrate(session.db_path, session.now, session.busy_timeout);
  if (session.json) {
    session.emit({{"applied", migrated.applied}, {"schema_version", migrated.version}});
    return 0;
  }
  for (const Migration& migration : status.pending) {
    if (std::find(migrated.applied.begin(), migrated.applied.end(), migration.version) !=
        migrated.applied.end()) {
      session.out << "applied " << migration_title(migration) << '\n';
    }
  }
  session.out << fmt::format("schema version {} ({}): '{}' is ready\n", migrated.version,
                             migrated.applied.empty() ? "already up to date" : "up to date",
                             session.shown_db());
  return 0;
}

int run_status(Session& session, const Arguments&) {
  session.require_database();
  const quota::admin::Summary summary =
      quota::admin::summarize(session.db_path, session.busy_timeout);
  const SchemaStatus& status = summary.schema;
  const int latest = status.latest_version;
  const bool recovered = status.recovered_journal;
  // A newer schema is reported, not refused: the operator needs to see it. An edited
  // migration is an error of this file that every command reports.
  const bool refused = !status.problem.empty() && !status.too_new;

  if (session.json) {
    nlohmann::ordered_json document = {
        {"path", session.shown_db()},       {"schema_version", status.version},
        {"latest_version", latest},         {"pending", versions(status.pending)},
        {"journal_mode", nullptr},          {"limits", summary.limits},
        {"state_rows", summary.state_rows}, {"recovered_journal", recovered}};
    if (summary.journal_mode) document["journal_mode"] = *summary.journal_mode;
    if (!status.problem.empty()) document["problem"] = status.problem;
    session.emit(document);
  } else {
    std::string pending = "none";
    if (!status.pending.empty()) {
      pending.clear();
      for (const Migration& migration : status.pending) {
        pending += (pending.empty() ? "" : ", ") + migration_title(migration);
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
    if (summary.journal_mode)
      session.out << fmt::format("journal mode    {}\n", *summary.journal_mode);
    session.out << fmt::format("limits          {}\n", summary.limits)
                << fmt::format("state rows      {}\n", summary.state_rows);
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
