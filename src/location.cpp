#include "location.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <vector>

#include "shown.h"

namespace quota::detail {

namespace {

// libpq 15's connection keywords: a string that begins with one of them and '=' is libpq's
// key=value form ("host=db dbname=quota"), not a file name.
constexpr std::string_view kLibpqKeywords[] = {
    "application_name", "channel_binding", "client_encoding", "connect_timeout",
    "dbname", "fallback_application_name", "gssencmode", "gsslib",
    "host", "hostaddr", "keepalives", "keepalives_count", "keepalives_idle",
    "keepalives_interval", "krbsrvname", "options", "passfile", "password", "port",
    "replication", "requirepeer", "service", "ssl_max_protocol_version",
    "ssl_min_protocol_version", "sslcert", "sslcompression", "sslcrl", "sslcrldir", "sslkey",
    "sslmode", "sslpassword", "sslrootcert", "sslsni", "target_session_attrs",
    "tcp_user_timeout", "user"};

constexpr std::string_view kWhatToWrite =
    "write postgresql://USER@HOST:PORT/DATABASE (or postgres://...; the password is best "
    "given in PGPASSWORD or ~/.pgpass), or libpq's form host=HOST dbname=DATABASE user=USER, "
    "or give a file name that does not begin with a scheme";

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

// Levenshtein distance, enough for a scheme against "postgresql" and "postgres".
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

bool is_libpq_keyword(std::string_view word) {
  return std::find(std::begin(kLibpqKeywords), std::end(kLibpqKeywords), word) !=
         std::end(kLibpqKeywords);
}

namespace {

bool is_postgresql_scheme(std::string_view scheme) {
  return scheme == "postgresql" || scheme == "postgres";
}

// A scheme that someone meant to be PostgreSQL's.
bool is_misspelled_postgresql(std::string_view scheme) {
  return scheme.rfind("pg", 0) == 0 || scheme.rfind("postg", 0) == 0 ||
         distance(scheme, "postgresql") <= 2 || distance(scheme, "postgres") <= 2;
}

// The scheme at the start of `text` (letters, then letters, digits, + - .), when a ':'
// follows it; empty otherwise.
std::string_view scheme_of(std::string_view text) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text[0]))) return {};
  std::size_t end = 1;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '+' || text[end] == '-' || text[end] == '.')) {
    ++end;
  }
  if (end >= text.size() || text[end] != ':') return {};
  return text.substr(0, end);
}

// The keyword of a `keyword =` at the start of `text` (after spaces), or empty.
std::string_view leading_key(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size() && is_space(text[begin])) ++begin;
  std::size_t end = begin;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '_')) {
    ++end;
  }
  if (end == begin) return {};
  std::size_t equals = end;
  while (equals < text.size() && is_space(text[equals])) ++equals;
  if (equals >= text.size() || text[equals] != '=') return {};
  return text.substr(begin, end - begin);
}

// libpq's key=value form: the first word is a keyword of libpq's, or the string is a list of
// `key=value` words of which one is (libpq then names the unknown key itself).
bool is_key_value_conninfo(std::string_view text) {
  const std::string_view first = leading_key(text);
  if (first.empty()) return false;
  if (is_libpq_keyword(first)) return true;
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (is_space(text[at]) && is_libpq_keyword(leading_key(text.substr(at)))) return true;
  }
  return false;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A URI component with its %HH escapes decoded, as SQLite decodes a URI's path and query.
std::string percent_decoded(std::string_view text) {
  std::string result;
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (text[at] == '%' && at + 2 < text.size() && hex_value(text[at + 1]) >= 0 &&
        hex_value(text[at + 2]) >= 0) {
      result += static_cast<char>(hex_value(text[at + 1]) * 16 + hex_value(text[at + 2]));
      at += 2;
    } else {
      result += text[at];
    }
  }
  return result;
}

// Whether SQLite, which reads a path beginning "file:" as a URI, opens `path` in memory:
// ":memory:" itself, a URI whose path is ":memory:", or one whose query says mode=memory.
bool is_in_memory(std::string_view path) {
  if (path == ":memory:") return true;
  if (path.substr(0, 5) != "file:") return false;
  std::string_view uri = path.substr(5);
  uri = uri.substr(0, uri.find('#'));
  const std::size_t question = uri.find('?');
  if (percent_decoded(uri.substr(0, question)) == ":memory:") return true;
  if (question == std::string_view::npos) return false;
  std::string_view query = uri.substr(question + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t equals = pair.find('=');
    if (equals != std::string_view::npos && percent_decoded(pair.substr(0, equals)) == "mode" &&
        percent_decoded(pair.substr(equals + 1)) == "memory") {
      return true;
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return false;
}

Location refused(const std::string& why) {
  Location location;
  location.kind = Location::Kind::refused;
  location.problem = fmt::format(
      "the database location is not a PostgreSQL connection string and is not taken for a "
      "SQLite file name: {}; {}",
      why, kWhatToWrite);
  return location;
}

}  // namespace

Location classify_location(std::string_view location) {
  if (const std::size_t nul = location.find('\0'); nul != std::string_view::npos) {
    Location result;
    result.kind = Location::Kind::refused;
    result.problem = fmt::format(
        "the database location contains a NUL byte (at byte {} of {}), which would cut it "
        "short: pass the path or connection string without NUL",
        nul, location.size());
    return result;
  }
  std::size_t lead = 0;
  while (lead < location.size() && is_space(location[lead])) ++lead;
  const std::string_view text = location.substr(lead);
  const std::string_view scheme = scheme_of(text);
  if (!scheme.empty()) {
    const std::string name = lower(scheme);
    const bool slashes = text.substr(scheme.size(), 3) == "://";
    if (is_postgresql_scheme(name) && slashes) {
      if (lead > 0) {
        return refused(fmt::format("it begins with {} white-space character{} before '{}://'",
                                   lead, lead == 1 ? "" : "s", name));
      }
      Location result;
      result.kind = Location::Kind::postgresql;
      result.text = name + std::string(text.substr(scheme.size()));
      return result;
    }
    if (is_postgresql_scheme(name)) {
      return refused(fmt::format("'{}:' is not followed by '//'", bounded(scheme)));
    }
    if (is_misspelled_postgresql(name)) {
      return refused(fmt::format("its scheme '{}:' is neither 'postgresql:' nor 'postgres:'",
                                 bounded(scheme)));
    }
    if (const std::string_view inner = scheme_of(text.substr(scheme.size() + 1));
        is_postgresql_scheme(lower(inner)) || is_misspelled_postgresql(lower(inner))) {
      return refused(
          fmt::format("'{}:' stands before '{}:' (a JDBC URL?)", bounded(scheme), bounded(inner)));
    }
    if (slashes && name != "file") {
      return refused(fmt::format("its scheme '{}://' is not one quota reads", bounded(scheme)));
    }
  }
  if (const std::string_view key = leading_key(location);
      !key.empty() && !is_libpq_keyword(key) && is_libpq_keyword(lower(key))) {
    return refused(
        fmt::format("its first key, {}, is one of libpq's keywords not in lower "
                    "case, the only case libpq reads",
                    bounded(key)));
  }
  if (is_key_value_conninfo(location)) {
    Location result;
    result.kind = Location::Kind::postgresql;
    result.text = std::string(location);
    return result;
  }
  Location result;
  result.text = std::string(location);
  result.in_memory = is_in_memory(location);
  return result;
}

}  // namespace quota::detail
