// override set, rm and list: per-owner overrides (docs/), stored in quota_overrides, and
// owners' own anchors of calendar limits, stored in quota_anchors. The commands show an
// owner's override and anchor of one limit together, as one row.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <ostream>
#include <utility>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

// What an owner has of its own on one limit (or on '*'): an override, an anchor, or both.
struct OwnerRow {
  std::string limit;
  std::string owner;
  std::optional<quota::Override> override;
  std::optional<std::int64_t> anchor_ms;
};

nlohmann::ordered_json to_json(const OwnerRow& row) {
  auto optional = [](const std::optional<std::int64_t>& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
  };
  const std::optional<quota::Override>& override = row.override;
  return {{"limit", row.limit},
          {"owner", row.owner},
          {"policy", override ? nlohmann::ordered_json(quota::to_string(override->policy))
                              : nlohmann::ordered_json(nullptr)},
          {"maximum", optional(override ? override->maximum : std::nullopt)},
          {"burst", optional(override ? override->burst : std::nullopt)},
          {"anchor_ms", optional(row.anchor_ms)}};
}

// e.g. "maximum 20, burst 40", "exempt", "deny"
std::string describe(const quota::Override& override) {
  if (override.policy != quota::Policy::maximum) {
    return std::string(quota::to_string(override.policy));
  }
  std::string text = fmt::format("maximum {}", override.maximum.value_or(0));
  if (override.burst) text += fmt::format(", burst {}", *override.burst);
  return text;
}

// The override that --max, --exempt or --deny give, if one does.
std::optional<quota::Override> parse_override(const Arguments& arguments) {
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
    return std::nullopt;
  }
  quota::validate_override(override);
  return override;
}

void validate_override_limit(const std::string& limit) {
  if (limit != quota::kEveryLimit) quota::validate_limit_name(limit);
}

// Every owner's row (of `limit` and '*' when given), by limit then owner.
std::vector<OwnerRow> owner_rows(quota::Engine& engine, std::optional<std::string_view> limit) {
  std::map<std::pair<std::string, std::string>, OwnerRow> rows;
  const auto row_of = [&](const std::string& limit_name, const std::string& owner) -> OwnerRow& {
    OwnerRow& row = rows[{limit_name, owner}];
    row.limit = limit_name;
    row.owner = owner;
    return row;
  };
  for (quota::Override& override : engine.overrides(limit)) {
    row_of(override.limit, override.owner).override = std::move(override);
  }
  for (const quota::Anchor& anchor : engine.anchors(limit)) {
    row_of(anchor.limit, anchor.owner).anchor_ms = anchor.anchor_ms;
  }
  std::vector<OwnerRow> ordered;
  for (auto& [key, row] : rows) ordered.push_back(std::move(row));
  return ordered;
}

// The offset at which each limit's anchors read best: a calendar limit's own; UTC for '*' and
// the other limits (absent here).
std::map<std::string, std::chrono::minutes> anchor_offsets(quota::Engine& engine) {
  std::map<std::string, std::chrono::minutes> offsets;
  for (const quota::Limit& limit : engine.list()) {
    if (limit.calendar) offsets[limit.name] = limit.utc_offset;
  }
  return offsets;
}

std::string where(const std::string& limit) {
  return limit == quota::kEveryLimit ? "every limit" : limit;
}

}  // namespace

std::string describe_override(const quota::Override& override) { return describe(override); }

int run_override_set(Session& session, const Arguments& arguments) {
  validate_override_limit(arguments.limit);
  quota::validate_owner(arguments.owner);
  const std::optional<quota::Override> override = parse_override(arguments);
  std::optional<std::int64_t> anchor_ms;
  if (arguments.anchor) anchor_ms = parse_instant(*arguments.anchor, "--anchor");
  if (!override && !anchor_ms) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "override set needs one of --max N, --exempt or --deny, or --anchor "
                       "INSTANT, or both");
  }

  quota::Engine engine = session.open_engine();
  std::optional<quota::Limit> limit;
  if (arguments.limit != quota::kEveryLimit) limit = existing_limit(engine, arguments.limit);
  // Refused before anything changes, so that with a policy neither is set (the engine refuses
  // too, but only when the override would already be set).
  if (anchor_ms && limit && !limit->calendar) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("limit '{}' counts per {}, not per calendar unit: an anchor "
                                   "needs a limit with --per day, week, month or year",
                                   limit->name, format_period(limit->period)));
  }
  if (override) engine.set_override(*override);
  if (anchor_ms) engine.set_anchor({arguments.limit, arguments.owner, *anchor_ms});

  if (session.json) {
    // The owner's whole row as it is now: with --anchor alone, its override (if any) too.
    OwnerRow now{arguments.limit, arguments.owner, std::nullopt, std::nullopt};
    for (OwnerRow& row : owner_rows(engine, arguments.limit)) {
      if (row.limit == arguments.limit && row.owner == arguments.owner) now = std::move(row);
    }
    session.emit(to_json(now));
    return 0;
  }
  const std::string owner = printable(arguments.owner, 64);
  if (override) {
    session.out << fmt::format("override for {} on {}: {}\n", owner, where(arguments.limit),
                               describe(*override));
  }
  if (anchor_ms) {
    const std::chrono::minutes offset = limit ? limit->utc_offset : std::chrono::minutes{0};
    session.out << fmt::format("anchor for {} on {}: {}", owner, where(arguments.limit),
                               format_local_time(*anchor_ms, offset));
    if (limit) {
      session.out << fmt::format(", its windows from {}",
                                 describe_window_start(*limit->calendar, offset, anchor_ms));
    }
    session.out << '\n';
  }
  return 0;
}

int run_override_rm(Session& session, const Arguments& arguments) {
  validate_override_limit(arguments.limit);
  quota::validate_owner(arguments.owner);
  quota::Engine engine = session.open_engine();
  if (arguments.limit != quota::kEveryLimit) existing_limit(engine, arguments.limit);
  const bool override = engine.remove_override(arguments.limit, arguments.owner);
  const bool anchor = engine.remove_anchor(arguments.limit, arguments.owner);
  if (!override && !anchor) {
    throw quota::Error(
        quota::ErrorCode::invalid_argument,
        fmt::format("no override for owner '{}' on '{}', nor an anchor: see `quotactl override "
                    "list {}`",
                    printable(arguments.owner, 64), arguments.limit,
                    arguments.limit == quota::kEveryLimit ? "'*'" : arguments.limit));
  }
  if (session.json) {
    session.emit({{"removed",
                   {{"limit", arguments.limit},
                    {"owner", arguments.owner},
                    {"override", override},
                    {"anchor", anchor}}}});
  } else {
    session.out << fmt::format("removed the {} for {} on {}\n",
                               override && anchor ? "override and the anchor"
                               : override         ? "override"
                                                  : "anchor",
                               printable(arguments.owner, 64), arguments.limit);
  }
  return 0;
}

int run_override_list(Session& session, const Arguments& arguments) {
  if (arguments.override_limit) validate_override_limit(*arguments.override_limit);
  quota::Engine engine = session.open_reader();
  std::optional<std::string_view> limit;
  if (arguments.override_limit) {
    if (*arguments.override_limit != quota::kEveryLimit) {
      existing_limit(engine, *arguments.override_limit);
    }
    limit = *arguments.override_limit;
  }
  const std::vector<OwnerRow> rows = owner_rows(engine, limit);
  if (session.json) {
    auto array = nlohmann::ordered_json::array();
    for (const OwnerRow& row : rows) array.push_back(to_json(row));
    session.emit(array);
    return 0;
  }
  if (rows.empty()) {
    session.out << "no overrides: set one with `quotactl override set NAME OWNER --max N` (or "
                   "--anchor INSTANT)\n";
    return 0;
  }
  // The ANCHOR column only when an owner has one: the instant at its limit's offset.
  const bool anchors =
      std::any_of(rows.begin(), rows.end(), [](const OwnerRow& row) { return row.anchor_ms; });
  std::vector<std::vector<std::string>> table{{"LIMIT", "OWNER", "POLICY"}};
  std::map<std::string, std::chrono::minutes> offsets;
  if (anchors) {
    table[0].push_back("ANCHOR");
    offsets = anchor_offsets(engine);
  }
  for (const OwnerRow& row : rows) {
    table.push_back(
        {row.limit, printable(row.owner, 40), row.override ? describe(*row.override) : "-"});
    if (anchors) {
      table.back().push_back(row.anchor_ms ? format_local_time(*row.anchor_ms, offsets[row.limit])
                                           : "-");
    }
  }
  session.out << format_table(table, {false, false, false, false});
  return 0;
}

}  // namespace quotactl
