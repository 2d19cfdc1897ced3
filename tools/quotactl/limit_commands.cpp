// limit set, get, list and rm.
#include <fmt/format.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

using quota::Algorithm;
using quota::Limit;

nlohmann::ordered_json to_json(const Limit& limit) {
  return {{"name", limit.name},
          {"algorithm", quota::to_string(limit.algorithm)},
          {"maximum", limit.maximum},
          {"period_ms", limit.period.count()},
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
                                   "fixed_window, sliding_window or token_bucket",
                                   text));
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

// The limit as typed, checked as far as possible without the database: only the algorithm
// may still come from the existing limit.
Limit parse_limit(const Arguments& arguments, std::optional<Algorithm>& algorithm) {
  quota::validate_limit_name(arguments.limit);
  Limit limit;
  limit.name = arguments.limit;
  limit.maximum = parse_whole(arguments.maximum.value(), "--max", 1, quota::kMaximumBound);
  limit.period = parse_duration(arguments.per.value(), "--per");
  if (arguments.algorithm) algorithm = parse_algorithm_option(*arguments.algorithm);
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

int run_limit_set(Session& session, const Arguments& arguments) {
  std::optional<Algorithm> algorithm;
  Limit limit = parse_limit(arguments, algorithm);

  quota::Engine engine = session.open_engine();
  const std::optional<Limit> before = engine.get(limit.name);
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
  quota::Engine engine = session.open_engine();
  const std::optional<Limit> limit = engine.get(arguments.limit);
  if (!limit) throw unknown_limit(arguments.limit);
  if (session.json) {
    session.emit(to_json(*limit));
  } else {
    session.out << fmt::format("{}: {}\n", limit->name, describe_limit(*limit));
  }
  return 0;
}

int run_limit_list(Session& session, const Arguments&) {
  quota::Engine engine = session.open_engine();
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
  for (const Limit& limit : limits) {
    rows.push_back(
        {limit.name, std::string(quota::to_string(limit.algorithm)), std::to_string(limit.maximum),
         format_period(limit.period), limit.burst ? std::to_string(*limit.burst) : "-",
         limit.block ? format_period(*limit.block) : "-", limit.shadow ? "shadow" : "enforce"});
  }
  session.out << format_table(rows, {false, false, true, false, true, false, false});
  return 0;
}

int run_limit_rm(Session& session, const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  quota::Engine engine = session.open_engine();
  if (!engine.remove(arguments.limit)) throw unknown_limit(arguments.limit);
  if (session.json) {
    session.emit({{"removed", arguments.limit}});
  } else {
    session.out << fmt::format("removed limit {} and its state\n", arguments.limit);
  }
  return 0;
}

}  // namespace quotactl
