// quotactl's values on the command line and on the screen: strict parsing of numbers and
// durations (every refusal is a quota::Error(invalid_argument) whose message says what is
// accepted), and the human forms of durations, times and owners.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/error.h"
#include "quota/limit.h"
#include "quota/result.h"

namespace quotactl {

// A whole decimal number from `minimum` to `maximum` ("12", "-3"); anything else (1.5, 1e3,
// abc, " 7", a number beyond 64 bits) is refused. `what` names the value in the message,
// e.g. "--cost".
std::int64_t parse_whole(std::string_view text, std::string_view what, std::int64_t minimum,
                         std::int64_t maximum);

// DURATION: the library's quota::parse_duration (quota/config.h), which a configuration file's
// durations take too.
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what);

// The exact DURATION text for a period, in the largest unit that divides it (90000 -> "90s",
// 3600000 -> "1h"), so that it can be passed back to `limit set --per`.
std::string format_period(std::chrono::milliseconds period);

// The longest DURATION text of at most `longest`, in the unit of `typed` (a DURATION the user
// gave, "366d") when `longest` holds one of it, else in the largest unit that it holds
// (2305843 ms and "366d" -> "38m"): a bound to suggest in the user's own terms.
std::string format_period_at_most(std::chrono::milliseconds longest, std::string_view typed);

// A wait or an age for a person, exact to the millisecond: 500ms, 1.234s, 59.9s, 1m 30s,
// 2h 5m, 1d 0.001s.
std::string format_duration(std::int64_t milliseconds);

// After the human line of a request answered from its idempotency key's stored answer.
std::string replayed_note(const quota::Result& result);

// Unix milliseconds as ISO-8601 UTC: 2023-11-14T22:13:20.000Z.
std::string format_time(std::int64_t unix_ms);

// --per: a DURATION, or a calendar unit without a number (day, week, month or year).
struct Period {
  std::chrono::milliseconds duration{0};    // a DURATION's length; 0 for a calendar unit
  std::optional<quota::Calendar> calendar;  // the calendar unit, if that was given
};
Period parse_period(std::string_view text, std::string_view what);

// A fixed offset from UTC, +HH:MM or -HH:MM, from -14:00 to +14:00 (quota::kUtcOffsetBound).
std::chrono::minutes parse_utc_offset(std::string_view text, std::string_view what);

// "+09:00", "-05:30", "+00:00".
std::string format_utc_offset(std::chrono::minutes offset);

// An ISO-8601 instant, YYYY-MM-DDTHH:MM:SS with an optional fraction of 1 to 3 digits, then Z
// or an offset +HH:MM / -HH:MM (2026-03-17T09:30:00Z, 2026-03-17T09:30:00.250+09:00), from
// 1970-01-01T00:00:00Z to the end of 9999 in UTC: Unix ms, below quota::kAnchorBound.
std::int64_t parse_instant(std::string_view text, std::string_view what);

// Unix milliseconds as the local time at `offset`, to the minute, with seconds (and
// milliseconds) only when there are any: "2026-12-01 00:00 +09:00", "2026-12-01 00:00:30
// -05:00".
std::string format_local_time(std::int64_t unix_ms, std::chrono::minutes offset);

// Where a calendar limit's windows start, for a person: "the 17th 09:30 UTC+09:00", "Monday
// 00:00 UTC", "00:00 UTC" (day), "1 January 00:00 UTC", at the limit's offset and from
// `anchor_ms` (the limit's own anchor, or an owner's) when given.
std::string describe_window_start(quota::Calendar calendar, std::chrono::minutes offset,
                                  std::optional<std::int64_t> anchor_ms);

// A limit's period as `limit set --per` takes it: "1m", or "month" for a calendar limit.
std::string format_limit_period(const quota::Limit& limit);

// A limit's numbers for a person: "10 per 1m (sliding_log)", with a token bucket's burst;
// "10000 per month (fixed_window, from the 17th 09:30 UTC+09:00)" for a calendar limit.
std::string describe_limit(const quota::Limit& limit);

// An owner made safe for a terminal line: control bytes become \xNN. The result is cut to
// at most `max_characters` characters (UTF-8 code points) with a trailing "…".
std::string printable(std::string_view text, std::size_t max_characters = 1024);

// The number of characters (UTF-8 code points) in `text`, for aligning columns.
std::size_t display_width(std::string_view text);

// The candidates `word` is most likely a typo of (the library's quota::likely_meant).
using quota::likely_meant;

// " (did you mean 'consume'?)", " (did you mean 'set' or 'get'?)" for likely_meant(word,
// candidates), each shown after `prefix` (a command's group: "limit "); "" when it is empty.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view prefix = "");

}  // namespace quotactl

namespace quotactl {

// "##########.........." : `part` of `whole` as a bar of `width` characters, rounded up (so
// that any use shows), full when `part` >= `whole`.
std::string bar(std::int64_t part, std::int64_t whole, int width = 20);

// `rows` (the first is the header) as columns two spaces apart, each line ending in '\n'.
// Columns whose `right_aligned` entry is true are aligned right (numbers).
std::string format_table(const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_aligned);

}  // namespace quotactl
