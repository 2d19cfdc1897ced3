// Stored names of the enums, and the validation of everything a caller passes in.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "idempotency.h"
#include "quota/error.h"
#include "quota/limit.h"
#include "quota/policy.h"
#include "quota/result.h"
#include "shown.h"

namespace quota {
namespace {

constexpr std::array<std::pair<Algorithm, std::string_view>, 5> kAlgorithms{{
    {Algorithm::sliding_log, "sliding_log"},
    {Algorithm::fixed_window, "fixed_window"},
    {Algorithm::sliding_window, "sliding_window"},
    {Algorithm::token_bucket, "token_bucket"},
    {Algorithm::concurrency, "concurrency"},
}};

constexpr std::array<std::pair<Reason, std::string_view>, 8> kReasons{{
    {Reason::ok, "ok"},
    {Reason::rate_limited, "rate_limited"},
    {Reason::cost_exceeds_capacity, "cost_exceeds_capacity"},
    {Reason::owner_denied, "owner_denied"},
    {Reason::hook_denied, "hook_denied"},
    {Reason::store_unavailable, "store_unavailable"},
    {Reason::blocked, "blocked"},
    {Reason::lease_expired, "lease_expired"},
}};

constexpr std::array<std::pair<Calendar, std::string_view>, 4> kCalendars{{
    {Calendar::day, "day"},
    {Calendar::week, "week"},
    {Calendar::month, "month"},
    {Calendar::year, "year"},
}};

constexpr std::array<std::pair<Policy, std::string_view>, 3> kPolicies{{
    {Policy::maximum, "maximum"},
    {Policy::exempt, "exempt"},
    {Policy::deny, "deny"},
}};

template <typename Enum, std::size_t N>
std::string_view name_of(const std::array<std::pair<Enum, std::string_view>, N>& names,
                         Enum value) {
  for (const auto& [candidate, name] : names) {
    if (candidate == value) return name;
  }
  return "?";
}

template <typename Enum, std::size_t N>
std::optional<Enum> value_of(const std::array<std::pair<Enum, std::string_view>, N>& names,
                             std::string_view name) {
  for (const auto& [value, candidate] : names) {
    if (candidate == name) return value;
  }
  return std::nullopt;
}

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, message);
}

bool is_name_character(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      length = 2;
      code = byte & 0x1F;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3;
      code = byte & 0x0F;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4;
      code = byte & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

// The decisions of sliding_window and token_bucket multiply counts by the period; these
// bounds keep every such product inside 64-bit integers (see src/statements.cpp).
void validate_products(const Limit& limit) {
  const std::optional<LimitOverflow> overflow = find_overflow(limit);
  if (!overflow) return;
  std::vector<std::string> fixes;
  if (overflow->largest_maximum && overflow->largest_burst) {
    fixes.push_back(fmt::format("use a maximum of at most {} and a burst of at most {}",
                                *overflow->largest_maximum, *overflow->largest_burst));
  } else if (overflow->largest_maximum) {
    fixes.push_back(fmt::format("use a maximum of at most {}", *overflow->largest_maximum));
  } else if (overflow->largest_burst) {
    fixes.push_back(fmt::format("use a burst of at most {}", *overflow->largest_burst));
  }
  if (overflow->or_burst) {
    fixes.push_back(fmt::format("give a burst of at most {}", *overflow->or_burst));
  }
  fixes.push_back(fmt::format("a period of at most {} ms", overflow->longest_period.count()));
  std::string advice = fixes.front();
  for (std::size_t i = 1; i < fixes.size(); ++i) advice += ", or " + fixes[i];
  invalid(
      fmt::format("limit '{}' (maximum {}{}, period {} ms) is too large for the 64-bit "
                  "arithmetic of {}: {}; {}",
                  limit.name, limit.maximum,
                  limit.burst ? fmt::format(", burst {}", *limit.burst) : std::string(),
                  limit.period.count(), to_string(limit.algorithm), overflow->rule, advice));
}

}  // namespace

std::optional<LimitOverflow> find_overflow(const Limit& limit) {
  const std::int64_t period = limit.period.count();
  if (period < 1) return std::nullopt;
  // The largest value of a number whose product with the period is at most `bound` (never
  // beyond the number's own range).
  const auto largest = [&](std::int64_t bound) { return std::min(bound / period, kMaximumBound); };
  const auto fits = [&](std::int64_t value, std::int64_t bound) { return value <= bound / period; };
  LimitOverflow overflow;
  if (limit.algorithm == Algorithm::sliding_window) {
    if (fits(limit.maximum, kProductBound)) return std::nullopt;
    overflow.rule = "maximum x period_ms must be at most 2^62 (4611686018427387904)";
    overflow.largest_maximum = largest(kProductBound);
    overflow.longest_period = std::chrono::milliseconds{kProductBound / limit.maximum};
    return overflow;
  }
  if (limit.algorithm != Algorithm::token_bucket) return std::nullopt;
  const bool maximum_fits = fits(limit.maximum, kProductBound);
  const bool burst_fits = fits(limit.capacity(), kBucketBound);
  if (maximum_fits && burst_fits) return std::nullopt;
  if (!maximum_fits && !burst_fits) {
    overflow.rule =
        "maximum x period_ms must be at most 2^62 (4611686018427387904) and burst x period_ms "
        "at most 2^61 (2305843009213693952)";
  } else if (!maximum_fits) {
    overflow.rule = "maximum x period_ms must be at most 2^62 (4611686018427387904)";
  } else {
    overflow.rule = "burst x period_ms must be at most 2^61 (2305843009213693952)";
  }
  if (!limit.burst) {
    // The burst is the maximum: lowering the maximum lowers both.
    overflow.rule += ", and the burst is the maximum when none is given";
    overflow.largest_maximum = std::min(largest(kProductBound), largest(kBucketBound));
    if (maximum_fits) overflow.or_burst = largest(kBucketBound);
  } else {
    if (!maximum_fits) overflow.largest_maximum = largest(kProductBound);
    if (!burst_fits) overflow.largest_burst = largest(kBucketBound);
  }
  overflow.longest_period = std::chrono::milliseconds{
      std::min(kProductBound / limit.maximum, kBucketBound / limit.capacity())};
  return overflow;
}

std::string_view to_string(Algorithm algorithm) { return name_of(kAlgorithms, algorithm); }
std::optional<Algorithm> parse_algorithm(std::string_view name) {
  return value_of(kAlgorithms, name);
}
std::string_view to_string(Calendar calendar) { return name_of(kCalendars, calendar); }
std::optional<Calendar> parse_calendar(std::string_view name) { return value_of(kCalendars, name); }

std::chrono::milliseconds longest_window(Calendar calendar) {
  constexpr std::int64_t day = 24LL * 60 * 60 * 1000;
  switch (calendar) {
    case Calendar::day:
      return std::chrono::milliseconds{day};
    case Calendar::week:
      return std::chrono::milliseconds{7 * day};
    case Calendar::month:
      return std::chrono::milliseconds{31 * day};
    case Calendar::year:
      return std::chrono::milliseconds{366 * day};
  }
  return std::chrono::milliseconds{day};
}

Limit calendar_limit(std::string name, std::int64_t maximum, Calendar unit,
                     std::chrono::minutes utc_offset, std::optional<std::int64_t> anchor_ms) {
  Limit limit;
  limit.name = std::move(name);
  limit.algorithm = Algorithm::fixed_window;
  limit.maximum = maximum;
  limit.period = longest_window(unit);
  limit.calendar = unit;
  limit.utc_offset = utc_offset;
  limit.anchor_ms = anchor_ms;
  return limit;
}

void validate_anchor(std::int64_t anchor_ms) {
  if (anchor_ms < 0 || anchor_ms > kAnchorBound) {
    invalid(
        fmt::format("invalid anchor {} ms: an anchor is an instant from 1970-01-01T00:00:00Z to "
                    "10000-01-01T00:00:00Z ({} ms)",
                    anchor_ms, kAnchorBound));
  }
}

std::string_view to_string(Reason reason) { return name_of(kReasons, reason); }
std::optional<Reason> parse_reason(std::string_view name) { return value_of(kReasons, name); }
std::string_view to_string(Policy policy) { return name_of(kPolicies, policy); }
std::optional<Policy> parse_policy(std::string_view name) { return value_of(kPolicies, name); }

void validate_limit_name(std::string_view name) {
  if (name.empty() || name.size() > kNameBound) {
    invalid(fmt::format("invalid limit name '{}': use 1 to {} characters of A-Z a-z 0-9 _ . : -",
                        detail::bounded(name), kNameBound));
  }
  for (char c : name) {
    if (!is_name_character(c)) {
      invalid(fmt::format(
          "invalid limit name '{}': only the characters A-Z a-z 0-9 _ . : - are allowed",
          detail::bounded(name)));
    }
  }
}

void validate_owner(std::string_view owner) {
  if (owner.empty()) invalid("invalid owner: it is empty; pass a non-empty key (user id, IP, ...)");
  if (owner.size() > kOwnerBound) {
    invalid(fmt::format("invalid owner: {} bytes long; the most is {} bytes (hash longer keys)",
                        owner.size(), kOwnerBound));
  }
  if (owner.find('\0') != std::string_view::npos) {
    invalid("invalid owner: it contains a NUL byte; owners are text without NUL");
  }
  if (!is_valid_utf8(owner)) invalid("invalid owner: it is not valid UTF-8; pass UTF-8 text");
}

// Keys are text as owners are, so that both backends store the same key: PostgreSQL's text
// ends at a NUL and refuses invalid UTF-8, where SQLite would keep the bytes.
void validate_idempotency_key(std::string_view key) {
  if (key.empty() || key.size() > detail::kMaxKeyBytes) {
    invalid(fmt::format("the idempotency key {} is {} bytes long: give 1 to {} bytes", bounded(key),
                        key.size(), detail::kMaxKeyBytes));
  }
  if (key.find('\0') != std::string_view::npos) {
    invalid("invalid idempotency key: it contains a NUL byte; keys are text without NUL");
  }
  if (!is_valid_utf8(key)) {
    invalid("invalid idempotency key: it is not valid UTF-8; pass UTF-8 text");
  }
}

void validate_cost(std::int64_t cost) {
  if (cost < 1 || cost > kMaximumBound) {
    invalid(
        fmt::format("invalid cost {}: a cost is a whole number from 1 to {}", cost, kMaximumBound));
  }
}

namespace {

void validate_calendar(const Limit& limit) {
  if (!limit.calendar) {
    if (limit.utc_offset.count() != 0 || limit.anchor_ms) {
      invalid(fmt::format(
          "limit '{}' has a {} but no calendar period: a UTC offset and an anchor only place "
          "calendar windows; set a calendar period (day, week, month or year) or drop them",
          limit.name, limit.anchor_ms ? "an anchor" : "UTC offset"));
    }
    return;
  }
  if (limit.algorithm != Algorithm::fixed_window) {
    invalid(fmt::format(
        "limit '{}' is {}: calendar periods count only with fixed_window; use fixed_window, "
        "or a period in ms for {}",
        limit.name, to_string(limit.algorithm), to_string(limit.algorithm)));
  }
  if (limit.period != longest_window(*limit.calendar)) {
    invalid(fmt::format(
        "limit '{}' counts per {} but its period is {} ms: a calendar limit's period is its "
        "longest window, {} ms (quota::calendar_limit sets it)",
        limit.name, to_string(*limit.calendar), limit.period.count(),
        longest_window(*limit.calendar).count()));
  }
  if (limit.utc_offset < -kUtcOffsetBound || limit.utc_offset > kUtcOffsetBound) {
    invalid(fmt::format(
        "invalid UTC offset {} minutes for limit '{}': use -14:00 to +14:00 (-840 to 840 minutes)",
        limit.utc_offset.count(), limit.name));
  }
  if (limit.anchor_ms) validate_anchor(*limit.anchor_ms);
}

}  // namespace

void validate_limit(const Limit& limit) {
  validate_limit_name(limit.name);
  if (limit.maximum < 1 || limit.maximum > kMaximumBound) {
    invalid(fmt::format("invalid maximum {} for limit '{}': use a whole number from 1 to {}",
                        limit.maximum, limit.name, kMaximumBound));
  }
  if (limit.period.count() < 1 || limit.period > kPeriodBound) {
    invalid(fmt::format("invalid period {} ms for limit '{}': use 1 ms to 366 days ({} ms)",
                        limit.period.count(), limit.name, kPeriodBound.count()));
  }
  if (limit.burst) {
    if (limit.algorithm != Algorithm::token_bucket) {
      invalid(fmt::format("burst is only for token_bucket limits; '{}' is {}: drop the burst",
                          limit.name, to_string(limit.algorithm)));
    }
    if (*limit.burst < 1 || *limit.burst > kMaximumBound) {
      invalid(fmt::format("invalid burst {} for limit '{}': use a whole number from 1 to {}",
                          *limit.burst, limit.name, kMaximumBound));
    }
  }
  if (limit.block && (limit.block->count() < 1 || *limit.block > kPeriodBound)) {
    invalid(fmt::format("invalid block {} ms for limit '{}': use 1 ms to 366 days ({} ms)",
                        limit.block->count(), limit.name, kPeriodBound.count()));
  }
  if (limit.algorithm == Algorithm::concurrency) {
    if (limit.period < kLeaseTtlMin || limit.period > kLeaseTtlMax) {
      invalid(fmt::format(
          "invalid TTL {} ms for concurrency limit '{}': use 1 s to 1 day (1000 to {} ms)",
          limit.period.count(), limit.name, kLeaseTtlMax.count()));
    }
  }
  validate_calendar(limit);
  validate_products(limit);
}

void validate_override(const Override& override) {
  if (override.limit != kEveryLimit) validate_limit_name(override.limit);
  validate_owner(override.owner);
  if (override.policy != Policy::maximum) {
    if (override.maximum || override.burst) {
      invalid(
          fmt::format("an override that is {} takes no maximum or burst: drop them, or use "
                      "the maximum policy",
                      to_string(override.policy)));
    }
    return;
  }
  if (!override.maximum) {
    invalid("an override with the maximum policy needs a maximum: give the owner's maximum");
  }
  if (*override.maximum < 1 || *override.maximum > kMaximumBound) {
    invalid(fmt::format("invalid override maximum {}: use a whole number from 1 to {}",
                        *override.maximum, kMaximumBound));
  }
  if (override.burst && (*override.burst < 1 || *override.burst > kMaximumBound)) {
    invalid(fmt::format("invalid override burst {}: use a whole number from 1 to {}",
                        *override.burst, kMaximumBound));
  }
}

}  // namespace quota
