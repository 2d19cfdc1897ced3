// What every quotactl command works with: its parsed arguments, where to write, and how to
// reach the database without ever changing a file it must not change.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/admin.h"
#include "quota/engine.h"

namespace CLI {
class App;
}

namespace quotactl {

// The arguments of every command, as typed; a command reads the fields it declared and
// checks them before it opens the database.
struct Arguments {
  std::string limit;                     // NAME
  std::string owner;                     // OWNER
  std::string operation;                 // sql's consume|check|record|reset|refund
  std::optional<std::string> sql_limit;  // sql's optional NAME
  bool sql_key = false;                  // sql --key: the keyed protocol
  std::vector<std::string> topic;        // help's COMMAND words
  std::optional<std::string> cost;
  std::optional<std::string> maximum;
  std::optional<std::string> per;
  std::optional<std::string> algorithm;
  std::optional<std::string> burst;
  std::optional<std::string> owner_filter;  // usage --owner
  std::optional<std::string> top;
  std::optional<std::string> batch;       // gc --batch
  std::optional<std::string> by;          // usage --by
  std::optional<std::string> block;       // limit set --block
  std::optional<std::string> ttl;         // limit set --ttl, lease renew --ttl
  std::string lease;                      // lease renew|release's ID
  std::optional<std::string> wait;        // consume --wait
  std::optional<std::string> key;         // consume/record --key (an idempotency key)
  std::optional<std::string> utc_offset;  // limit set --utc-offset
  std::optional<std::string> anchor;      // limit set --anchor, override set --anchor
  bool no_block = false;                  // limit set --no-block
  bool dry_run = false;
  bool shadow = false;                        // limit set --shadow
  bool enforce = false;                       // limit set --enforce
  bool exempt = false;                        // override set --exempt
  bool deny = false;                          // override set --deny
  std::optional<std::string> override_limit;  // override list's optional NAME
  std::optional<std::string> watch_for;       // watch --for
  std::string file;                           // apply's FILE
  bool prune = false;                         // apply --prune
  bool allow_empty = false;                   // apply --allow-empty
  bool check = false;                         // apply --check
};

enum class Colour { green, red, yellow, bold };

struct Session {
  std::ostream& out;
  std::ostream& err;
  std::string db_path{};
  bool json = false;
  bool use_colour = false;     // ANSI colour on `out`
  bool show_progress = false;  // progress bars on `out`: a terminal, and not --json
  std::int64_t now = 0;        // the one instant this invocation runs at (Unix ms)
  bool fixed_now = false;      // --now gave it
  // --server-clock: operations take the time from the database's clock instead of `now`
  // (Options::server_clock), which then serves only to show times.
  bool server_clock = false;
  // How long to wait for another connection's lock before giving up (--busy-timeout).
  std::chrono::milliseconds busy_timeout{5000};
  const CLI::App* root = nullptr;  // for `help`
  int input = 0;                   // standard input's descriptor (`apply -`)

  // Writes `document` as the invocation's one JSON document.
  void emit(const nlohmann::ordered_json& document) const;
  mutable bool emitted = false;  // emit has written a document
  // `text` in `colour` when colour is on, else as is.
  std::string paint(std::string_view text, Colour colour) const;

  // Whether --db (or $QUOTA_DB) names a PostgreSQL server (postgresql://... or
  // postgres://...) rather than a SQLite file.
  bool on_server() const;
  // The database as output and messages name it: the file's path, or the URI with its
  // password masked.
  std::string shown_db() const;

  // Refuses a --db that names no database: almost a PostgreSQL URI (invalid_argument, as
  // quota::admin::require_location), or a file that does not exist (naming `quotactl
  // migrate`) or is a directory (io); a server passes.
  void require_database() const;

  // The schema status of the database, read without writing (quota::admin::schema_status),
  // refused (exit 3) when this build cannot use it.
  quota::admin::SchemaStatus usable_status() const;

  // Opens the database for a command other than migrate and status: it must exist, be a
  // quota database (a SQLite file, or a server's schema), and be migrated to exactly this
  // build's schema. Throws quota::Error (exit 3) otherwise, having changed nothing. Its clock
  // is `now`, or `clock` when given (watch and consume --wait: the time as it goes on). With
  // --server-clock, `now` becomes the database's time, so that what is shown counts from the
  // time the operations use.
  quota::Engine open_engine(quota::Clock clock = {});
  // open_engine for a command that only reads (Options::read_only): it works on a database
  // this user may read but not write, in a folder they may not write.
  quota::Engine open_reader();

 private:
  quota::Engine open(quota::Clock clock, bool read_only);
};

// The error for a limit that does not exist (exit 2): the stored limits the user likely
// meant (`meant`, quota::likely_meant) or else how to list or define limits.
quota::Error unknown_limit(std::string_view name, const std::vector<std::string>& meant);
// unknown_limit(name, the stored limits of `engine` that `name` likely means).
quota::Error unknown_limit(quota::Engine& engine, std::string_view name);

// The limit `name`, which must exist: throws unknown_limit(name) otherwise.
quota::Limit existing_limit(quota::Engine& engine, const std::string& name);

// What quotactl says for `error`: the library's message, in quotactl's own words where the
// library's speak to programs (an unknown limit, whichever command or call named it).
std::string message_of(const quota::Error& error);

// The human wording for "run quotactl migrate on this database", ready to paste into a shell
// (quota::admin::migrate_command: a URI's password left out, never masked).
std::string migrate_hint(const std::string& location);

}  // namespace quotactl
