// apply: limits as configuration (quota::Config, Engine::apply). The file (or standard input,
// `-`) is read and checked whole before the database is opened; the plan is printed one
// change a line:
//
//   + create limit send_message: 10 per 1m (sliding_log)
//   ~ change limit api: 100 per 1m (sliding_log) -> 200 per 1m (sliding_log)
//   - remove limit old: 5 per 1s (fixed_window)
//   + create override send_message u42: maximum 20
#include <fmt/format.h>

#include <ostream>
#include <string>

#include "commands.h"
#include "quota/config.h"
#include "text.h"

namespace quotactl {
namespace {

std::string_view sign(quota::ChangeKind kind) {
  switch (kind) {
    case quota::ChangeKind::create: return "+";
    case quota::ChangeKind::change: return "~";
    case quota::ChangeKind::remove: return "-";
  }
  return "+";
}

std::string describe_change(const quota::Change& change) {
  const std::string head = fmt::format("{} {}", sign(change.kind), quota::to_string(change.kind));
  if (change.is_limit()) {
    const quota::Limit& limit = change.limit_after ? *change.limit_after : *change.limit_before;
    std::string text = fmt::format("{} limit {}: ", head, limit.name);
    if (change.kind == quota::ChangeKind::change) {
      text += describe_limit(*change.limit_before) + " -> ";
      if (change.limit_before->algorithm != change.limit_after->algorithm) {
        text += describe_limit(limit) + " (another algorithm: its state is discarded)";
        return text;
      }
    }
    return text + describe_limit(limit);
  }
  const quota::Override& entry =
      change.override_after ? *change.override_after : *change.override_before;
  std::string text = fmt::format("{} override {} {}: ", head, entry.limit, printable(entry.owner));
  if (change.kind == quota::ChangeKind::change) {
    text += describe_override(*change.override_before) + " -> ";
  }
  return text + describe_override(entry);
}

nlohmann::ordered_json override_json(const quota::Override& entry) {
  const auto optional = [](const std::optional<std::int64_t>& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
  };
  return {{"limit", entry.limit},
          {"owner", entry.owner},
          {"policy", quota::to_string(entry.policy)},
          {"maximum", optional(entry.maximum)},
          {"burst", optional(entry.burst)}};
}

nlohmann::ordered_json change_json(const quota::Change& change) {
  const nlohmann::ordered_json null = nullptr;
  if (change.is_limit()) {
    return {{"action", quota::to_string(change.kind)},
            {"kind", "limit"},
            {"name", change.limit_after ? change.limit_after->name : change.limit_before->name},
            {"before", change.limit_before ? limit_json(*change.limit_before) : null},
            {"after", change.limit_after ? limit_json(*change.limit_after) : null}};
  }
  const quota::Override& entry =
      change.override_after ? *change.override_after : *change.override_before;
  return {{"action", quota::to_string(change.kind)},
          {"kind", "override"},
          {"name", entry.limit},
          {"owner", entry.owner},
          {"before", change.override_before ? override_json(*change.override_before) : null},
          {"after", change.override_after ? override_json(*change.override_after) : null}};
}

}  // namespace

int run_apply(Session& session, const Arguments& arguments) {
  if (arguments.check && arguments.dry_run) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "--check already changes nothing: give --check or --dry-run, not both");
  }
  const bool from_input = arguments.file == "-";
  const std::string source = from_input ? "standard input" : arguments.file;
  // A named pipe waits for its writer as a lock is waited for: up to the busy timeout.
  const quota::Config config = from_input
                                   ? quota::Config::read(session.input, source)
                                   : quota::Config::load(arguments.file, session.busy_timeout);
  if (arguments.prune && config.limits.empty() && !arguments.allow_empty) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("{} declares no limit, so --prune would remove every limit "
                                   "and its state: check the file (an empty file is likelier a "
                                   "mistake), or give --allow-empty to remove them on purpose; "
                                   "nothing was changed",
                                   source));
  }
  quota::Engine engine = session.open_engine();
  const bool dry = arguments.dry_run || arguments.check;
  const std::vector<quota::Change> changes = engine.apply(
      config, {.prune = arguments.prune, .dry_run = dry, .allow_empty = arguments.allow_empty});
  const bool drift = !changes.empty();
  if (session.json) {
    auto array = nlohmann::ordered_json::array();
    for (const quota::Change& change : changes) array.push_back(change_json(change));
    nlohmann::ordered_json document{{"changes", array}, {"applied", !dry && drift}};
    if (arguments.check) document["drift"] = drift;
    session.emit(document);
  } else {
    for (const quota::Change& change : changes) session.out << describe_change(change) << '\n';
    const std::string count =
        fmt::format("{} change{}", changes.size(), changes.size() == 1 ? "" : "s");
    if (!drift) {
      session.out << fmt::format("{}: the database matches {}\n",
                                 arguments.check ? "no drift" : "nothing to change", source);
    } else if (arguments.check) {
      const std::string options = !arguments.prune        ? ""
                                  : arguments.allow_empty ? " --prune --allow-empty"
                                                          : " --prune";
      session.out << fmt::format("drift: {} to make the database match {} (run quotactl apply "
                                 "{}{})\n",
                                 count, source, arguments.file, options);
    } else if (dry) {
      session.out << fmt::format("dry run: {}, nothing changed\n", count);
    } else {
      session.out << fmt::format("applied {}\n", count);
    }
  }
  return arguments.check && drift ? 1 : 0;
}

}  // namespace quotactl
