// The PostgreSQL backend of a build configured without it (QUOTA_POSTGRESQL=OFF, or AUTO
// where libpq was not found): src/postgresql/postgresql_store.cpp is not compiled, and every
// way to a PostgreSQL database refuses with an error that says how to get one that has it.
#include <fmt/format.h>

#include "postgresql/postgresql_store.h"
#include "quota/error.h"

namespace quota::detail {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorCode::invalid_argument,
              fmt::format("{}: this build of quota has no PostgreSQL support (configure with "
                          "-DQUOTA_POSTGRESQL=ON and libpq-dev installed)",
                          what));
}

}  // namespace

const std::vector<Migration>& built_in_postgresql_migrations() {
  refuse("no PostgreSQL migrations");
}

// Without libpq nothing parses a connection string, so none of it is ever shown.
std::string mask_password(std::string_view) { return "a PostgreSQL connection string"; }

std::string without_password(std::string_view, bool* had_password) {
  if (had_password) *had_password = false;
  return "(not parsed: this build has no PostgreSQL support)";
}

std::unique_ptr<Store> open_postgresql(const std::string&, PostgresqlSettings) {
  refuse("cannot open a PostgreSQL database");
}

std::unique_ptr<Store> postgresql_on_connection(PGconn*, PostgresqlSettings) {
  refuse("cannot attach to a PostgreSQL connection");
}

}  // namespace quota::detail
