// How a PostgreSQL connection string is shown. Declared apart from the driver
// (src/postgresql/postgresql_store.h) so that quota::admin names no driver; defined by the
// PostgreSQL backend, where libpq parses the string, or by src/postgresql/absent.cpp in a
// build without it, which shows none of the string.
#pragma once

#include <string>
#include <string_view>

namespace quota::detail {

// The one way a PostgreSQL connection string (a URI or libpq's key=value form, as
// classify_location gives it) is ever shown: libpq parses it (percent-encoding decoded, every
// spelling of a key) and it is written anew in its own form, with each secret (password,
// sslpassword) as "***". A string libpq cannot parse is shown as a phrase that quotes none of
// it.
std::string mask_password(std::string_view conninfo);

// The same, with the secrets left out rather than masked, for a command that a message
// suggests running; `had_password` is set when one was left out.
std::string without_password(std::string_view conninfo, bool* had_password);

}  // namespace quota::detail
