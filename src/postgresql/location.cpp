// What names a PostgreSQL database, and how it is shown: no libpq here, so that a build
// without the PostgreSQL backend still recognises such a location (and refuses it clearly).
#include <string>
#include <string_view>
#include <utility>

#include "postgresql/postgresql_store.h"

namespace quota::detail {

bool is_postgresql_uri(std::string_view location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

// Where the password of postgresql://user:password@host/... lies in `uri`: from the ':' after
// the user name to the last '@' before the query (the last '?'), or else to the last '@', so
// that a password holding a character the URI should have percent-encoded ('/', '?', '@',
// '#', ...) is still covered entirely. Empty when there is no user name followed by ':' and,
// somewhere after it, an '@'.
std::pair<std::size_t, std::size_t> user_info_password(std::string_view uri) {
  const std::size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return {0, 0};
  const std::size_t authority = scheme_end + 3;
  const std::size_t colon = uri.find_first_of(":@/?", authority);
  if (colon == std::string_view::npos || uri[colon] != ':') return {0, 0};
  const std::size_t query = uri.rfind('?');
  std::size_t at = query == std::string_view::npos ? std::string_view::npos : uri.rfind('@', query);
  if (at == std::string_view::npos || at < colon) at = uri.rfind('@');
  if (at == std::string_view::npos || at < colon) return {0, 0};
  return {colon + 1, at};
}

std::string mask_password(std::string_view uri) {
  std::string masked(uri);
  const auto [password_begin, password_end] = user_info_password(uri);
  if (password_end > password_begin) {
    masked.replace(password_begin, password_end - password_begin, "***");
  }
  // ...?password=secret&...
  for (std::size_t found = masked.find("password="); found != std::string::npos;
       found = masked.find("password=", found + 1)) {
    if (found > 0 && masked[found - 1] != '?' && masked[found - 1] != '&') continue;
    const std::size_t value = found + 9;
    const std::size_t end = masked.find('&', value);
    masked.replace(value, (end == std::string::npos ? masked.size() : end) - value, "***");
  }
  return masked;
}

}  // namespace quota::detail
