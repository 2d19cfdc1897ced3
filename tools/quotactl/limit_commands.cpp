// limit set, get, list and rm.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

using quota::Algorithm;
using quota::Limit;

nlohmann::ordered_json to_json(const Limit& limit) {
  const nlohmann::ordered_json null = nullptr;
  // A calendar limit's period_ms is only the bound of its windows (quota::longest_window):
  // its windows are the calendar's, so it shows null there and the unit in `period`.
  return {
      {"name", limit.name},
      {"algorithm", quota::to_string(limit.algorithm)},
      {"maximum", limit.maximum},
      {"period_ms", limit.calendar ? null : nlohmann::ordered_json(limit.period.count())},
      {"period", limit.calendar ? nlohmann::ordered_json(quota::to_string(*limit.calendar)) : null},
      {"utc_offset",
       limit.calendar ? nlohmann::ordered_json(format_utc_offset(limit.utc_offset)) : null},
      {"anchor_ms", limit.anchor_ms ? nlohmann::ordered_json(*limit.anchor_ms) : null},
      {"burst",
       limit.burst ? nlohmann::ordered_json(*limit.burst) : nlohmann::ordered_json(nullptr)},
      {"shadow", limit.shadow},
      {"block_ms", limit.block ? nlohmann::ordered_json(limit.block->count())
                               : nlohmann::ordered_json(nullptr)}};
}

Algorithm parse_algorithm_option(const std::string& text) {
  const auto algorithm = quota::parse_algorithm(text);
  if (!algorithm) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("unknown algorithm '{}' for --algo: use sliding_log, "
                                   "fixed_window, sliding_window, token_bucket or concurrency",
                                   quota::bounded(text)));
  }
  return *algorithm;
}

// A limit whose numbers are too large for its algorithm's 64-bit arithmetic, refused in the
// command line's terms: its options, the period in the unit typed, and bounds to use instead,
// each accepted with the other options as given (quota::find_overflow).
void require_fits(const Limit& limit, const Arguments& arguments) {
  const std::optional<quota::LimitOverflow> overflow = quota::find_overflow(limit);
  if (!overflow) return;
  std::vector<std::string> fixes;
  if (overflow->largest_maximum && overflow->largest_burst) {
    fixes.push_back(fmt::format("--max {} and --burst {} or less", *overflow->largest_maximum,
                                *overflow->largest_burst));
  } else if (overflow->largest_maximum) {
    fixes.push_back(fmt::format("--max {} or less", *overflow->largest_maximum));
  } else if (overflow->largest_burst) {
    fixes.push_back(fmt::format("--burst {} or less", *overflow->largest_burst));
  }
  if (overflow->or_burst) {
    fixes.push_back(fmt::format("add --burst {} or less", *overflow->or_burst));
  }
  const std::string per = arguments.per.value_or(format_period(limit.period));
  fixes.push_back(
      fmt::format("--per {} or less", format_period_at_most(overflow->longest_period, per)));
  std::string advice = fixes.front();
  for (std::size_t i = 1; i < fixes.size(); ++i) advice += ", or " + fixes[i];
  throw quota::Error(
      quota::ErrorCode::invalid_argument,
      fmt::format("--max {}{} --per {} is too large for the 64-bit arithmetic of {} ({}); use {}",
                  limit.maximum, limit.burst ? fmt::format(" --burst {}", *limit.burst) : "", per,
                  quota::to_string(limit.algorithm), overflow->rule, advice));
}

// `--per WORD [--utc-offset ±HH:MM] [--anchor INSTANT]`: a calendar limit, fixed_window (the
// only algorithm that counts per calendar unit) unless --algo says otherwise, which is refused.
// Without --utc-offset the offset is +00:00 and without --anchor there is none: like --per,
// they are given whole each time, never kept from the existing limit.
Limit parse_calendar_limit(const Arguments& arguments, std::int64_t maximum,
                           quota::Calendar calendar, std::optional<Algorithm>& algorithm) {
  if (algorithm && *algorithm != Algorithm::fixed_window) {
    throw quota::Error(
        quota::ErrorCode::invalid_argument,
        fmt::format("calendar periods count only with fixed_window: --per {} takes --algo "
                    "fixed_window (its default), not --algo {}; for {} give --per a DURATION",
                    quota::to_string(calendar), quota::to_string(*algorithm),
                    quota::to_string(*algorithm)));
  }
  algorithm = Algorithm::fixed_window;
  const std::chrono::minutes offset = arguments.utc_offset
                                          ? parse_utc_offset(*arguments.utc_offset, "--utc-offset")
                                          : std::chrono::minutes{0};
  std::optional<std::int64_t> anchor;
  if (arguments.anchor) anchor = parse_instant(*arguments.anchor, "--anchor");
  return quota::calendar_limit(arguments.limit, maximum, calendar, offset, anchor);
}

// --utc-offset and --anchor place calendar windows; a DURATION's windows have neither.
void refuse_calendar_options(const Arguments& arguments) {
  for (const auto& [option, given] : {std::pair{"--utc-offset", arguments.utc_offset.has_value()},
                                      std::pair{"--anchor", arguments.anchor.has_value()}}) {
    if (!given) continue;
    throw quota::Error(
        quota::ErrorCode::invalid_argument,
        fmt::format("{} needs a calendar period: use --per day, week, month or year (--per {} is "
                    "a DURATION, whose windows follow one another from the Unix epoch)",
                    option, arguments.per.value()));
  }
}

// The limit as typed, checked as far as possible without the database: only the algorithm
// may still come from the existing limit.
// `--algo concurrency --ttl DURATION` (--ttl alone implies concurrency): a concurrency limit,
// which takes no --per, --burst or calendar; --block locks an owner out after a denial.
Limit parse_concurrency_limit(const Arguments& arguments, std::int64_t maximum) {
  for (const auto& [option, given] :
       {std::pair{"--per", arguments.per.has_value()}, std::pair{"--burst", arguments.burst.has_value()},
        std::pair{"--utc-offset", arguments.utc_offset.has_value()},
        std::pair{"--anchor", arguments.anchor.has_value()}}) {
    if (!given) continue;
    throw quota::Error(
        quota::ErrorCode::invalid_argument,
        fmt::format("a concurrency limit takes no {}: give --max N (units held at once) and "
                    "--ttl DURATION (how long a lease lives unless renewed)",
                    option));
  }
  if (!arguments.ttl) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "a concurrency limit needs --ttl DURATION: how long a lease lives unless "
                       "renewed, 1s to 1d");
  }
  Limit limit;
  limit.name = arguments.limit;
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = parse_duration(*arguments.ttl, "--ttl");
  if (arguments.block) limit.block = parse_duration(*arguments.block, "--block");
  quota::validate_limit(limit);
  return limit;
}

Limit parse_limit(const Arguments& arguments, std::optional<Algorithm>& algorithm) {
  quota::validate_limit_name(arguments.limit);
  const std::int64_t maximum =
      parse_whole(arguments.maximum.value(), "--max", 1, quota::kMaximumBound);
  if (arguments.algorithm) algorithm = parse_algorithm_option(*arguments.algorithm);
  if (arguments.ttl && algorithm && *algorithm != Algorithm::concurrency) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("--ttl is only for concurrency limits, not --algo {}: give "
                                   "{} a period with --per",
                                   quota::to_string(*algorithm), quota::to_string(*algorithm)));
  }
  if (arguments.ttl || (algorithm && *algorithm == Algorithm::concurrency)) {
    algorithm = Algorithm::concurrency;
    return parse_concurrency_limit(arguments, maximum);
  }
  if (!arguments.per) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "limit set needs --per DURATION|UNIT (or, for a concurrency limit, "
                       "--ttl DURATION)");
  }
  const Period period = parse_period(arguments.per.value(), "--per");
  Limit limit;
  if (period.calendar) {
    limit = parse_calendar_limit(arguments, maximum, *period.calendar, algorithm);
  } else {
    refuse_calendar_options(arguments);
    limit.name = arguments.limit;
    limit.maximum = maximum;
    limit.period = period.duration;
  }
  if (arguments.burst) {
    limit.burst = parse_whole(*arguments.burst, "--burst", 1, quota::kMaximumBound);
  }
  if (arguments.block) limit.block = parse_duration(*arguments.block, "--block");
  if (algorithm) {
    limit.algorithm = *algorithm;
    if (!limit.burst || limit.algorithm == Algorithm::token_bucket) {
      require_fits(limit, arguments);
    }
    quota::validate_limit(limit);
  } else {
    Limit without_burst = limit;
    without_burst.burst.reset();
    quota::validate_limit(without_burst);
  }
  return limit;
}

}  // namespace

nlohmann::ordered_json limit_json(const Limit& limit) { return to_json(limit); }

int run_limit_set(Session& session, const Arguments& arguments) {
  std::optional<Algorithm> algorithm;
  Limit limit = parse_limit(arguments, algorithm);

  quota::Engine engine = session.open_engine();
  const std::optional<Limit> before = engine.get(limit.name);
  if (!algorithm && before && before->algorithm == Algorithm::concurrency) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("limit {} is a concurrency limit: give it --ttl DURATION, not "
                                   "--per (or --algo ALGO --per DURATION to change its algorithm)",
                                   limit.name));
  }
  if (!algorithm) {
    limit.algorithm = before ? before->algorithm : Algorithm::sliding_log;
    if (!limit.burst || limit.algorithm == Algorithm::token_bucket) {
      require_fits(limit, arguments);
    }
  }
  // Shadow mode stays as it was unless --shadow or --enforce says otherwise.
  limit.shadow = arguments.shadow || (!arguments.enforce && before && before->shadow);
  // So does the block, unless --block or --no-block says otherwise.
  if (!arguments.block && !arguments.no_block && before) limit.block = before->block;
  engine.define(limit);
  const Limit after = engine.get(limit.name).value_or(limit);

  if (session.json) {
    session.emit(to_json(after));
    return 0;
  }
  if (!before) {
    session.out << fmt::format("created limit {}: {}\n", after.name, describe_limit(after));
  } else if (*before == after) {
    session.out << fmt::format("limit {} unchanged: {}\n", after.name, describe_limit(after));
  } else {
    session.out << fmt::format("updated limit {}: {}, was {}{}\n", after.name,
                               describe_limit(after), describe_limit(*before),
                               before->algorithm != after.algorithm
                                   ? "; the algorithm changed, so its state was discarded"
                                   : "");
  }
  return 0;
}

int run_limit_get(Session& session, const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  quota::Engine engine = session.open_reader();
  const std::optional<Limit> limit = engine.get(arguments.limit);
  if (!limit) throw unknown_limit(engine, arguments.limit);
  if (session.json) {
    session.emit(to_json(*limit));
  } else {
    session.out << fmt::format("{}: {}\n", limit->name, describe_limit(*limit));
  }
  return 0;
}

int run_limit_list(Session& session, const Arguments&) {
  quota::Engine engine = session.open_reader();
  const std::vector<Limit> limits = engine.list();
  if (session.json) {
    auto array = nlohmann::ordered_json::array();
    for (const Limit& limit : limits) array.push_back(to_json(limit));
    session.emit(array);
    return 0;
  }
  if (limits.empty()) {
    session.out << "no limits yet: define one with `quotactl limit set NAME --max N --per "
                   "DURATION`\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"NAME", "ALGORITHM", "MAXIMUM", "PER", "BURST", "BLOCK", "MODE"}};
  // The STARTS column only when a limit counts per calendar unit.
  const bool calendar = std::any_of(limits.begin(), limits.end(),
                                    [](const Limit& limit) { return limit.calendar.has_value(); });
  if (calendar) rows[0].push_back("STARTS");
  for (const Limit& limit : limits) {
    rows.push_back(
        {limit.name, std::string(quota::to_string(limit.algorithm)), std::to_string(limit.maximum),
         format_limit_period(limit), limit.burst ? std::to_string(*limit.burst) : "-",
         limit.block ? format_period(*limit.block) : "-", limit.shadow ? "shadow" : "enforce"});
    if (calendar) {
      rows.back().push_back(
          limit.calendar ? describe_window_start(*limit.calendar, limit.utc_offset, limit.anchor_ms)
                         : "-");
    }
  }
  session.out << format_table(rows, {false, false, true, false, true, false, false, false});
  return 0;
}

int run_limit_rm(Session& session, const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  quota::Engine engine = session.open_engine();
  if (!engine.remove(arguments.limit)) throw unknown_limit(engine, arguments.limit);
  if (session.json) {
    session.emit({{"removed", arguments.limit}});
  } else {
    session.out << fmt::format("removed limit {} and its state\n", arguments.limit);
  }
  return 0;
}

}  // namespace quotactl
