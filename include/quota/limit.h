// Limits: what is counted, how, and how much is allowed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "quota/export.h"

namespace quota {

// How usage is counted. The stored names (to_string) never change once released.
enum class Algorithm {
  sliding_log,     // exact: every recorded event counts for exactly period after it happened
  fixed_window,    // a counter per epoch-aligned window (windowKey = floor(t / period))
  sliding_window,  // weighted: current window + previous window * (period - elapsed) / period
  token_bucket,    // capacity `burst`, refilled by `maximum` tokens per period, continuously
};

// "sliding_log", "fixed_window", "sliding_window" or "token_bucket".
QUOTA_API std::string_view to_string(Algorithm algorithm);

// The algorithm with that stored name, or nullopt.
QUOTA_API std::optional<Algorithm> parse_algorithm(std::string_view name);

// A named rule: at most `maximum` units per `period`, counted per owner.
struct Limit {
  // 1 to 64 characters of A-Z a-z 0-9 _ . : -
  std::string name;
  Algorithm algorithm = Algorithm::sliding_log;
  // Units allowed per period, 1 to kMaximumBound (and see kProductBound).
  std::int64_t maximum = 1;
  // 1 ms to 366 days.
  std::chrono::milliseconds period{1000};
  // token_bucket only: the bucket's capacity (default: maximum). Must be empty for the other
  // algorithms.
  std::optional<std::int64_t> burst = std::nullopt;
  // Shadow mode: consume never denies, but counts would-be denials (Usage::shadow_denied)
  // and records usage only when enforcing would have allowed it. check answers as if
  // enforcing.
  bool shadow = false;

  // The most units one request can ever be granted: burst for a token bucket, else maximum.
  std::int64_t capacity() const { return burst.value_or(maximum); }

  friend bool operator==(const Limit&, const Limit&) = default;
};

// Bounds of a limit's numbers and of a request's cost. They keep every sum the engine
// computes far inside 64-bit integers.
inline constexpr std::int64_t kMaximumBound = 1'000'000'000'000;  // maximum, burst, cost
inline constexpr std::chrono::milliseconds kPeriodBound{366LL * 24 * 60 * 60 * 1000};
inline constexpr std::size_t kNameBound = 64;    // characters of a limit's name
inline constexpr std::size_t kOwnerBound = 1024; // bytes of an owner
// sliding_window and token_bucket multiply by the period: maximum x period_ms must be at most
// kProductBound, a sliding_window's period at most 30 days, and a token bucket's
// burst x period_ms at most kBucketBound (half, so that its debt can reach twice its capacity
// and every sum of the two still fits).
inline constexpr std::int64_t kProductBound = std::int64_t{1} << 62;
inline constexpr std::int64_t kBucketBound = std::int64_t{1} << 61;
inline constexpr std::chrono::milliseconds kSlidingWindowPeriodBound{30LL * 24 * 60 * 60 * 1000};

}  // namespace quota

namespace quota {

// Each throws Error(ErrorCode::invalid_argument) with a message saying what is wrong and
// what is accepted; they are what every operation checks before touching the database.
QUOTA_API void validate_limit_name(std::string_view name);
QUOTA_API void validate_owner(std::string_view owner);
QUOTA_API void validate_cost(std::int64_t cost);
QUOTA_API void validate_limit(const Limit& limit);

}  // namespace quota
