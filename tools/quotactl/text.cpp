#include "text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "quota/config.h"
#include "quota/error.h"
#include "quota/limit.h"

namespace quotactl {
namespace {

using std::chrono::milliseconds;

[[noreturn]] void invalid(const std::string& message) {
  throw quota::Error(quota::ErrorCode::invalid_argument, message);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

constexpr std::array<std::pair<std::string_view, std::int64_t>, 5> kUnits{{
    {"d", 86'400'000},
    {"h", 3'600'000},
    {"m", 60'000},
    {"s", 1'000},
    {"ms", 1},
}};

}  // namespace

std::int64_t parse_whole(std::string_view text, std::string_view what, std::int64_t minimum,
                         std::int64_t maximum) {
  const auto refuse = [&] {
    invalid(fmt::format("invalid {} '{}': use a whole number from {} to {}", what,
                        quota::bounded(text), minimum, maximum));
  };
  const std::size_t digits_from = !text.empty() && text.front() == '-' ? 1 : 0;
  if (text.size() == digits_from) refuse();
  for (std::size_t i = digits_from; i < text.size(); ++i) {
    if (!is_digit(text[i])) refuse();
  }
  std::int64_t value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc() || end != text.data() + text.size()) refuse();
  if (value < minimum || value > maximum) refuse();
  return value;
}

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what) {
  return quota::parse_duration(text, what);
}

std::string format_period(std::chrono::milliseconds period) {
  for (const auto& [name, size] : kUnits) {
    if (period.count() % size == 0) return fmt::format("{}{}", period.count() / size, name);
  }
  return fmt::format("{}ms", period.count());
}

std::string format_period_at_most(milliseconds longest, std::string_view typed) {
  std::size_t digits = 0;
  while (digits < typed.size() && is_digit(typed[digits])) ++digits;
  std::size_t letters = digits;
  while (letters < typed.size() && !is_digit(typed[letters])) ++letters;
  std::string_view typed_unit = typed.substr(digits, letters - digits);
  if (typed_unit == "w") typed_unit = "d";
  if (typed_unit == "min") typed_unit = "m";
  bool below_typed = false;  // the units from the typed one down, largest first
  for (const auto& [name, size] : kUnits) {
    below_typed = below_typed || name == typed_unit;
    if (below_typed && longest.count() >= size) {
      return fmt::format("{}{}", longest.count() / size, name);
    }
  }
  return fmt::format("{}ms", std::max<std::int64_t>(longest.count(), 1));
}

std::string replayed_note(const quota::Result& result) {
  return result.replayed ? " [replayed: the answer stored with this key; nothing charged]" : "";
}

std::string format_duration(std::int64_t milliseconds) {
  if (milliseconds < 0) return "never";
  if (milliseconds < 1000) return fmt::format("{}ms", milliseconds);
  std::string text;
  std::int64_t rest = milliseconds;
  for (const auto& [name, size] : kUnits) {
    if (size < 60'000) break;
    if (rest >= size) {
      text += fmt::format("{}{} ", rest / size, name);
      rest %= size;
    }
  }
  if (rest > 0) {
    std::string seconds = fmt::format("{}.{:03}", rest / 1000, rest % 1000);
    while (seconds.back() == '0') seconds.pop_back();
    if (seconds.back() == '.') seconds.pop_back();
    text += seconds + "s";
  }
  if (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string format_time(std::int64_t unix_ms) {
  using namespace std::chrono;
  const sys_time<milliseconds> time{milliseconds{unix_ms}};
  const auto day = floor<days>(time);
  const year_month_day date{day};
  const hh_mm_ss clock{time - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                     clock.hours().count(), clock.minutes().count(), clock.seconds().count(),
                     clock.subseconds().count());
}

namespace {

constexpr std::string_view kPeriodForms =
    "use a DURATION, a whole number and a unit ms, s, m (or min), h, d or w (500ms, 30s, 1m, "
    "1h, 1d, 1w; several from the largest down, 1h30m; at most 366d), or a calendar unit "
    "without a number: day, week, month or year";

bool is_duration_unit(std::string_view unit) {
  return unit == "w" || unit == "min" ||
         std::any_of(kUnits.begin(), kUnits.end(),
                     [&](const auto& entry) { return entry.first == unit; });
}

// "+HH:MM" or "-HH:MM" with HH and MM two digits each, MM up to 59: the offset in minutes
// (unbounded), or nullopt.
std::optional<std::chrono::minutes> read_offset(std::string_view text) {
  if (text.size() != 6 || (text[0] != '+' && text[0] != '-') || text[3] != ':') return {};
  for (std::size_t i : {1, 2, 4, 5}) {
    if (!is_digit(text[i])) return {};
  }
  const int hours = (text[1] - '0') * 10 + (text[2] - '0');
  const int minutes = (text[4] - '0') * 10 + (text[5] - '0');
  if (minutes > 59) return {};
  const std::chrono::minutes offset{hours * 60 + minutes};
  return text[0] == '-' ? -offset : offset;
}

// The decimal number of text[from, from + count), all digits, or -1.
int read_digits(std::string_view text, std::size_t from, std::size_t count) {
  if (from + count > text.size()) return -1;
  int value = 0;
  for (std::size_t i = from; i < from + count; ++i) {
    if (!is_digit(text[i])) return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

// "09:30", "09:30:15", "09:30:15.250": a time of day, its seconds and milliseconds only
// when there are any.
std::string format_time_of_day(std::chrono::milliseconds since_midnight) {
  const std::chrono::hh_mm_ss clock{since_midnight};
  std::string text = fmt::format("{:02}:{:02}", clock.hours().count(), clock.minutes().count());
  if (clock.seconds().count() != 0 || clock.subseconds().count() != 0) {
    text += fmt::format(":{:02}", clock.seconds().count());
  }
  if (clock.subseconds().count() != 0) text += fmt::format(".{:03}", clock.subseconds().count());
  return text;
}

// "1st", "2nd", "3rd", "4th", "11th", "21st", "31st".
std::string ordinal(unsigned day) {
  const unsigned tens = day % 100 / 10;
  const unsigned ones = day % 10;
  const char* suffix = tens == 1   ? "th"
                       : ones == 1 ? "st"
                       : ones == 2 ? "nd"
                       : ones == 3 ? "rd"
                                   : "th";
  return fmt::format("{}{}", day, suffix);
}

constexpr std::array<std::string_view, 7> kWeekdays{"Monday", "Tuesday",  "Wednesday", "Thursday",
                                                    "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths{"January",   "February", "March",    "April",
                                                   "May",       "June",     "July",     "August",
                                                   "September", "October",  "November", "December"};

}  // namespace

Period parse_period(std::string_view text, std::string_view what) {
  if (const std::optional<quota::Calendar> calendar = quota::parse_calendar(text)) {
    return {milliseconds{0}, calendar};
  }
  std::size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) ++digits;
  const std::string_view unit = text.substr(digits);
  if (digits > 0 && quota::parse_calendar(unit)) {
    invalid(
        fmt::format("invalid period '{}' for {}: a calendar unit is written without a number "
                    "(--per {}); a DURATION's units are ms, s, m (or min), h, d and w",
                    quota::bounded(text), what, unit));
  }
  if (digits == 0) {
    invalid(fmt::format("invalid period '{}' for {}{}: {}", quota::bounded(text), what,
                        did_you_mean(text, {"day", "week", "month", "year"}), kPeriodForms));
  }
  if (std::find_if(unit.begin(), unit.end(), is_digit) == unit.end() && !is_duration_unit(unit)) {
    invalid(
        fmt::format("invalid period '{}' for {}: {}", quota::bounded(text), what, kPeriodForms));
  }
  return {parse_duration(text, what), std::nullopt};
}

std::chrono::minutes parse_utc_offset(std::string_view text, std::string_view what) {
  const std::optional<std::chrono::minutes> offset = read_offset(text);
  if (!offset) {
    invalid(
        fmt::format("invalid UTC offset '{}' for {}: use +HH:MM or -HH:MM, from -14:00 to "
                    "+14:00 (+09:00, -05:30; +00:00 for UTC)",
                    quota::bounded(text), what));
  }
  if (std::chrono::abs(*offset) > quota::kUtcOffsetBound) {
    invalid(fmt::format("invalid UTC offset '{}' for {}: offsets go from -14:00 to +14:00",
                        quota::bounded(text), what));
  }
  return *offset;
}

std::string format_utc_offset(std::chrono::minutes offset) {
  const std::int64_t minutes = std::abs(offset.count());
  return fmt::format("{}{:02}:{:02}", offset.count() < 0 ? '-' : '+', minutes / 60, minutes % 60);
}

std::int64_t parse_instant(std::string_view text, std::string_view what) {
  using namespace std::chrono;
  constexpr std::string_view kForm =
      "use an ISO-8601 instant, a date, T, a time and Z or an offset: 2026-03-17T09:30:00Z, "
      "2026-03-17T09:30:00.250Z or 2026-03-17T09:30:00+09:00";
  const auto refuse = [&](std::string_view why) {
    invalid(fmt::format("invalid instant '{}' for {}: {}", quota::bounded(text), what, why));
  };
  // YYYY-MM-DDTHH:MM:SS
  const int year = read_digits(text, 0, 4);
  const int month = read_digits(text, 5, 2);
  const int day = read_digits(text, 8, 2);
  const bool has_date = year >= 0 && month >= 0 && day >= 0 && text[4] == '-' && text[7] == '-';
  if (has_date && text.size() == 10) {
    refuse(
        fmt::format("a date alone is not an instant; give its time and offset too, e.g. "
                    "{}T00:00:00Z or {}T00:00:00+09:00",
                    text, text));
  }
  const int hour = read_digits(text, 11, 2);
  const int minute = read_digits(text, 14, 2);
  const int second = read_digits(text, 17, 2);
  if (!has_date || text.size() < 19 || text[10] != 'T' || hour < 0 || text[13] != ':' ||
      minute < 0 || text[16] != ':' || second < 0) {
    refuse(kForm);
  }
  std::size_t at = 19;
  std::int64_t fraction_ms = 0;
  if (at < text.size() && text[at] == '.') {
    std::size_t digits = 0;
    while (at + 1 + digits < text.size() && is_digit(text[at + 1 + digits])) ++digits;
    if (digits == 0 || digits > 3) {
      refuse("the fraction of a second is 1 to 3 digits (milliseconds), e.g. .250");
    }
    fraction_ms = read_digits(text, at + 1, digits);
    for (std::size_t i = digits; i < 3; ++i) fraction_ms *= 10;
    at += 1 + digits;
  }
  const std::string_view zone = text.substr(at);
  if (zone.empty()) {
    refuse(
        fmt::format("an instant needs its offset: add Z for UTC or +HH:MM / -HH:MM, e.g. "
                    "{}Z",
                    text));
  }
  std::optional<minutes> offset = zone == "Z" ? std::optional<minutes>{0} : read_offset(zone);
  if (!offset) refuse(kForm);
  if (abs(*offset) > quota::kUtcOffsetBound) refuse("offsets go from -14:00 to +14:00");
  const year_month_day date{std::chrono::year{year},
                            std::chrono::month{static_cast<unsigned>(month)},
                            std::chrono::day{static_cast<unsigned>(day)}};
  if (!date.ok()) refuse(fmt::format("{} is not a date", text.substr(0, 10)));
  if (hour > 23 || minute > 59 || second > 59) {
    refuse(fmt::format("{} is not a time of day (00:00:00 to 23:59:59)", text.substr(11, 8)));
  }
  const std::int64_t unix_ms =
      duration_cast<milliseconds>(sys_days{date}.time_since_epoch() + hours{hour} +
                                  minutes{minute} + seconds{second} - *offset)
          .count() +
      fraction_ms;
  if (unix_ms < 0 || unix_ms >= quota::kAnchorBound) {
    refuse("an instant goes from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z");
  }
  return unix_ms;
}

std::string format_local_time(std::int64_t unix_ms, std::chrono::minutes offset) {
  using namespace std::chrono;
  const sys_time<milliseconds> local{milliseconds{unix_ms} + offset};
  const auto day = floor<days>(local);
  const year_month_day date{day};
  return fmt::format("{:04}-{:02}-{:02} {} {}", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                     format_time_of_day(local - day), format_utc_offset(offset));
}

std::string describe_window_start(quota::Calendar calendar, std::chrono::minutes offset,
                                  std::optional<std::int64_t> anchor_ms) {
  using namespace std::chrono;
  // The anchor's place in the calendar at the offset; without one, the unit's own start.
  milliseconds time_of_day{0};
  weekday week_day = Monday;
  year_month_day date = January / 1 / 1970;
  if (anchor_ms) {
    const sys_time<milliseconds> local{milliseconds{*anchor_ms} + offset};
    const sys_days day = floor<days>(local);
    time_of_day = local - day;
    week_day = weekday{day};
    date = year_month_day{day};
  }
  const std::string time = format_time_of_day(time_of_day);
  const std::string zone = offset.count() == 0 ? "UTC" : "UTC" + format_utc_offset(offset);
  switch (calendar) {
    case quota::Calendar::day:
      return fmt::format("{} {}", time, zone);
    case quota::Calendar::week:
      return fmt::format("{} {} {}", kWeekdays[week_day.iso_encoding() - 1], time, zone);
    case quota::Calendar::month: {
      const unsigned day_of_month = static_cast<unsigned>(date.day());
      return fmt::format("the {} {} {}{}", ordinal(day_of_month), time, zone,
                         day_of_month > 28 ? " or the month's last day" : "");
    }
    case quota::Calendar::year: {
      const bool leap_day = date.month() == February && date.day() == std::chrono::day{29};
      return fmt::format("{} {} {} {}{}", static_cast<unsigned>(date.day()),
                         kMonths[static_cast<unsigned>(date.month()) - 1], time, zone,
                         leap_day ? " or 28 February" : "");
    }
  }
  return zone;
}

std::string format_limit_period(const quota::Limit& limit) {
  return limit.calendar ? std::string(quota::to_string(*limit.calendar))
                        : format_period(limit.period);
}

std::string describe_limit(const quota::Limit& limit) {
  if (limit.algorithm == quota::Algorithm::concurrency) {
    return fmt::format("{} at once, leases of {} (concurrency{}{})", limit.maximum,
                       format_period(limit.period),
                       limit.block ? fmt::format(", blocks for {} after a denial",
                                                 format_period(*limit.block))
                                   : "",
                       limit.shadow ? ", shadow mode" : "");
  }
  std::string text = fmt::format("{} per {} ({}", limit.maximum, format_limit_period(limit),
                                 quota::to_string(limit.algorithm));
  if (limit.calendar) {
    text += ", from " + describe_window_start(*limit.calendar, limit.utc_offset, limit.anchor_ms);
  }
  if (limit.burst) text += fmt::format(", burst {}", *limit.burst);
  if (limit.block)
    text += fmt::format(", blocks for {} after a denial", format_period(*limit.block));
  if (limit.shadow) text += ", shadow mode";
  return text + ")";
}

std::string printable(std::string_view text, std::size_t max_characters) {
  std::string result;
  std::size_t characters = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool starts_character = (byte & 0xC0) != 0x80;
    if (starts_character && ++characters > max_characters) {
      result += "…";
      break;
    }
    if (byte < 0x20 || byte == 0x7F) {
      result += fmt::format("\\x{:02x}", byte);
    } else {
      result += static_cast<char>(byte);
    }
  }
  return result;
}

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view prefix) {
  const std::vector<std::string> closest = likely_meant(word, candidates);
  if (closest.empty()) return "";
  std::string text = " (did you mean ";
  for (std::size_t i = 0; i < closest.size(); ++i) {
    if (i > 0) text += i + 1 == closest.size() ? " or " : ", ";
    text += fmt::format("'{}{}'", prefix, closest[i]);
  }
  return text + "?)";
}

}  // namespace quotactl

namespace quotactl {

std::string bar(std::int64_t part, std::int64_t whole, int width) {
  // part < whole here, so part * width cannot overflow.
  const std::int64_t filled = part >= whole ? width
                              : part <= 0   ? 0
                                            : (part * width + whole - 1) / whole;
  return std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '.');
}

std::string format_table(const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_aligned) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], display_width(row[column]));
    }
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t column = 0; column < row.size(); ++column) {
      const std::string padding(widths[column] - display_width(row[column]), ' ');
      const bool right = column < right_aligned.size() && right_aligned[column];
      if (column > 0) line += "  ";
      line += right ? padding + row[column] : row[column] + padding;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + '\n';
  }
  return text;
}

}  // namespace quotactl
