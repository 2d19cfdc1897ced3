// quota::Config: limits and overrides declared in TOML (include/quota/config.h), parsed with
// toml++ and refused whole, at the line and column of the first error, before anything is
// applied. The plan of Engine::apply (what differs between a Config and the database) is
// worked out here too (src/apply.h); the statements that carry it out are the engine's.
#include "quota/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include "apply.h"
#include "quota/error.h"

namespace quota {
namespace {

using std::chrono::milliseconds;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, message);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads one TOML document into a Config, throwing at the first error with its place.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Config read(const toml::table& document) {
    Config config;
    for (auto&& [key, node] : document) {
      if (key.str() == "limit") {
        for_each_table(node, "limit", [&](const toml::table& table) {
          config.limits.push_back(read_limit(table));
        });
      } else if (key.str() == "override") {
        for_each_table(node, "override", [&](const toml::table& table) {
          config.overrides.push_back(read_override(table, config));
        });
      } else {
        unknown_key(key, {"limit", "override"}, "at the top level");
      }
    }
    return config;
  }

  [[noreturn]] void fail(const toml::source_region& where, std::string_view message) const {
    invalid(fmt::format("{}:{}:{}: {}", source_, where.begin.line, where.begin.column, message));
  }

 private:
  template <typename Function>
  void for_each_table(const toml::node& node, std::string_view name, Function&& function) {
    const toml::array* array = node.as_array();
    if (!array || !array->is_array_of_tables()) {
      fail(node.source(), fmt::format("'{}' is a list of tables: write each as [[{}]] followed "
                                      "by its keys",
                                      name, name));
    }
    for (const toml::node& element : *array) function(*element.as_table());
  }

  [[noreturn]] void unknown_key(const toml::key& key, const std::vector<std::string>& known,
                                std::string_view where) const {
    const std::vector<std::string> meant = likely_meant(key.str(), known);
    std::string accepted;
    for (const std::string& name : known) accepted += (accepted.empty() ? "" : ", ") + name;
    fail(key.source(),
         fmt::format("unknown key '{}' {}{}; the keys are {}", bounded(key.str()), where,
                     meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant.front()),
                     accepted));
  }

  // Every key of `table` must be one of `known`.
  void require_known(const toml::table& table, const std::vector<std::string>& known,
                     std::string_view where) const {
    for (auto&& [key, node] : table) {
      (void)node;
      if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
        unknown_key(key, known, where);
      }
    }
  }

  const toml::node& required(const toml::table& table, std::string_view key,
                             std::string_view where) const {
    const toml::node* node = table.get(key);
    if (!node) fail(table.source(), fmt::format("{} lacks '{}'", where, key));
    return *node;
  }

  std::string text(const toml::node& node, std::string_view key) const {
    const std::optional<std::string> value = node.value_exact<std::string>();
    if (!value) fail(node.source(), fmt::format("'{}' is {}: give a string", key, type_of(node)));
    return *value;
  }

  std::int64_t whole(const toml::node& node, std::string_view key, std::int64_t minimum,
                     std::int64_t maximum) const {
    const std::optional<std::int64_t> value = node.value_exact<std::int64_t>();
    if (!value) {
      fail(node.source(), fmt::format("'{}' is {}: give a whole number from {} to {}", key,
                                      type_of(node), minimum, maximum));
    }
    if (*value < minimum || *value > maximum) {
      fail(node.source(), fmt::format("'{}' is {}: give a whole number from {} to {}", key, *value,
                                      minimum, maximum));
    }
    return *value;
  }

  bool flag(const toml::node& node, std::string_view key) const {
    const std::optional<bool> value = node.value_exact<bool>();
    if (!value) fail(node.source(), fmt::format("'{}' is {}: give true or false", key, type_of(node)));
    return *value;
  }

  milliseconds duration(const toml::node& node, std::string_view key) const {
    const std::string value = text(node, key);
    try {
      return parse_duration(value, fmt::format("'{}'", key));
    } catch (const Error& error) {
      fail(node.source(), error.what());
    }
  }

  static std::string type_of(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a floating-point number";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::date: return "a date";
      case toml::node_type::time: return "a time";
      case toml::node_type::date_time: return "a date-time";
      case toml::node_type::array: return "an array";
      case toml::node_type::table: return "a table";
      default: return "nothing";
    }
  }

  // Calls `check` and refuses what it throws at `node`.
  template <typename Function>
  void at(const toml::node& node, Function&& check) const {
    try {
      check();
    } catch (const Error& error) {
      fail(node.source(), error.what());
    }
  }

  Limit read_limit(const toml::table& table) {
    require_known(table,
                  {"name", "algorithm", "max", "per", "ttl", "burst", "shadow", "block",
                   "utc_offset", "anchor"},
                  "in a [[limit]]");
    const toml::node& name_node = required(table, "name", "a [[limit]]");
    Limit limit;
    limit.name = text(name_node, "name");
    at(name_node, [&] { validate_limit_name(limit.name); });
    const std::string where = fmt::format("[[limit]] '{}'", limit.name);
    if (const auto first = limit_names_.find(limit.name); first != limit_names_.end()) {
      fail(name_node.source(),
           fmt::format("limit '{}' is declared twice (first at line {}): give each limit once",
                       limit.name, first->second));
    }
    limit_names_.emplace(limit.name, name_node.source().begin.line);
    // quotactl takes a name that differs from a stored one only in case for a typo of it; a
    // file that declares both would make two limits that every message confuses.
    std::string folded = limit.name;
    std::transform(folded.begin(), folded.end(), folded.begin(), [](unsigned char c) {
      return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    });
    const auto [other, first_of_case] =
        folded_names_.emplace(folded, std::pair{limit.name, name_node.source().begin.line});
    if (!first_of_case) {
      fail(name_node.source(),
           fmt::format("limit '{}' differs from limit '{}' (line {}) only in case: names that "
                       "differ only in case are taken for one another; rename one",
                       limit.name, other->second.first, other->second.second));
    }
    if (const toml::node* node = table.get("algorithm")) {
      const std::string name = text(*node, "algorithm");
      const std::optional<Algorithm> algorithm = parse_algorithm(name);
      if (!algorithm) {
        const std::vector<std::string> meant = likely_meant(
            name, {"sliding_log", "fixed_window", "sliding_window", "token_bucket", "concurrency"});
        fail(node->source(),
             fmt::format("unknown algorithm '{}'{}: use sliding_log, fixed_window, "
                         "sliding_window, token_bucket or concurrency",
                         bounded(name),
                         meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant.front())));
      }
      limit.algorithm = *algorithm;
    }
    const toml::node& max_node = required(table, "max", where);
    const std::int64_t maximum = whole(max_node, "max", 1, kMaximumBound);
    if (const toml::node* ttl_node = table.get("ttl")) {
      // A concurrency limit: `ttl` (how long a lease lives), which implies the algorithm.
      if (table.get("algorithm") && limit.algorithm != Algorithm::concurrency) {
        fail(ttl_node->source(),
             fmt::format("'ttl' is only for concurrency limits; {} is {}: give it a period "
                         "with 'per', or algorithm = \"concurrency\"",
                         where, to_string(limit.algorithm)));
      }
      limit.algorithm = Algorithm::concurrency;
    }
    if (limit.algorithm == Algorithm::concurrency) {
      return read_concurrency_limit(table, std::move(limit), maximum, where);
    }
    const toml::node& per_node = required(table, "per", where);
    const std::string per = text(per_node, "per");
    if (const std::optional<Calendar> calendar = parse_calendar(per)) {
      if (table.get("algorithm") && limit.algorithm != Algorithm::fixed_window) {
        fail(per_node.source(),
             fmt::format("calendar periods count only with fixed_window: per = \"{}\" takes "
                         "algorithm \"fixed_window\" (or none), not \"{}\"",
                         per, to_string(limit.algorithm)));
      }
      std::chrono::minutes offset{0};
      if (const toml::node* node = table.get("utc_offset")) offset = utc_offset(*node);
      std::optional<std::int64_t> anchor;
      if (const toml::node* node = table.get("anchor")) anchor = anchor_ms(*node);
      Limit calendar_one = calendar_limit(limit.name, maximum, *calendar, offset, anchor);
      limit = std::move(calendar_one);
    } else {
      for (const char* key : {"utc_offset", "anchor"}) {
        if (const toml::node* node = table.get(key)) {
          fail(node->source(),
               fmt::format("'{}' needs a calendar period: per = \"day\", \"week\", \"month\" "
                           "or \"year\"",
                           key));
        }
      }
      limit.maximum = maximum;
      limit.period = duration(per_node, "per");
    }
    if (const toml::node* node = table.get("burst")) {
      if (limit.algorithm != Algorithm::token_bucket) {
        fail(node->source(), fmt::format("'burst' is only for a token_bucket; {} is {}", where,
                                         to_string(limit.algorithm)));
      }
      limit.burst = whole(*node, "burst", 1, kMaximumBound);
    }
    if (const toml::node* node = table.get("shadow")) limit.shadow = flag(*node, "shadow");
    if (const toml::node* node = table.get("block")) limit.block = duration(*node, "block");
    // What is left is the numbers together (64-bit arithmetic): refused at `max`.
    at(max_node, [&] { validate_limit(limit); });
    // As the database holds it: a token bucket's burst is its capacity.
    if (limit.algorithm == Algorithm::token_bucket && !limit.burst) limit.burst = limit.maximum;
    return limit;
  }

  // A concurrency limit's keys after `max`: `ttl` (1s to 1d), `block` and `shadow`; no `per`,
  // `burst` or calendar.
  Limit read_concurrency_limit(const toml::table& table, Limit limit, std::int64_t maximum,
                               const std::string& where) const {
    for (const char* key : {"per", "burst", "utc_offset", "anchor"}) {
      if (const toml::node* node = table.get(key)) {
        fail(node->source(),
             fmt::format("a concurrency limit takes no '{}'; {} holds at most 'max' units at "
                         "once, each lease living 'ttl' (\"30s\") unless renewed: drop '{}'",
                         key, where, key));
      }
    }
    const toml::node* ttl_node = table.get("ttl");
    if (!ttl_node) {
      fail(table.source(), fmt::format("{} is a concurrency limit and lacks 'ttl': give how long "
                                       "a lease lives unless renewed, ttl = \"30s\" (1s to 1d)",
                                       where));
    }
    limit.maximum = maximum;
    limit.period = duration(*ttl_node, "ttl");
    if (const toml::node* node = table.get("shadow")) limit.shadow = flag(*node, "shadow");
    if (const toml::node* node = table.get("block")) limit.block = duration(*node, "block");
    at(*ttl_node, [&] { validate_limit(limit); });
    return limit;
  }

  std::chrono::minutes utc_offset(const toml::node& node) const {
    const std::string value = text(node, "utc_offset");
    const auto refuse = [&] {
      fail(node.source(),
           fmt::format("invalid utc_offset '{}': use \"+HH:MM\" or \"-HH:MM\", from -14:00 to "
                       "+14:00",
                       bounded(value)));
    };
    if (value.size() != 6 || (value[0] != '+' && value[0] != '-') || value[3] != ':') refuse();
    for (std::size_t i : {1, 2, 4, 5}) {
      if (!is_digit(value[i])) refuse();
    }
    const int hours = (value[1] - '0') * 10 + (value[2] - '0');
    const int minutes = (value[4] - '0') * 10 + (value[5] - '0');
    if (minutes > 59) refuse();
    const std::chrono::minutes offset{hours * 60 + minutes};
    if (offset > kUtcOffsetBound) refuse();
    return value[0] == '-' ? -offset : offset;
  }

  // A TOML offset date-time (2026-03-17T09:30:00Z) or Unix ms.
  std::int64_t anchor_ms(const toml::node& node) const {
    std::int64_t ms = 0;
    if (const auto* integer = node.as_integer()) {
      ms = integer->get();
    } else if (const auto* instant = node.as_date_time(); instant && instant->get().offset) {
      const toml::date_time& value = instant->get();
      using namespace std::chrono;
      const sys_days day{year{value.date.year} / month{value.date.month} / value.date.day};
      ms = duration_cast<milliseconds>(day.time_since_epoch()).count() +
           ((value.time.hour * 60 + value.time.minute - value.offset->minutes) * 60 +
            value.time.second) *
               std::int64_t{1000} +
           value.time.nanosecond / 1'000'000;
    } else {
      fail(node.source(),
           fmt::format("'anchor' is {}: give a date-time with an offset "
                       "(2026-03-17T09:30:00Z, 2026-03-17T09:30:00+09:00) or Unix ms",
                       node.is_date_time() ? "a date-time without an offset" : type_of(node)));
    }
    at(node, [&] { validate_anchor(ms); });
    return ms;
  }

  Override read_override(const toml::table& table, const Config& config) {
    require_known(table, {"limit", "owner", "policy", "max", "burst"}, "in an [[override]]");
    const toml::node& limit_node = required(table, "limit", "an [[override]]");
    const toml::node& owner_node = required(table, "owner", "an [[override]]");
    Override entry;
    entry.limit = text(limit_node, "limit");
    entry.owner = text(owner_node, "owner");
    at(owner_node, [&] { validate_owner(entry.owner); });
    const auto declared =
        std::find_if(config.limits.begin(), config.limits.end(),
                     [&](const Limit& limit) { return limit.name == entry.limit; });
    if (entry.limit != kEveryLimit && declared == config.limits.end()) {
      std::vector<std::string> names;
      for (const Limit& limit : config.limits) names.push_back(limit.name);
      const std::vector<std::string> meant = likely_meant(entry.limit, names);
      fail(limit_node.source(),
           fmt::format("the override names limit '{}', which this file does not declare{}: "
                       "declare it in a [[limit]] above, or use \"*\" for every limit",
                       bounded(entry.limit),
                       meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant.front())));
    }
    const std::string where = fmt::format("[[override]] of '{}' for '{}'", entry.limit,
                                          bounded(entry.owner));
    const auto key = std::pair{entry.limit, entry.owner};
    if (const auto first = override_keys_.find(key); first != override_keys_.end()) {
      fail(owner_node.source(),
           fmt::format("{} is declared twice (first at line {}): give each once", where,
                       first->second));
    }
    override_keys_.emplace(key, owner_node.source().begin.line);
    if (const toml::node* node = table.get("policy")) {
      const std::string name = text(*node, "policy");
      const std::optional<Policy> policy = parse_policy(name);
      if (!policy) {
        fail(node->source(), fmt::format("unknown policy '{}': use maximum, exempt or deny",
                                         bounded(name)));
      }
      entry.policy = *policy;
    }
    const toml::node* max_node = table.get("max");
    const toml::node* burst_node = table.get("burst");
    if (entry.policy == Policy::maximum) {
      if (!max_node) fail(table.source(), fmt::format("{} lacks 'max' (or policy = \"exempt\" "
                                                      "or \"deny\")",
                                                      where));
      entry.maximum = whole(*max_node, "max", 1, kMaximumBound);
      if (burst_node) entry.burst = whole(*burst_node, "burst", 1, kMaximumBound);
    } else if (max_node || burst_node) {
      fail((max_node ? max_node : burst_node)->source(),
           fmt::format("policy \"{}\" takes no 'max' or 'burst'", to_string(entry.policy)));
    }
    at(limit_node, [&] { validate_override(entry); });
    if (declared != config.limits.end()) {
      at(max_node ? *max_node : limit_node, [&] { detail::validate_override_fits(*declared, entry); });
    }
    return entry;
  }

  std::string source_;
  std::map<std::string, std::uint32_t> limit_names_;  // name -> line
  // lower-case name -> the name as declared, and its line
  std::map<std::string, std::pair<std::string, std::uint32_t>> folded_names_;
  std::map<std::pair<std::string, std::string>, std::uint32_t> override_keys_;
};

// The configuration file's descriptor, closed when the reading is done.
struct OwnedDescriptor {
  explicit OwnedDescriptor(int descriptor) : fd(descriptor) {}
  OwnedDescriptor(const OwnedDescriptor&) = delete;
  OwnedDescriptor& operator=(const OwnedDescriptor&) = delete;
  ~OwnedDescriptor() { ::close(fd); }
  int fd;
};

enum class Kind { regular, pipe };

[[noreturn]] void too_large(std::string_view source) {
  invalid(fmt::format("configuration file '{}' is larger than {} MiB: a configuration of limits "
                      "is far smaller; check that it is the right file",
                      source, kConfigurationBound >> 20));
}

// What a configuration may be read from: a regular file or a pipe (FIFO). Anything else is
// refused: a device may never end (/dev/zero) or wait for a person (a terminal).
Kind require_readable_kind(int fd, std::string_view source) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    throw Error(ErrorCode::io, fmt::format("cannot read configuration file '{}': {}; nothing was "
                                           "changed",
                                           source, std::strerror(errno)));
  }
  if (S_ISREG(status.st_mode)) {
    if (static_cast<std::uintmax_t>(status.st_size) > kConfigurationBound) too_large(source);
    return Kind::regular;
  }
  if (S_ISFIFO(status.st_mode)) return Kind::pipe;
  const char* what = S_ISDIR(status.st_mode)    ? "a directory"
                     : ::isatty(fd)             ? "a terminal"
                     : S_ISCHR(status.st_mode)  ? "a character device"
                     : S_ISBLK(status.st_mode)  ? "a block device"
                     : S_ISSOCK(status.st_mode) ? "a socket"
                                                : "not a regular file";
  invalid(fmt::format("configuration file '{}' is {}: give the path of a TOML file (a regular "
                      "file), or pipe it to standard input ('-')",
                      source, what));
}

// Waits until a writer has opened the named pipe `fd` and written or closed it, for at most
// `bound`: a pipe that no writer opens is refused rather than read as an empty file.
void wait_for_writer(int fd, std::string_view source, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd waiting{fd, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(std::clamp<std::int64_t>(
                                              left.count(), 0, std::int64_t{1} << 30)));
    if (ready > 0) return;  // data, or a writer that closed (POLLHUP)
    if (ready < 0 && errno != EINTR) {
      throw Error(ErrorCode::io, fmt::format("cannot read configuration file '{}': {}; nothing "
                                             "was changed",
                                             source, std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(ErrorCode::io,
                  fmt::format("configuration file '{}' is a named pipe that no writer opened "
                              "within {} ms: start the program that writes it first, or give a "
                              "regular file; nothing was changed",
                              source, bound.count()));
    }
  }
}

// Everything `fd` holds from its offset to its end. A read error is an error, never the end
// of the file; more than kConfigurationBound bytes are refused as soon as they are seen.
std::string read_whole(int fd, std::string_view source) {
  std::string text;
  std::array<char, 65536> buffer;
  for (;;) {
    // At most one byte beyond the bound: enough to know the file is too large.
    const std::size_t wanted = std::min(buffer.size(), kConfigurationBound + 1 - text.size());
    const ssize_t got = ::read(fd, buffer.data(), wanted);
    if (got > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(got));
      if (text.size() > kConfigurationBound) too_large(source);
    } else if (got == 0) {
      return text;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // A non-blocking descriptor (standard input may be one): wait for more.
      pollfd waiting{fd, POLLIN, 0};
      ::poll(&waiting, 1, -1);
    } else if (errno != EINTR) {
      throw Error(ErrorCode::io,
                  fmt::format("cannot read configuration file '{}' (after {} bytes): {}; "
                              "nothing was changed",
                              source, text.size(), std::strerror(errno)));
    }
  }
}

}  // namespace

Config Config::parse(std::string_view text, std::string_view source) {
  Reader reader(source);
  toml::table document;
  try {
    document = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    reader.fail(error.source(), fmt::format("invalid TOML: {}", error.description()));
  }
  return reader.read(document);
}

Config Config::load(const std::string& path, std::chrono::milliseconds writer_wait) {
  // Without O_NONBLOCK, opening a named pipe would wait for a writer with no bound.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      invalid(fmt::format("configuration file '{}' does not exist: give the path of a TOML file "
                          "of [[limit]] tables (docs/operating.md)",
                          path));
    }
    throw Error(ErrorCode::io, fmt::format("cannot open configuration file '{}': {}; nothing was "
                                           "changed",
                                           path, std::strerror(error)));
  }
  const OwnedDescriptor owned{fd};
  if (require_readable_kind(fd, path) == Kind::pipe) {
    wait_for_writer(fd, path, writer_wait);
    // A writer is there (or was, and left): read as a pipe is read, until every writer closes.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  return parse(read_whole(fd, path), path);
}

Config Config::read(int fd, std::string_view source) {
  require_readable_kind(fd, source);
  return parse(read_whole(fd, source), source);
}

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what) {
  const auto refuse = [&](std::string_view why) {
    invalid(fmt::format("invalid duration '{}' for {}: {}", bounded(text), what, why));
  };
  // The units a DURATION is written in, largest first; `m` and `min` are both minutes.
  constexpr std::array<std::pair<std::string_view, std::int64_t>, 7> kWritten{{
      {"w", 604'800'000},
      {"d", 86'400'000},
      {"h", 3'600'000},
      {"m", 60'000},
      {"min", 60'000},
      {"s", 1'000},
      {"ms", 1},
  }};
  constexpr std::string_view kAccepted =
      "use a whole number and a unit ms, s, m (or min), h, d or w (500ms, 30s, 1m, 1h, 1d, 1w), "
      "or several from the largest unit down (1h30m, 2d12h)";
  constexpr std::string_view kLongest = "the longest duration is 366d";
  if (text.empty()) refuse(kAccepted);
  std::int64_t total = 0;
  std::int64_t previous_unit = 0;  // the last part's unit, 0 before the first
  std::string_view previous_name;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t digits = at;
    while (digits < text.size() && is_digit(text[digits])) ++digits;
    std::size_t letters = digits;
    while (letters < text.size() && text[letters] >= 'a' && text[letters] <= 'z') ++letters;
    const std::string_view number = text.substr(at, digits - at);
    const std::string_view unit = text.substr(digits, letters - digits);
    std::int64_t unit_ms = 0;
    for (const auto& [name, size] : kWritten) {
      if (unit == name) unit_ms = size;
    }
    if (number.empty() || unit_ms == 0) refuse(kAccepted);
    if (previous_unit != 0 && unit_ms >= previous_unit) {
      refuse(
          fmt::format("'{}' after '{}': {} a unit once, from the largest down (1h30m, not "
                      "30m1h or 1h1h)",
                      unit, previous_name, unit_ms == previous_unit ? "give" : "write"));
    }
    // More than 12 digits is beyond 366 days in any unit (and beyond what from_chars reads
    // into 64 bits, for very long numbers); the count is compared before it is multiplied,
    // which could overflow (366366366366d).
    if (number.size() > 12) refuse(kLongest);
    std::int64_t count = 0;
    std::from_chars(number.data(), number.data() + number.size(), count);
    if (count > kPeriodBound.count() / unit_ms) refuse(kLongest);
    total += count * unit_ms;
    if (total > kPeriodBound.count()) refuse(kLongest);
    previous_unit = unit_ms;
    previous_name = unit;
    at = letters;
  }
  if (total == 0) refuse("a duration is at least 1ms");
  return milliseconds{total};
}

std::string_view to_string(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::create: return "create";
    case ChangeKind::change: return "change";
    case ChangeKind::remove: return "remove";
  }
  return "create";
}

namespace detail {

void validate_override_fits(const Limit& limit, const Override& override) {
  if (!override.maximum) return;
  Limit as_owner_sees_it = limit;
  as_owner_sees_it.maximum = *override.maximum;
  if (limit.algorithm == Algorithm::token_bucket) {
    as_owner_sees_it.burst = override.burst.value_or(*override.maximum);
  } else {
    as_owner_sees_it.burst = override.burst;
  }
  try {
    validate_limit(as_owner_sees_it);
  } catch (const Error& error) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("the override for owner '{}' does not fit limit '{}': {}",
                            override.owner, override.limit, error.what()));
  }
}

std::vector<Change> plan_changes(const Config& config, const std::vector<Limit>& stored_limits,
                                 const std::vector<Override>& stored_overrides, bool prune) {
  std::vector<Change> changes;
  std::map<std::string_view, const Limit*> limits;
  for (const Limit& limit : stored_limits) limits.emplace(limit.name, &limit);
  for (const Limit& limit : config.limits) {
    const auto found = limits.find(limit.name);
    if (found == limits.end()) {
      changes.push_back({ChangeKind::create, std::nullopt, limit});
    } else if (!(*found->second == limit)) {
      changes.push_back({ChangeKind::change, *found->second, limit});
    }
  }
  std::map<std::pair<std::string_view, std::string_view>, const Override*> overrides;
  for (const Override& entry : stored_overrides) {
    overrides.emplace(std::pair<std::string_view, std::string_view>{entry.limit, entry.owner},
                      &entry);
  }
  for (const Override& entry : config.overrides) {
    const auto found = overrides.find({entry.limit, entry.owner});
    if (found == overrides.end()) {
      changes.push_back({ChangeKind::create, std::nullopt, std::nullopt, std::nullopt, entry});
    } else if (!(*found->second == entry)) {
      changes.push_back({ChangeKind::change, std::nullopt, std::nullopt, *found->second, entry});
    }
  }
  if (!prune) return changes;
  const auto declared_limit = [&](std::string_view name) {
    return std::any_of(config.limits.begin(), config.limits.end(),
                       [&](const Limit& limit) { return limit.name == name; });
  };
  for (const Override& entry : stored_overrides) {
    const bool declared = std::any_of(
        config.overrides.begin(), config.overrides.end(), [&](const Override& other) {
          return other.limit == entry.limit && other.owner == entry.owner;
        });
    // The overrides of a limit that goes go with it (shown with the limit's removal).
    if (!declared && (entry.limit == kEveryLimit || declared_limit(entry.limit))) {
      changes.push_back({ChangeKind::remove, std::nullopt, std::nullopt, entry});
    }
  }
  for (const Limit& limit : stored_limits) {
    if (!declared_limit(limit.name)) changes.push_back({ChangeKind::remove, limit});
  }
  return changes;
}

}  // namespace detail
}  // namespace quota
