// Policies: per-owner overrides, hooks, and the answer of a consume over several limits.
//
//   engine.set_override({"send", "u42", quota::Policy::maximum, 20});  // a premium tier
//   engine.set_override({"*", "admin", quota::Policy::exempt});        // never limited
//   engine.set_hooks("send", {.on_exceeded = [](const quota::Request& r, const quota::Result&) {
//     log_abuse(r.owner);
//   }});
//   quota::Decision d = engine.consume_all({"per_minute", "per_hour"}, user_id);
//   quota::Decision g = engine.consume_all({{"per_ip", address}, {"per_key", key_digest}});
//   quota::Decision t = engine.consume_all({{"tokens", user_id, 500}, {"requests", user_id}});
//
// Overrides live in the database (quota_overrides), so SQL-only clients see them too; hooks
// live in the process that sets them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/export.h"
#include "quota/result.h"

namespace quota {

// What an override does. The stored names (to_string) never change once released.
enum class Policy {
  maximum,  // the owner's own maximum (and, for a token bucket, burst)
  exempt,   // always allowed, uses no quota, remaining = the capacity
  deny,     // always denied: Reason::owner_denied, remaining 0, retry_after_ms -1
};

// "maximum", "exempt" or "deny".
QUOTA_API std::string_view to_string(Policy policy);
QUOTA_API std::optional<Policy> parse_policy(std::string_view name);

// The limit name of an override that applies to every limit. An override for the limit
// itself beats a kEveryLimit override for the same owner.
inline constexpr std::string_view kEveryLimit = "*";

struct Override {
  std::string limit;  // a limit's name, or kEveryLimit ("*")
  std::string owner;
  Policy policy = Policy::maximum;
  // Policy::maximum: the owner's maximum, 1 to kMaximumBound. Empty for the others.
  std::optional<std::int64_t> maximum = std::nullopt;
  // Policy::maximum on a token bucket: the owner's burst (default: this maximum). Refused
  // for an override of a limit of another algorithm; ignored by those of a "*" override.
  std::optional<std::int64_t> burst = std::nullopt;

  friend bool operator==(const Override&, const Override&) = default;
};

// An owner's own anchor of a calendar limit's windows (Engine::set_anchor), stored in
// quota_anchors: its windows start at anchor_ms's place in the limit's unit instead of the
// limit's anchor's.
struct Anchor {
  std::string limit;  // a calendar limit's name, or kEveryLimit ("*")
  std::string owner;
  std::int64_t anchor_ms = 0;  // Unix ms, 0 to kAnchorBound

  friend bool operator==(const Anchor&, const Anchor&) = default;
};

// The request a hook is called about.
struct Request {
  std::string_view limit;
  std::string_view owner;
  std::int64_t cost = 1;
  std::int64_t now_ms = 0;  // the engine's clock for this operation
};

// In-process callbacks of one limit (Engine::set_hooks), each optional. For a consume they
// run in this order: before_consume, the decision, on_exceeded (if denied), after_consume;
// for a record: before_record, the decision, on_exceeded (if usage is now beyond the limit),
// after_record. They run inside the operation's savepoint, on the calling thread, with the
// Engine's lock held: a hook must not call the same Engine. A hook that throws rolls the
// whole operation back (nothing recorded, no denial counted) and its exception reaches the
// caller of consume or record unchanged.
struct Hooks {
  // Returning false denies the consume with Reason::hook_denied, retry_after_ms -1 (the
  // engine cannot know when the hook will allow); nothing is recorded or counted.
  std::function<bool(const Request&)> before_consume;
  std::function<void(const Request&, const Result&)> after_consume;
  std::function<void(const Request&)> before_record;
  std::function<void(const Request&, const Result&)> after_record;
  // Every denied consume (whatever the reason) and every record that leaves usage beyond
  // the limit. A shadow-mode limit never denies, so never calls it.
  std::function<void(const Request&, const Result&)> on_exceeded;

  bool empty() const {
    return !before_consume && !after_consume && !before_record && !after_record && !on_exceeded;
  }
};

// One limit of Engine::consume_all (check_all, acquire_all), the owner it charges and, when
// given, a cost of its own: {"tokens", user, 500} takes 500 units of tokens whatever the
// call's cost. Each cost is checked as the call's is (1 to kMaximumBound).
struct Charge {
  std::string_view limit;
  std::string_view owner;
  std::optional<std::int64_t> cost = std::nullopt;  // nullopt: the call's cost
};

// One request of Engine::consume_many, check_many and record_many.
struct BatchRequest {
  std::string_view limit;
  std::string_view owner;
  std::int64_t cost = 1;
};

// A lease that Engine::consume_all (or acquire_all) took on a concurrency limit of the call
// (quota/lease.h): release it with Engine::release_lease(lease) when done, or let it expire.
struct LeaseGrant {
  std::string limit;
  std::string owner;
  std::string lease;               // the lease's id (32 hex digits)
  std::int64_t expires_at_ms = 0;  // when it expires (Unix ms): t + the limit's TTL

  friend bool operator==(const LeaseGrant&, const LeaseGrant&) = default;
};

// The answer of Engine::consume_all: the limit that decided and its Result, and the leases
// it took. `leases` has one entry per concurrency limit of the call that took a lease, in
// the order of the call, when the call is allowed; a denied call holds nothing (every lease
// it took is undone with the rest), nor does an exempt owner, a shadow-mode allowance or a
// fail_open answer (Reason::store_unavailable).
struct Decision {
  std::string limit;
  Result result;
  std::vector<LeaseGrant> leases = {};
};

// Throws Error(ErrorCode::invalid_argument) for an override whose names or numbers are
// invalid on their own (Engine::set_override also checks them against the limit).
QUOTA_API void validate_override(const Override& override);

// Usage rows, ordered by what (Engine::usage).
enum class UsageOrder {
  used,           // most used first
  denied,         // most denied first: abusive owners stand out
  shadow_denied,  // most would-be denials first: whom shadow mode would have stopped
  blocked,        // only the owners locked out now (Limit::block), the latest block end first
};

}  // namespace quota
