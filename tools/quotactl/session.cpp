#include "session.h"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>

#include "text.h"

namespace quotactl {

using quota::Error;
using quota::ErrorCode;

void Session::emit(const nlohmann::ordered_json& document) const {
  out << document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  emitted = true;
}

std::string Session::paint(std::string_view text, Colour colour) const {
  if (!use_colour) return std::string(text);
  const char* code = "";
  switch (colour) {
    case Colour::green:
      code = "32";
      break;
    case Colour::red:
      code = "31";
      break;
    case Colour::yellow:
      code = "33";
      break;
    case Colour::bold:
      code = "1";
      break;
  }
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

std::string migrate_hint(const std::string& location) {
  return quota::admin::migrate_command(location);
}

bool Session::on_server() const { return quota::admin::is_server(db_path); }

std::string Session::shown_db() const { return quota::admin::shown(db_path); }

void Session::require_database() const {
  quota::admin::require_location(db_path);
  if (on_server()) return;
  std::error_code ignored;
  const auto kind = std::filesystem::status(db_path, ignored).type();
  if (kind == std::filesystem::file_type::not_found) {
    throw Error(ErrorCode::io, fmt::format("database '{}' does not exist: create it with {}",
                                           db_path, migrate_hint(db_path)));
  }
  if (kind == std::filesystem::file_type::directory) {
    throw Error(ErrorCode::io,
                fmt::format("'{}' is a directory: give --db the path of a database file", db_path));
  }
}

quota::admin::SchemaStatus Session::usable_status() const {
  require_database();
  quota::admin::SchemaStatus status = quota::admin::schema_status(db_path, busy_timeout);
  quota::admin::require_usable(status);
  return status;
}

quota::Error unknown_limit(std::string_view name, const std::vector<std::string>& meant) {
  std::string message = fmt::format("unknown limit '{}'", name);
  if (meant.empty()) {
    message +=
        ": `quotactl limit list` shows the limits there are; `quotactl limit set NAME --max N "
        "--per DURATION` defines one";
  } else {
    message += ": did you mean ";
    for (std::size_t i = 0; i < meant.size(); ++i) {
      if (i > 0) message += i + 1 == meant.size() ? " or " : ", ";
      message += fmt::format("'{}'", meant[i]);
    }
    message += "? (`quotactl limit list` shows the limits there are)";
  }
  return Error(ErrorCode::unknown_limit, message, name, meant);
}

quota::Error unknown_limit(quota::Engine& engine, std::string_view name) {
  std::vector<std::string> names;
  for (quota::Limit& limit : engine.list()) names.push_back(std::move(limit.name));
  return unknown_limit(name, likely_meant(name, names));
}

quota::Limit existing_limit(quota::Engine& engine, const std::string& name) {
  std::optional<quota::Limit> limit = engine.get(name);
  if (!limit) throw unknown_limit(engine, name);
  return std::move(*limit);
}

std::string message_of(const quota::Error& error) {
  // The library's message names its own calls (Engine::define); the name it carries, and the
  // names it found close to it, are enough for quotactl's.
  if (error.code() == ErrorCode::unknown_limit && !error.limit().empty()) {
    return unknown_limit(error.limit(), error.meant()).what();
  }
  return error.what();
}

quota::Engine Session::open_engine(quota::Clock clock) {
  return open(std::move(clock), false);
}

quota::Engine Session::open_reader() { return open({}, true); }

quota::Engine Session::open(quota::Clock clock, bool read_only) {
  // The schema is checked first on a read-only connection, so that a file quotactl refuses is
  // never opened for writing at all (the engine, too, refuses before it writes), and so that
  // the message names the exact `quotactl migrate --db PATH` (or URI) to run.
  const quota::admin::SchemaStatus status = usable_status();
  if (!status.pending.empty()) {
    throw Error(
        ErrorCode::not_migrated,
        fmt::format("'{}' is at schema version {} and this build needs version {}: run {}",
                    shown_db(), status.version, status.latest_version, migrate_hint(db_path)));
  }
  quota::Options options;
  options.create = false;
  options.migrate = false;
  options.clock = clock ? std::move(clock) : quota::Clock([now = now] { return now; });
  options.server_clock = server_clock;
  options.busy_timeout = busy_timeout;
  options.read_only = read_only;
  // A command lasts moments (watch, minutes at most): `quotactl gc` is its expiry.
  options.expire_interval = std::chrono::milliseconds{0};
  quota::Engine engine = quota::Engine::open(db_path, std::move(options));
  if (server_clock) now = engine.now();
  return engine;
}

}  // namespace quotactl
