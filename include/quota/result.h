// The answer to every operation.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "quota/export.h"

namespace quota {

// Why a request was answered the way it was. The stored names (to_string) never change.
enum class Reason {
  ok,                     // allowed
  rate_limited,           // denied now; allowed again after retry_after_ms
  cost_exceeds_capacity,  // the cost is above the limit's capacity: it can never succeed
  owner_denied,           // an override denies this owner
  hook_denied,            // a before_consume hook returned false
  store_unavailable,      // allowed without a decision: the database failed and
                          // Options::failure_policy is fail_open
  blocked,                // locked out (Limit::block) after a rate_limited denial, until
                          // retry_after_ms from now
  lease_expired,          // renew_lease: the lease is unknown, released or expired
};

QUOTA_API std::string_view to_string(Reason reason);
QUOTA_API std::optional<Reason> parse_reason(std::string_view name);

// What an operation decided. A denial is a Result, never an exception.
struct Result {
  // consume/check: the request is (or would be) granted. record: usage after recording is
  // within the limit. reset: always true.
  bool allowed = true;
  Reason reason = Reason::ok;
  // Units still available after the operation (for check: available now), >= 0.
  std::int64_t remaining = 0;
  // 0 when allowed; otherwise the smallest wait after which the same consume would be
  // allowed if nothing else happened; -1 when it never can be.
  std::int64_t retry_after_ms = 0;
  // When usage is back to zero if nothing else happens (Unix ms).
  std::int64_t reset_at_ms = 0;
  // Denied consumes of this owner since its state was created or last reset.
  std::int64_t denied = 0;
  // Shadow mode: this consume was allowed only because the limit is in shadow mode;
  // reason, remaining and retry_after_ms say what enforcing would have answered.
  bool shadow_denied = false;
  // Answered from an idempotency key's stored answer (a retry of a request made with the
  // same key): the figures are the first request's, and nothing was charged this time.
  bool replayed = false;

  std::chrono::milliseconds retry_after() const {
    return std::chrono::milliseconds(retry_after_ms);
  }

  friend bool operator==(const Result&, const Result&) = default;
};

}  // namespace quota
