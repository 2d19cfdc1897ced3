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
  concurrency,     // at most `maximum` units held at once by unexpired leases, each of which
                   // expires `period` (its TTL, kLeaseTtlMin to kLeaseTtlMax) after it was
                   // taken or renewed (Engine::acquire_lease)
};

// "sliding_log", "fixed_window", "sliding_window", "token_bucket" or "concurrency".
QUOTA_API std::string_view to_string(Algorithm algorithm);

// The algorithm with that stored name, or nullopt.
QUOTA_API std::optional<Algorithm> parse_algorithm(std::string_view name);

// A calendar unit that a fixed_window limit may count per (Limit::calendar), at a fixed UTC
// offset: a day starts at midnight, a week on Monday at midnight (ISO 8601), a month on the
// 1st, a year on 1 January, unless an anchor moves the start within the unit. The stored
// names (to_string) never change once released.
enum class Calendar { day, week, month, year };

// "day", "week", "month" or "year".
QUOTA_API std::string_view to_string(Calendar calendar);

// The calendar unit with that name, or nullopt.
QUOTA_API std::optional<Calendar> parse_calendar(std::string_view name);

// The longest window of a calendar unit: 1, 7, 31 or 366 days. A calendar limit's period
// is this (the engine's gc and quota_limits.period_ms use it as the window's bound).
QUOTA_API std::chrono::milliseconds longest_window(Calendar calendar);

// The bounds of a calendar limit's UTC offset (whole minutes) and of an anchor (Unix ms,
// from the epoch to the end of the year 9999).
inline constexpr std::chrono::minutes kUtcOffsetBound{14 * 60};
inline constexpr std::int64_t kAnchorBound = 253402300800000;  // 10000-01-01T00:00:00Z

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
  // Lockout: a consume denied as rate_limited blocks the owner for this long (1 ms to 366
  // days), and waits at least that long. While blocked, consume and check answer
  // Reason::blocked with retry_after_ms up to the block's end (or the algorithm's own wait,
  // if longer); a blocked consume records nothing, counts as denied and does not extend the
  // block; record still records (and answers blocked); reset lifts the block. A limit in
  // shadow mode never blocks, nor is an exempt owner blocked; a limit without a block ignores
  // blocks that it set before. Empty (the default): no lockout.
  std::optional<std::chrono::milliseconds> block = std::nullopt;
  // Calendar periods (fixed_window only): count per calendar day, ISO week, month or year
  // at `utc_offset` instead of per `period` ms from the epoch; `period` must then be
  // longest_window(*calendar) (calendar_limit() sets it). Usage, remaining and allowed are
  // the fixed window's; retry_after_ms and reset_at_ms point at the next window's start.
  std::optional<Calendar> calendar = std::nullopt;
  // The calendar's fixed offset from UTC, -14:00 to +14:00 in whole minutes (no
  // daylight-saving rules). Must be 0 without a calendar.
  std::chrono::minutes utc_offset{0};
  // An instant (Unix ms, 0 to kAnchorBound) whose place in the unit, at utc_offset, is where
  // every window starts: its time of day (day), weekday and time (week), day of the month and
  // time (month: a day that a month lacks is its last day), date and time (year: 29 February
  // is 28 February in other years). Empty: the unit's own start. Only with a calendar; an
  // owner's own anchor (Engine::set_anchor) beats it.
  std::optional<std::int64_t> anchor_ms = std::nullopt;

  // The most units one request can ever be granted: burst for a token bucket, else maximum.
  std::int64_t capacity() const { return burst.value_or(maximum); }

  friend bool operator==(const Limit&, const Limit&) = default;
};

// A fixed_window limit of `maximum` units per calendar `unit` at `utc_offset`, its windows
// starting at `anchor_ms`'s place in the unit (see Limit::anchor_ms).
QUOTA_API Limit calendar_limit(std::string name, std::int64_t maximum, Calendar unit,
                               std::chrono::minutes utc_offset = std::chrono::minutes{0},
                               std::optional<std::int64_t> anchor_ms = std::nullopt);

// Bounds of a limit's numbers and of a request's cost. They keep every sum the engine
// computes far inside 64-bit integers.
inline constexpr std::int64_t kMaximumBound = 1'000'000'000'000;  // maximum, burst, cost
inline constexpr std::chrono::milliseconds kPeriodBound{366LL * 24 * 60 * 60 * 1000};
// A concurrency limit's TTL (its period), and a renewal's: 1 s to 1 day.
inline constexpr std::chrono::milliseconds kLeaseTtlMin{1000};
inline constexpr std::chrono::milliseconds kLeaseTtlMax{24LL * 60 * 60 * 1000};
inline constexpr std::size_t kNameBound = 64;     // characters of a limit's name
inline constexpr std::size_t kOwnerBound = 1024;  // bytes of an owner
// sliding_window and token_bucket multiply by the period (src/statements.cpp): a
// sliding_window's maximum x period_ms must be at most kProductBound, as must a token bucket's,
// and a token bucket's burst x period_ms at most kBucketBound (half, so that its debt can reach
// twice its capacity and every sum of the two still fits). Every algorithm takes every period
// from 1 ms to kPeriodBound.
inline constexpr std::int64_t kProductBound = std::int64_t{1} << 62;
inline constexpr std::int64_t kBucketBound = std::int64_t{1} << 61;

// What to lower when a limit's numbers are too large for its algorithm's 64-bit arithmetic
// (find_overflow). Every suggestion is itself accepted, with the limit's other numbers as
// they are.
struct LimitOverflow {
  // The rule that is broken, e.g. "burst x period_ms must be at most 2^61".
  std::string rule;
  // Set when the maximum must be lowered: the largest maximum accepted (with the burst
  // lowered too when largest_burst is also set). A token bucket without a burst has the
  // maximum as its burst, and this bound counts that.
  std::optional<std::int64_t> largest_maximum;
  // Set when the burst that was given must be lowered: the largest burst accepted.
  std::optional<std::int64_t> largest_burst;
  // A token bucket without a burst whose maximum fits on its own: giving a burst of at most
  // this, with the maximum as it is, is accepted too.
  std::optional<std::int64_t> or_burst;
  // Or keep the numbers: the longest period accepted with them.
  std::chrono::milliseconds longest_period{0};
};

}  // namespace quota

namespace quota {

// Each throws Error(ErrorCode::invalid_argument) with a message saying what is wrong and
// what is accepted; they are what every operation checks before touching the database.
QUOTA_API void validate_limit_name(std::string_view name);
QUOTA_API void validate_owner(std::string_view owner);
QUOTA_API void validate_cost(std::int64_t cost);
// Throws Error(ErrorCode::invalid_argument) for an idempotency key that is empty, longer than
// 255 bytes, holds a NUL byte or is not valid UTF-8: keys are text as owners are, the same on
// every backend (Engine::consume with a key; docs/concepts.md, "Retries").
QUOTA_API void validate_idempotency_key(std::string_view key);
QUOTA_API void validate_limit(const Limit& limit);
// An anchor instant (Limit::anchor_ms, Anchor::anchor_ms): 0 to kAnchorBound.
QUOTA_API void validate_anchor(std::int64_t anchor_ms);

// Whether `limit`'s numbers (each within its own range) are too large for its algorithm's
// 64-bit arithmetic, and what would be accepted instead; nullopt when they fit.
// validate_limit refuses such a limit with a message built from this.
QUOTA_API std::optional<LimitOverflow> find_overflow(const Limit& limit);

}  // namespace quota
