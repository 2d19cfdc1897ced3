// override set, rm and list: per-owner overrides (docs/), stored in quota_overrides.
#include <fmt/format.h>

#include <ostream>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

nlohmann::ordered_json to_json(const quota::Override& override) {
  auto optional = [](const std::optional<std::int64_t>& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
  };
  return {{"limit", override.limit},
          {"owner", override.owner},
          {"policy", quota::to_string(override.policy)},
          {"maximum", optional(override.maximum)},
          {"burst", optional(override.burst)}};
}

// e.g. "20 per period (burst 40)", "exempt", "deny"
std::string describe(const quota::Override& override) {
  if (override.policy != quota::Policy::maximum) {
    return std::string(quota::to_string(override.policy));
  }
  std::string text = fmt::format("maximum {}", override.maximum.value_or(0));
  if (override.burst) text += fmt::format(", burst {}", *override.burst);
  return text;
}

quota::Override parse_override(const Arguments& arguments) {
  quota::Override override{arguments.limit, arguments.owner};
  if (arguments.exempt) {
    override.policy = quota::Policy::exempt;
  } else if (arguments.deny) {
    override.policy = quota::Policy::deny;
  } else if (arguments.maximum) {
    override.maximum = parse_whole(*arguments.maximum, "--max", 1, quota::kMaximumBound);
    if (arguments.burst) {
      override.burst = parse_whole(*arguments.burst, "--burst", 1, quota::kMaximumBound);
    }
  } else {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "override set needs one of --max N, --exempt or --deny");
  }
  quota::validate_override(override);
  return override;
}

void validate_override_limit(const std::string& limit) {
  if (limit != quota::kEveryLimit) quota::validate_limit_name(limit);
}

}  // namespace

int run_override_set(Session& session, const Arguments& arguments) {
  const quota::Override override = parse_override(arguments);
  quota::Engine engine = session.open_engine();
  engine.set_override(override);
  if (session.json) {
    session.emit(to_json(override));
  } else {
    session.out << fmt::format("override for {} on {}: {}\n", printable(override.owner, 64),
                               override.limit == quota::kEveryLimit ? "every limit"
                                                                    : override.limit,
                               describe(override));
  }
  return 0;
}

int run_override_rm(Session& session, const Arguments& arguments) {
  validate_override_limit(arguments.limit);
  quota::validate_owner(arguments.owner);
  quota::Engine engine = session.open_engine();
  if (arguments.limit != quota::kEveryLimit) existing_limit(engine, arguments.limit);
  if (!engine.remove_override(arguments.limit, arguments.owner)) {
    throw quota::Error(
        quota::ErrorCode::invalid_argument,
        fmt::format("no override for owner '{}' on '{}': see `quotactl override "
                    "list {}`",
                    printable(arguments.owner, 64), arguments.limit,
                    arguments.limit == quota::kEveryLimit ? "'*'" : arguments.limit));
  }
  if (session.json) {
    session.emit({{"removed", {{"limit", arguments.limit}, {"owner", arguments.owner}}}});
  } else {
    session.out << fmt::format("removed the override for {} on {}\n",
                               printable(arguments.owner, 64), arguments.limit);
  }
  return 0;
}

int run_override_list(Session& session, const Arguments& arguments) {
  if (arguments.override_limit) validate_override_limit(*arguments.override_limit);
  quota::Engine engine = session.open_engine();
  std::optional<std::string_view> limit;
  if (arguments.override_limit) {
    if (*arguments.override_limit != quota::kEveryLimit) {
      existing_limit(engine, *arguments.override_limit);
    }
    limit = *arguments.override_limit;
  }
  const std::vector<quota::Override> overrides = engine.overrides(limit);
  if (session.json) {
    auto array = nlohmann::ordered_json::array();
    for (const quota::Override& override : overrides) array.push_back(to_json(override));
    session.emit(array);
    return 0;
  }
  if (overrides.empty()) {
    session.out << "no overrides: set one with `quotactl override set NAME OWNER --max N`\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{{"LIMIT", "OWNER", "POLICY"}};
  for (const quota::Override& override : overrides) {
    rows.push_back({override.limit, printable(override.owner, 40), describe(override)});
  }
  session.out << format_table(rows, {false, false, false});
  return 0;
}

}  // namespace quotactl
