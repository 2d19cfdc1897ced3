// quotactl lease acquire|renew|release|list: concurrency leases (quota/lease.h).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "commands.h"
#include "quota/engine.h"
#include "quota/error.h"
#include "text.h"

namespace quotactl {
namespace {

nlohmann::ordered_json lease_json(const quota::LeaseResult& result) {
  const nlohmann::ordered_json null = nullptr;
  return {{"allowed", result.allowed},
          {"reason", quota::to_string(result.reason)},
          {"lease", result.lease.empty() ? null : nlohmann::ordered_json(result.lease)},
          {"expires_at_ms", result.lease.empty() ? null : nlohmann::ordered_json(result.expires_at_ms)},
          {"remaining", result.remaining},
          {"retry_after_ms", result.retry_after_ms},
          {"reset_at_ms", result.reset_at_ms},
          {"denied", result.denied},
          {"shadow_denied", result.shadow_denied}};
}

// The TTL of `lease renew --ttl`, checked before the database is opened.
std::optional<std::chrono::milliseconds> parse_ttl(const Arguments& arguments) {
  if (!arguments.ttl) return std::nullopt;
  const std::chrono::milliseconds ttl = parse_duration(*arguments.ttl, "--ttl");
  if (ttl < quota::kLeaseTtlMin || ttl > quota::kLeaseTtlMax) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("--ttl {} is out of range: a lease lives 1s to 1d",
                                   *arguments.ttl));
  }
  return ttl;
}

// A lease ID as acquire printed it, checked before the database is opened: one not of the
// form the engine issues is invalid input (exit 2), not a lease that is not held.
void validate_lease_argument(const std::string& lease) {
  try {
    quota::validate_lease_id(lease);
  } catch (const quota::Error&) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       fmt::format("invalid lease ID '{}': give the lease ID that `lease "
                                   "acquire` printed (32 hex digits, 0-9 a-f)",
                                   quota::bounded(lease)));
  }
}

// The human line of an acquire, without its end of line.
void print_acquired(Session& session, const quota::LeaseResult& result) {
  if (!result.lease.empty()) {
    session.out << fmt::format("allowed: lease {} until {} (in {}), {} left",
                               printable(result.lease), format_time(result.expires_at_ms),
                               format_duration(result.expires_at_ms - session.now),
                               result.remaining);
  } else if (result.allowed) {
    session.out << fmt::format("allowed without a lease ({}), {} left",
                               result.reason == quota::Reason::store_unavailable
                                   ? "the database failed and the failure policy is fail_open"
                               : result.shadow_denied ? "shadow mode: enforcing would deny"
                                                      : "the owner is exempt",
                               result.remaining);
  } else if (result.retry_after_ms < 0) {
    session.out << fmt::format("denied ({}): never allowed", quota::to_string(result.reason));
  } else {
    session.out << fmt::format("denied ({}): a lease frees up in {} (at {})",
                               quota::to_string(result.reason),
                               format_duration(result.retry_after_ms),
                               format_time(session.now + result.retry_after_ms));
  }
}

}  // namespace

int run_lease_acquire(Session& session, const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  quota::validate_owner(arguments.owner);
  std::int64_t cost = 1;
  if (arguments.cost) cost = parse_whole(*arguments.cost, "--cost", 1, quota::kMaximumBound);
  if (arguments.key) quota::validate_idempotency_key(*arguments.key);
  quota::Engine engine = session.open_engine();
  const quota::LeaseResult result =
      arguments.key ? engine.acquire_lease(arguments.limit, arguments.owner, cost, *arguments.key)
                    : engine.acquire_lease(arguments.limit, arguments.owner, cost);
  const int status = result.allowed ? 0 : 1;
  if (session.json) {
    nlohmann::ordered_json document = {{"limit", arguments.limit}, {"owner", arguments.owner}};
    document.update(lease_json(result));
    // A request made with --key also says whether it was answered from the key.
    if (arguments.key) document["replayed"] = result.replayed;
    session.emit(document);
    return status;
  }
  print_acquired(session, result);
  session.out << replayed_note(result) << '\n';
  return status;
}
int run_lease_renew(Session& session, const Arguments& arguments) {
  validate_lease_argument(arguments.lease);
  const std::optional<std::chrono::milliseconds> ttl = parse_ttl(arguments);
  quota::Engine engine = session.open_engine();
  const quota::LeaseResult result = engine.renew_lease(arguments.lease, ttl);
  const int status = result.allowed ? 0 : 1;
  if (session.json) {
    nlohmann::ordered_json document = lease_json(result);
    document["lease"] = arguments.lease;
    session.emit(document);
    return status;
  }
  if (result.allowed) {
    session.out << fmt::format("renewed lease {} until {} (in {})\n", printable(result.lease),
                               format_time(result.expires_at_ms),
                               format_duration(result.expires_at_ms - session.now));
  } else {
    session.out << fmt::format(
        "lease {} is not held (lease_expired): it expired, was released or never existed; "
        "acquire a new one\n",
        printable(arguments.lease));
  }
  return status;
}

int run_lease_release(Session& session, const Arguments& arguments) {
  validate_lease_argument(arguments.lease);
  quota::Engine engine = session.open_engine();
  const bool held = engine.release_lease(arguments.lease);
  if (session.json) {
    session.emit({{"lease", arguments.lease}, {"released", held}});
    return 0;
  }
  session.out << (held ? fmt::format("released lease {}\n", printable(arguments.lease))
                       : fmt::format("lease {} was not held (expired, released before, or "
                                     "unknown): nothing to release\n",
                                     printable(arguments.lease)));
  return 0;
}

int run_lease_list(Session& session, const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  if (arguments.owner_filter) quota::validate_owner(*arguments.owner_filter);
  quota::Engine engine = session.open_reader();
  const std::vector<quota::LeaseInfo> leases =
      arguments.owner_filter ? engine.leases(arguments.limit, *arguments.owner_filter)
                             : engine.leases(arguments.limit);
  if (session.json) {
    auto array = nlohmann::ordered_json::array();
    for (const quota::LeaseInfo& lease : leases) {
      array.push_back({{"lease", lease.lease},
                       {"owner", lease.owner},
                       {"cost", lease.cost},
                       {"expires_at_ms", lease.expires_at_ms},
                       {"acquired_at_ms", lease.acquired_at_ms}});
    }
    session.emit(array);
    return 0;
  }
  if (leases.empty()) {
    session.out << fmt::format("no leases held on {}\n", arguments.limit);
    return 0;
  }
  std::vector<std::vector<std::string>> rows{{"LEASE", "OWNER", "COST", "EXPIRES", "IN"}};
  for (const quota::LeaseInfo& lease : leases) {
    rows.push_back({printable(lease.lease), printable(lease.owner, 40), std::to_string(lease.cost),
                    format_time(lease.expires_at_ms),
                    format_duration(lease.expires_at_ms - session.now)});
  }
  session.out << format_table(rows, {false, false, true, false, false});
  return 0;
}

}  // namespace quotactl
