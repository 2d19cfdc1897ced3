#include "text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

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
    invalid(fmt::format("invalid {} '{}': use a whole number from {} to {}", what, text, minimum,
                        maximum));
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
  const auto refuse = [&](std::string_view why) {
    invalid(fmt::format("invalid duration '{}' for {}: {}", text, what, why));
  };
  constexpr std::string_view kAccepted =
      "use a whole number and a unit ms, s, m, h or d (500ms, 30s, 1m, 1h, 1d)";
  std::size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  std::int64_t unit_ms = 0;
  for (const auto& [name, size] : kUnits) {
    if (unit == name) unit_ms = size;
  }
  if (number.empty() || unit_ms == 0) refuse(kAccepted);
  // More than 12 digits is beyond 366 days in any unit (and beyond what from_chars reads into
  // 64 bits, for very long numbers); the count is compared before it is multiplied, which
  // could overflow (366366366366d).
  if (number.size() > 12) refuse("the longest duration is 366d");
  std::int64_t count = 0;
  std::from_chars(number.data(), number.data() + number.size(), count);
  if (count == 0) refuse("a duration is at least 1ms");
  if (count > quota::kPeriodBound.count() / unit_ms) refuse("the longest duration is 366d");
  return milliseconds{count * unit_ms};
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
  const std::string_view typed_unit = typed.substr(digits);
  bool below_typed = false;  // the units from the typed one down, largest first
  for (const auto& [name, size] : kUnits) {
    below_typed = below_typed || name == typed_unit;
    if (below_typed && longest.count() >= size) {
      return fmt::format("{}{}", longest.count() / size, name);
    }
  }
  return fmt::format("{}ms", std::max<std::int64_t>(longest.count(), 1));
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

std::string describe_limit(const quota::Limit& limit) {
  std::string text = fmt::format("{} per {} ({}", limit.maximum, format_period(limit.period),
                                 quota::to_string(limit.algorithm));
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

namespace {

// The optimal string alignment distance: Levenshtein's, with a swap of two neighbouring
// characters counting 1 (--cots for --cost).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::vector<std::string> likely_meant(std::string_view word,
                                      const std::vector<std::string>& candidates) {
  const std::size_t length = word.size() - std::min(word.find_first_not_of('-'), word.size());
  const std::size_t most = std::min<std::size_t>(length <= 4 ? 1 : 2, length - (length > 0));
  std::vector<std::string> closest;
  if (std::find(candidates.begin(), candidates.end(), word) != candidates.end()) return closest;
  std::size_t best = most;
  for (const std::string& candidate : candidates) {
    // The distance is at least the difference in length (and a long word is not compared).
    const std::size_t longer = std::max(word.size(), candidate.size());
    if (longer - std::min(word.size(), candidate.size()) > best) continue;
    const std::size_t distance = edit_distance(word, candidate);
    if (distance > best) continue;
    if (distance < best) closest.clear();
    best = distance;
    if (std::find(closest.begin(), closest.end(), candidate) == closest.end()) {
      closest.push_back(candidate);
    }
  }
  return closest;
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
