// consume, check, record, reset, usage and sql: the operations (docs/concepts.md) and their SQL.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <ostream>
#include <stdexcept>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

// The operation a command performs.
enum class Operation { check, consume, record, reset, refund };

struct Request {
  std::string limit;
  std::string owner;
  std::int64_t cost = 1;
  std::optional<std::string> key;  // --key: an idempotency key
};

Request parse_request(const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  quota::validate_owner(arguments.owner);
  Request request{arguments.limit, arguments.owner, 1, std::nullopt};
  if (arguments.cost) {
    request.cost = parse_whole(*arguments.cost, "--cost", 1, quota::kMaximumBound);
    quota::validate_cost(request.cost);
  }
  if (arguments.key) {
    quota::validate_idempotency_key(*arguments.key);
    request.key = arguments.key;
  }
  return request;
}

quota::Result perform(quota::Engine& engine, Operation operation, const Request& request) {
  switch (operation) {
    case Operation::check:
      return engine.check(request.limit, request.owner, request.cost);
    case Operation::consume:
      return request.key ? engine.consume(request.limit, request.owner, request.cost, *request.key)
                         : engine.consume(request.limit, request.owner, request.cost);
    case Operation::record:
      return request.key ? engine.record(request.limit, request.owner, request.cost, *request.key)
                         : engine.record(request.limit, request.owner, request.cost);
    case Operation::reset:
      return engine.reset(request.limit, request.owner);
    case Operation::refund:
      return engine.refund(request.limit, request.owner, request.cost);
  }
  throw std::logic_error("unknown operation");
}

// A request made with --key also says whether it was answered from the key ("replayed").
nlohmann::ordered_json to_json(const Request& request, const quota::Result& result) {
  nlohmann::ordered_json document = {{"limit", request.limit},
          {"owner", request.owner},
          {"allowed", result.allowed},
          {"reason", quota::to_string(result.reason)},
          {"remaining", result.remaining},
          {"retry_after_ms", result.retry_after_ms},
          {"reset_at_ms", result.reset_at_ms},
          {"denied", result.denied},
          {"shadow_denied", result.shadow_denied}};
  if (request.key) document["replayed"] = result.replayed;
  return document;
}

// What the human line shows of the limit beside the result; each is absent when the limit is
// gone (a refund or reset of a limit removed meanwhile).
struct Shown {
  // The capacity the owner's answers are out of: its override's, if it has one.
  std::optional<std::int64_t> capacity;
  // A calendar limit's offset: its times are shown at that offset, as its windows are cut.
  std::optional<std::chrono::minutes> calendar_offset;
};

// An instant of the human line: ISO-8601 UTC, or at a calendar limit's offset.
std::string instant(std::int64_t unix_ms, const Shown& shown) {
  return shown.calendar_offset ? format_local_time(unix_ms, *shown.calendar_offset)
                               : format_time(unix_ms);
}

// The first word of the human line, padded so that the lines of a burst align.
std::string verdict(const Session& session, Operation operation, const quota::Result& result) {
  if (operation == Operation::reset) return "reset   ";
  if (operation == Operation::refund) return "refunded";
  if (operation == Operation::record) {
    return result.allowed ? session.paint("recorded", Colour::green)
                          : session.paint("over    ", Colour::red);
  }
  return result.allowed ? session.paint("allowed ", Colour::green)
                        : session.paint("denied  ", Colour::red);
}

// e.g. "allowed  send/u1: 9 of 10 left, resets in 59.9s"
//      "denied   send/u1: 0 of 10 left, retry in 1.234s (at 2023-11-14T22:14:20.000Z)"
//      "allowed  plan/u1: 99 of 100 left, resets on 2026-12-01 00:00 +09:00" (calendar)
std::string human_line(const Session& session, Operation operation, const Request& request,
                       const quota::Result& result, const Shown& shown) {
  const std::optional<std::int64_t>& capacity = shown.capacity;
  std::string line = fmt::format("{} {}/{}: ", verdict(session, operation, result), request.limit,
                                 printable(request.owner, 64));
  if (result.reason == quota::Reason::cost_exceeds_capacity) {
    line += fmt::format("a cost of {} is more than the capacity", request.cost);
    if (capacity) line += fmt::format(" of {}", *capacity);
    line += operation == Operation::record ? ": recorded, but a consume of it can never succeed"
                                           : ": it can never be allowed";
    return line;
  }
  line += capacity ? fmt::format("{} of {} left", result.remaining, *capacity)
                   : fmt::format("{} left", result.remaining);
  if (result.shadow_denied) {
    line += fmt::format(" (shadow mode: enforcing would deny, {}", quota::to_string(result.reason));
    if (result.retry_after_ms > 0) line += ", retry in " + format_duration(result.retry_after_ms);
    return line + ")";
  }
  if (result.allowed) {
    line += result.reset_at_ms <= session.now ? ", nothing in use"
            : shown.calendar_offset
                ? ", resets on " + instant(result.reset_at_ms, shown)
                : ", resets in " + format_duration(result.reset_at_ms - session.now);
    return line;
  }
  if (result.reason != quota::Reason::rate_limited) {
    line += fmt::format(" ({})", quota::to_string(result.reason));
  }
  if (result.retry_after_ms < 0) return line + ", never allowed";
  line += fmt::format(
      ", {} in {} (at {})", operation == Operation::record ? "a consume is allowed again" : "retry",
      format_duration(result.retry_after_ms), instant(session.now + result.retry_after_ms, shown));
  if (operation == Operation::consume && result.denied > 0) {
    line += fmt::format(", {} denied so far", result.denied);
  }
  return line;
}

// What the human line shows of the request's limit, read after the operation.
Shown shown_of(quota::Engine& engine, const Request& request) {
  Shown shown;
  try {
    shown.capacity = engine.owner_usage(request.limit, request.owner).capacity;
  } catch (const quota::Error& error) {
    if (error.code() != quota::ErrorCode::unknown_limit) throw;
    return shown;
  }
  const std::optional<quota::Limit> limit = engine.get(request.limit);
  if (limit && limit->calendar) shown.calendar_offset = limit->utc_offset;
  return shown;
}

// The line under a consume's that names a lease it took, and how to free it.
std::string lease_line(const Session& session, const quota::LeaseGrant& lease) {
  return fmt::format("  lease {} on {} until {} (in {}): `quotactl lease release {}` frees it\n",
                     lease.lease, lease.limit, format_time(lease.expires_at_ms),
                     format_duration(lease.expires_at_ms - session.now), lease.lease);
}

// One limit of `consume a,b=5`: its name and, after '=', a cost of its own.
struct NamedCost {
  std::string limit;
  std::optional<std::int64_t> cost;  // none: --cost
};

// The limits of `consume a,b=5` (and check's): each a valid name with a valid cost, if any,
// none twice; checked here, before the database is opened.
std::vector<NamedCost> split_limits(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (std::size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1) {
    items.push_back(text.substr(start, comma - start));
  }
  items.push_back(text.substr(start));
  std::vector<NamedCost> limits;
  for (const std::string& item : items) {
    const std::size_t equals = item.find('=');
    NamedCost named{item.substr(0, equals), std::nullopt};
    quota::validate_limit_name(named.limit);
    if (equals != std::string::npos) {
      const std::string cost = item.substr(equals + 1);
      if (cost.empty()) {
        throw quota::Error(quota::ErrorCode::invalid_argument,
                           fmt::format("'{}' has no cost after '=': write {}=COST (a whole "
                                       "number from 1 to {}), or drop the '=' for --cost",
                                       quota::bounded(item), named.limit, quota::kMaximumBound));
      }
      if (cost.find('=') != std::string::npos) {
        throw quota::Error(quota::ErrorCode::invalid_argument,
                           fmt::format("'{}' has more than one '=': write {}=COST once",
                                       quota::bounded(item), named.limit));
      }
      named.cost = parse_whole(cost, fmt::format("cost of limit '{}'", named.limit), 1,
                               quota::kMaximumBound);
    }
    for (const NamedCost& earlier : limits) {
      if (earlier.limit == named.limit) {
        throw quota::Error(quota::ErrorCode::invalid_argument,
                           fmt::format("limit '{}' is named twice in '{}': name each limit once",
                                       named.limit, quota::bounded(text)));
      }
    }
    limits.push_back(std::move(named));
  }
  return limits;
}

// Whether NAME is several limits or carries a cost of its own: the path of consume_all.
bool several(const std::string& name) {
  return name.find_first_of(",=") != std::string::npos;
}

std::optional<std::chrono::milliseconds> parse_wait(const Session& session,
                                                    const Arguments& arguments);

// consume a,b OWNER (and check a,b OWNER): every limit at once; the line and JSON name the
// deciding limit. With --wait, all or nothing too: it waits for the slowest limit
// (Engine::acquire_all).
int consume_all(Session& session, const Arguments& arguments, Operation operation) {
  const std::vector<NamedCost> limits = split_limits(arguments.limit);
  Arguments first = arguments;
  first.limit = limits.front().limit;
  Request request = parse_request(first);
  const std::optional<std::chrono::milliseconds> wait = parse_wait(session, arguments);
  quota::Engine engine = wait                           ? session.open_engine(quota::system_clock_ms)
                         : operation == Operation::check ? session.open_reader()
                                                         : session.open_engine();
  std::vector<quota::Charge> charges;
  std::vector<std::string> names;
  for (const NamedCost& named : limits) {
    charges.push_back({named.limit, request.owner, named.cost});
    names.push_back(named.limit);
  }
  const quota::Decision decision =
      operation == Operation::check ? engine.check_all(charges, request.cost)
      : wait                        ? engine.acquire_all(charges, request.cost, *wait)
      : request.key                 ? engine.consume_all(charges, request.cost, *request.key)
                                    : engine.consume_all(charges, request.cost);
  // The human line's times are from the moment the answer came.
  if (wait) session.now = engine.now();
  request.limit = decision.limit;
  // The deciding limit's cost, as its line tells it.
  for (const NamedCost& named : limits) {
    if (named.limit == decision.limit && named.cost) request.cost = *named.cost;
  }
  const int status = decision.result.allowed ? 0 : 1;
  if (session.json) {
    nlohmann::ordered_json document = to_json(request, decision.result);
    document["limits"] = names;
    if (operation == Operation::check) {
      session.emit(document);
      return status;
    }
    // The leases its concurrency limits took (none when denied).
    nlohmann::ordered_json leases = nlohmann::ordered_json::array();
    for (const quota::LeaseGrant& lease : decision.leases) {
      leases.push_back({{"limit", lease.limit},
                        {"owner", lease.owner},
                        {"lease", lease.lease},
                        {"expires_at_ms", lease.expires_at_ms}});
    }
    document["leases"] = std::move(leases);
    session.emit(document);
    return status;
  }
  session.out << human_line(session, operation, request, decision.result,
                            shown_of(engine, request))
              << fmt::format(" [decided by {} of {} limits]", decision.limit, limits.size())
              << replayed_note(decision.result) << '\n';
  for (const quota::LeaseGrant& lease : decision.leases) session.out << lease_line(session, lease);
  return status;
}

// consume --wait: how long it may wait, checked before the database is opened.
std::optional<std::chrono::milliseconds> parse_wait(const Session& session,
                                                    const Arguments& arguments) {
  if (!arguments.wait) return std::nullopt;
  const std::chrono::milliseconds wait = parse_duration(*arguments.wait, "--wait");
  if (session.fixed_now) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "--wait cannot wait on the fixed clock of --now: drop one of them");
  }
  return wait;
}

// A consume's answer and the lease it took (a concurrency limit's; none: empty): every path
// that takes a lease answers with it, since a lease nobody can name only waits out its TTL.
quota::LeaseResult consume_leasing(quota::Engine& engine, const Request& request,
                                   std::optional<std::chrono::milliseconds> wait) {
  if (wait) {
    // acquire's own path, whose Decision names the lease.
    const std::vector<std::string_view> names{request.limit};
    quota::Decision decision = engine.acquire_all(names, request.owner, request.cost, *wait);
    quota::LeaseResult answer;
    static_cast<quota::Result&>(answer) = decision.result;
    if (!decision.leases.empty()) {
      answer.lease = std::move(decision.leases.front().lease);
      answer.expires_at_ms = decision.leases.front().expires_at_ms;
    }
    return answer;
  }
  return request.key
             ? engine.consume_with_lease(request.limit, request.owner, request.cost, *request.key)
             : engine.consume_with_lease(request.limit, request.owner, request.cost);
}

int operate(Session& session, const Arguments& arguments, Operation operation) {
  const Request request = parse_request(arguments);
  const std::optional<std::chrono::milliseconds> wait = parse_wait(session, arguments);
  quota::Engine engine = wait ? session.open_engine(quota::system_clock_ms)
                         : operation == Operation::check ? session.open_reader()
                                                         : session.open_engine();
  quota::LeaseResult answer;
  if (operation == Operation::consume) {
    answer = consume_leasing(engine, request, wait);
  } else if (operation == Operation::record) {
    // record takes a lease on a concurrency limit even over the capacity: name it too.
    answer = request.key ? engine.record_with_lease(request.limit, request.owner, request.cost,
                                                    *request.key)
                         : engine.record_with_lease(request.limit, request.owner, request.cost);
  } else {
    static_cast<quota::Result&>(answer) = perform(engine, operation, request);
  }
  const quota::Result& result = answer;
  // The human line's times are from the moment the answer came.
  if (wait) session.now = engine.now();
  const int status = result.allowed || operation == Operation::refund ? 0 : 1;
  if (session.json) {
    nlohmann::ordered_json document = to_json(request, result);
    if (!answer.lease.empty()) {
      document["lease"] = answer.lease;
      document["expires_at_ms"] = answer.expires_at_ms;
    }
    session.emit(document);
    return status;
  }
  session.out << human_line(session, operation, request, result, shown_of(engine, request))
              << replayed_note(result) << '\n';
  if (!answer.lease.empty()) {
    session.out << lease_line(session,
                              {request.limit, request.owner, answer.lease, answer.expires_at_ms});
  }
  return status;
}

// usage --by: which owners come first.
quota::UsageOrder parse_order(const std::string& text) {
  static const std::vector<std::pair<std::string, quota::UsageOrder>> kOrders{
      {"used", quota::UsageOrder::used},
      {"denied", quota::UsageOrder::denied},
      {"shadow_denied", quota::UsageOrder::shadow_denied},
      {"blocked", quota::UsageOrder::blocked}};
  std::vector<std::string> names;
  for (const auto& [name, order] : kOrders) {
    if (text == name) return order;
    names.push_back(name);
  }
  throw quota::Error(quota::ErrorCode::invalid_argument,
                     fmt::format("unknown order '{}' for --by{}: use used, denied, "
                                 "shadow_denied or blocked",
                                 quota::bounded(text), did_you_mean(text, names)));
}

}  // namespace

int run_consume(Session& session, const Arguments& arguments) {
  if (several(arguments.limit)) return consume_all(session, arguments, Operation::consume);
  return operate(session, arguments, Operation::consume);
}
int run_check(Session& session, const Arguments& arguments) {
  if (several(arguments.limit)) return consume_all(session, arguments, Operation::check);
  return operate(session, arguments, Operation::check);
}
int run_record(Session& session, const Arguments& arguments) {
  return operate(session, arguments, Operation::record);
}
int run_reset(Session& session, const Arguments& arguments) {
  if (arguments.limit != quota::kEveryLimit) return operate(session, arguments, Operation::reset);
  // reset '*' OWNER: the owner forgotten on every limit, each limit where it had state named.
  quota::validate_owner(arguments.owner);
  quota::Engine engine = session.open_engine();
  const std::vector<std::string> limits = engine.reset_everywhere(arguments.owner);
  if (session.json) {
    session.emit({{"owner", arguments.owner}, {"reset", limits}});
    return 0;
  }
  if (limits.empty()) {
    session.out << fmt::format("nothing to reset: {} has no state on any limit\n",
                               printable(arguments.owner, 64));
    return 0;
  }
  std::string names;
  for (const std::string& name : limits) names += (names.empty() ? "" : ", ") + name;
  session.out << fmt::format("reset {} on {} limit{}: {}\n", printable(arguments.owner, 64),
                             limits.size(), limits.size() == 1 ? "" : "s", names);
  return 0;
}
int run_refund(Session& session, const Arguments& arguments) {
  return operate(session, arguments, Operation::refund);
}

namespace {

nlohmann::ordered_json optional_time(const std::optional<std::int64_t>& time) {
  return time ? nlohmann::ordered_json(*time) : nlohmann::ordered_json(nullptr);
}

// When a row's usage resets: "59.9s" from now, or a calendar limit's next window start at its
// offset, "2026-12-01 00:00 +09:00"; "-" when nothing is in use.
std::string resets(const quota::Usage& row, std::int64_t now,
                   std::optional<std::chrono::minutes> calendar_offset) {
  if (row.reset_at_ms <= now) return "-";
  return calendar_offset ? format_local_time(row.reset_at_ms, *calendar_offset)
                         : format_duration(row.reset_at_ms - now);
}

// "12.5s" while the owner is locked out, else "-".
std::string blocked_for(const quota::Usage& row, std::int64_t now) {
  return row.blocked_until_ms && *row.blocked_until_ms > now
             ? format_duration(*row.blocked_until_ms - now)
             : "-";
}

// usage --owner OWNER without NAME: the owner on every limit where it has state or an
// override.
int owner_on_every_limit(Session& session, const Arguments& arguments) {
  const std::string& owner = *arguments.owner_filter;
  quota::validate_owner(owner);
  if (arguments.top || arguments.by) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "--top and --by order the owners of one limit: give the limit's NAME");
  }
  quota::Engine engine = session.open_reader();
  const std::vector<quota::Usage> rows = engine.owner_usage(owner);
  if (session.json) {
    session.emit(usage_json(rows, /*with_limit=*/true));
    return 0;
  }
  session.out << fmt::format("{} at {}\n", printable(owner, 64), format_time(session.now));
  if (rows.empty()) {
    session.out << "no state and no override on any limit for that owner\n";
    return 0;
  }
  // Calendar limits reset on a date, the others in a while: with any, each cell says which.
  std::map<std::string, std::chrono::minutes> calendar_offsets;
  for (const quota::Limit& limit : engine.list()) {
    if (limit.calendar) calendar_offsets[limit.name] = limit.utc_offset;
  }
  const bool any_calendar = std::any_of(rows.begin(), rows.end(), [&](const quota::Usage& row) {
    return calendar_offsets.contains(row.limit);
  });
  std::vector<std::vector<std::string>> table{
      {"LIMIT", "USAGE", "USED", "DENIED", "BLOCKED FOR", any_calendar ? "RESETS" : "RESETS IN"}};
  for (const quota::Usage& row : rows) {
    const auto found = calendar_offsets.find(row.limit);
    const bool calendar = found != calendar_offsets.end();
    std::string reset =
        resets(row, session.now, calendar ? std::optional{found->second} : std::nullopt);
    if (any_calendar && reset != "-") reset = (calendar ? "on " : "in ") + reset;
    table.push_back({row.limit, bar(row.used, row.capacity),
                     fmt::format("{}/{}", row.used, row.capacity), std::to_string(row.denied),
                     blocked_for(row, session.now), reset});
  }
  session.out << format_table(table, {false, false, true, true, false, false});
  return 0;
}

}  // namespace

int run_usage(Session& session, const Arguments& arguments) {
  if (arguments.limit.empty()) {
    if (!arguments.owner_filter) {
      throw quota::Error(quota::ErrorCode::invalid_argument,
                         "usage needs a limit NAME, or --owner OWNER to show that owner on "
                         "every limit");
    }
    return owner_on_every_limit(session, arguments);
  }
  quota::validate_limit_name(arguments.limit);
  if (arguments.owner_filter) quota::validate_owner(*arguments.owner_filter);
  const std::size_t top =
      arguments.top ? static_cast<std::size_t>(parse_whole(*arguments.top, "--top", 1, 1'000'000))
                    : 0;
  const quota::UsageOrder order =
      arguments.by ? parse_order(*arguments.by) : quota::UsageOrder::used;

  quota::Engine engine = session.open_reader();
  const quota::Limit limit = existing_limit(engine, arguments.limit);
  std::vector<quota::Usage> rows =
      engine.usage(arguments.limit, arguments.owner_filter ? 0 : top, order);
  if (arguments.owner_filter) {
    std::erase_if(rows,
                  [&](const quota::Usage& row) { return row.owner != *arguments.owner_filter; });
  }

  if (session.json) {
    session.emit(usage_json(rows));
    return 0;
  }
  session.out << usage_text(session, limit, rows, session.now,
                            arguments.owner_filter ? "no usage and no denials for that owner"
                            : order == quota::UsageOrder::blocked
                                ? "no owner is locked out now"
                                : "no owner has usage or denials");
  return 0;
}

nlohmann::ordered_json usage_json(const std::vector<quota::Usage>& rows, bool with_limit) {
  auto array = nlohmann::ordered_json::array();
  for (const quota::Usage& row : rows) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    if (with_limit) object["limit"] = row.limit;  // first, as usage --owner shows it
    object.update({{"owner", row.owner},
                   {"used", row.used},
                   {"remaining", row.remaining},
                   {"denied", row.denied},
                   {"reset_at_ms", row.reset_at_ms},
                   {"shadow_denied", row.shadow_denied},
                   {"capacity", row.capacity},
                   {"blocked_until_ms", optional_time(row.blocked_until_ms)}});
    array.push_back(std::move(object));
  }
  return array;
}

std::string usage_text(const Session& session, const quota::Limit& limit,
                       const std::vector<quota::Usage>& rows, std::int64_t now,
                       std::string_view if_empty) {
  std::string text =
      fmt::format("{}: {}, at {}\n", limit.name, describe_limit(limit), format_time(now));
  if (rows.empty()) return text + std::string(if_empty) + "\n";
  // The SHADOW DENIED column only where there is something to show.
  const bool shadow = limit.shadow || std::any_of(rows.begin(), rows.end(), [](const auto& row) {
                        return row.shadow_denied > 0;
                      });
  std::vector<std::vector<std::string>> table{{"OWNER", "USAGE", "USED", "DENIED"}};
  if (shadow) table[0].push_back("SHADOW DENIED");
  // The BLOCKED FOR column only for a limit that blocks.
  const bool blocking = limit.block.has_value();
  if (blocking) table[0].push_back("BLOCKED FOR");
  // A calendar limit resets on a date (at its offset), the others in a while.
  const std::optional<std::chrono::minutes> calendar_offset =
      limit.calendar ? std::optional{limit.utc_offset} : std::nullopt;
  table[0].push_back(calendar_offset ? "RESETS ON" : "RESETS IN");
  for (const quota::Usage& row : rows) {
    // Out of the owner's own capacity: its override's, if it has one.
    table.push_back({printable(row.owner, 40), bar(row.used, row.capacity),
                     fmt::format("{}/{}", row.used, row.capacity), std::to_string(row.denied)});
    if (shadow) table.back().push_back(std::to_string(row.shadow_denied));
    if (blocking) table.back().push_back(blocked_for(row, now));
    table.back().push_back(resets(row, now, calendar_offset));
  }
  std::vector<bool> right_aligned{false, false, true, true};
  if (shadow) right_aligned.push_back(true);
  if (blocking) right_aligned.push_back(false);
  right_aligned.push_back(false);
  std::string lines = format_table(table, right_aligned);
  if (session.use_colour) {
    // The bars in colour: green, yellow from 80 % used, red when nothing is left.
    std::size_t at = lines.find('\n') + 1;  // below the header
    for (const quota::Usage& row : rows) {
      const std::string drawn = bar(row.used, row.capacity);
      const std::size_t found = lines.find(drawn, at);
      if (found == std::string::npos) break;
      const Colour colour = row.remaining == 0                 ? Colour::red
                            : row.used * 5 >= row.capacity * 4 ? Colour::yellow
                                                               : Colour::green;
      const std::string painted = session.paint(drawn, colour);
      lines.replace(found, drawn.size(), painted);
      at = lines.find('\n', found + painted.size()) + 1;
    }
  }
  return text + lines;
}

namespace {

// `text` when it names an operation that has a statement.
const std::string& parse_operation(const std::string& text) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = quota::admin::statement_operations();
    for (std::string& name : quota::admin::lease_operations()) all.push_back(std::move(name));
    return all;
  }();
  for (const std::string& name : names) {
    if (text == name) return name;
  }
  throw quota::Error(quota::ErrorCode::invalid_argument,
                     fmt::format("unknown operation '{}'{}: use consume, check, record, reset or "
                                 "refund, or acquire, renew or release for leases",
                                 quota::bounded(text), did_you_mean(text, names)));
}

// renew's and release's parameters, in order (acquire's are every request statement's).
std::vector<std::string> lease_parameters(const std::string& operation) {
  if (operation == "renew") return {"lease", "ttl", "now"};
  return {"lease", "now"};
}

// How to run renew or release in the sqlite3 shell or psql, as SQL comments.
std::string lease_instructions(const std::string& operation, bool server) {
  const bool renew = operation == "renew";
  if (server) {
    return fmt::format(
        "-- The statement quota runs to {0} a lease, in PostgreSQL's dialect, with the\n"
        "-- parameters $1 lease (text){1}, ${2} now (bigint, Unix ms, NULL for the server's\n"
        "-- current time). It returns one row when the lease was found{3}.\n"
        "PREPARE quota_{0}(text{4}, bigint) AS\n",
        operation, renew ? ", $2 ttl (bigint ms, NULL for the limit's TTL)" : "",
        renew ? 3 : 2,
        renew ? " unexpired (and renewed), none when it is not held (lease_expired)"
              : " (held: 1 if it was unexpired), none when there was nothing to release",
        renew ? ", bigint" : "");
  }
  return fmt::format(
      "-- The statement quota runs to {0} a lease. To run it in the sqlite3 shell, bind its\n"
      "-- parameters first:\n"
      "--   .parameter init\n"
      "--   .parameter set :lease 'the id that acquire returned'\n"
      "{1}"
      "--   .parameter set :now NULL\n"
      "-- :now is Unix ms, NULL for the database's current time. It returns one row when the\n"
      "-- lease was found{2}.\n",
      operation, renew ? "--   .parameter set :ttl NULL\n-- :ttl is ms (1000 to 86400000), NULL for the limit's TTL.\n" : "",
      renew ? " unexpired (and renewed), none when it is not held (lease_expired)"
            : " (held: 1 if it was unexpired), none when there was nothing to release");
}

// How to run the statement in the sqlite3 shell, as SQL comments.
std::string shell_instructions(const std::string& operation, quota::Algorithm algorithm,
                               const std::optional<std::string>& limit) {
  std::string text = fmt::format(
      "-- The statement quota runs for {} on {} limits. To run it in the sqlite3 shell,\n"
      "-- bind its parameters first:\n"
      "--   .parameter init\n"
      "--   .parameter set :limit '{}'\n"
      "--   .parameter set :owner 'u1'\n",
      operation, quota::to_string(algorithm), limit.value_or("send"));
  if (operation != "reset") text += "--   .parameter set :cost 1\n";
  text +=
      "--   .parameter set :now NULL\n"
      "-- :cost NULL means 1; :now is Unix ms, NULL for the database's current time.\n"
      "-- Both are whole numbers (a REAL such as 5.0 is taken as 5); the statement fails on\n"
      "-- anything else, and on a cost below 1 or a negative time.\n";
  return text;
}

// The statement wrapped for psql: PREPARE, so that psql runs the text as is, and how to
// EXECUTE it, as an SQL comment.
std::string psql_text(const std::string& name, quota::Algorithm algorithm,
                      const std::optional<std::string>& limit, const std::string& statement) {
  return fmt::format(
      "-- The statement quota runs for {0} on {1} limits, in PostgreSQL's dialect. psql runs\n"
      "-- this text as is: it prepares the statement as quota_{0} in the session, with the\n"
      "-- parameters $1 limit (text), $2 owner (text), $3 cost (bigint, NULL means 1) and\n"
      "-- $4 now (bigint, Unix ms, NULL for the server's current time). Run it then with\n"
      "-- EXECUTE, as below; DEALLOCATE quota_{0} before preparing it again in the session.\n"
      "-- Cost and time must be whole numbers; the statement fails on a cost below 1 or a\n"
      "-- negative time.\n"
      "PREPARE quota_{0}(text, text, bigint, bigint) AS\n"
      "{2};\n"
      "-- EXECUTE quota_{0}('{3}', 'u1', NULL, NULL);\n",
      name, quota::to_string(algorithm), statement, limit.value_or("send"));
}

// The keyed protocol as text to read and run: each statement after what it takes and what to
// do with its answer, in one transaction.
std::string keyed_text(const std::string& operation, quota::Algorithm algorithm,
                       quota::admin::Dialect dialect,
                       const std::vector<quota::admin::KeyedStep>& steps) {
  const bool server = dialect == quota::admin::Dialect::postgresql;
  std::string text = fmt::format(
      "-- The statements quota runs for {} on {} limits with an idempotency key, in {}'s\n"
      "-- dialect (docs/sql.md, \"Idempotency keys\"): in this order, in one transaction.\n"
      "-- now is Unix ms (the request's time: give the same number to every statement).\n",
      operation, quota::to_string(algorithm), server ? "PostgreSQL" : "SQLite");
  text += server ? "BEGIN;\n"
                 : "-- Bind each statement's parameters before it (.parameter set ?1 'send', "
                   "...).\nBEGIN IMMEDIATE;\n";
  int number = 0;
  for (const quota::admin::KeyedStep& step : steps) {
    ++number;
    std::string parameters;
    for (std::size_t i = 0; i < step.parameters.size(); ++i) {
      const bool named = step.name == "request" && !server;
      parameters += (i ? ", " : "") +
                    (named ? ":" + step.parameters[i]
                           : fmt::format("{}{}", server ? "$" : "?", i + 1) + " " +
                                 step.parameters[i]);
    }
    text += fmt::format("\n-- {}. {} ({})\n-- then: {}.\n", number, step.name, parameters,
                        step.then);
    text += server ? fmt::format("PREPARE quota_{} AS\n{};\n", step.name, step.sql)
                   : step.sql + ";\n";
  }
  text += "COMMIT;\n";
  return text;
}

}  // namespace

int run_sql(Session& session, const Arguments& arguments) {
  const std::string& operation = parse_operation(arguments.operation);
  const bool lease_operation = operation == "acquire" || operation == "renew" ||
                               operation == "release";
  quota::Algorithm algorithm =
      lease_operation ? quota::Algorithm::concurrency : quota::Algorithm::sliding_log;
  // A calendar limit (a fixed_window with a calendar period) has statements of its own.
  bool calendar = false;
  if (arguments.sql_limit) {
    quota::validate_limit_name(*arguments.sql_limit);
    quota::Engine engine = session.open_reader();
    const quota::Limit limit = existing_limit(engine, *arguments.sql_limit);
    algorithm = limit.algorithm;
    calendar = limit.calendar.has_value();
  }
  const quota::admin::Dialect dialect = quota::admin::dialect_of(session.db_path);
  if (arguments.sql_key) {
    const std::vector<quota::admin::KeyedStep> steps =
        quota::admin::keyed_statements(dialect, operation, algorithm, calendar);
    if (session.json) {
      auto array = nlohmann::ordered_json::array();
      for (const quota::admin::KeyedStep& step : steps) {
        array.push_back({{"step", step.name},
                         {"parameters", step.parameters},
                         {"then", step.then},
                         {"sql", step.sql}});
      }
      session.emit({{"operation", operation},
                    {"algorithm", quota::to_string(algorithm)},
                    {"dialect", quota::admin::to_string(dialect)},
                    {"steps", array}});
    } else {
      session.out << keyed_text(operation, algorithm, dialect, steps);
    }
    return 0;
  }
  const std::string statement = quota::admin::statement(dialect, operation, algorithm, calendar);
  if (operation == "renew" || operation == "release") {
    if (session.json) {
      session.emit({{"operation", operation},
                    {"algorithm", quota::to_string(algorithm)},
                    {"dialect", quota::admin::to_string(dialect)},
                    {"parameters", lease_parameters(operation)},
                    {"sql", statement}});
    } else if (session.on_server()) {
      session.out << lease_instructions(operation, true) << statement << ";\n";
    } else {
      session.out << lease_instructions(operation, false) << statement << ";\n";
    }
    return 0;
  }
  if (session.json) {
    // The parameters in order: SQLite's statement names them :limit, :owner, :cost and :now,
    // PostgreSQL's numbers them $1 to $4.
    session.emit({{"operation", operation},
                  {"algorithm", quota::to_string(algorithm)},
                  {"dialect", quota::admin::to_string(dialect)},
                  {"parameters", {"limit", "owner", "cost", "now"}},
                  {"sql", statement}});
  } else if (session.on_server()) {
    session.out << psql_text(operation, algorithm, arguments.sql_limit, statement);
  } else {
    session.out << shell_instructions(operation, algorithm, arguments.sql_limit) << statement
                << ";\n";
  }
  return 0;
}

}  // namespace quotactl
