// docs/postgresql-roles.sql run by a database owner without CREATEROLE (issue: it failed with
// "permission denied to create role"): with the role made first by a superuser, the script
// only grants, and works; without it, the script stops having granted nothing and names the
// statement to have run.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "postgresql/private_server.h"
#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

// Runs the script with psql as `user`; its exit status and what it printed.
std::pair<int, std::string> run_roles_script(const PrivateServer& server, const TempDir& scratch,
                                             const std::string& user) {
  const std::string output = scratch.file("psql.out");
  const std::string command = "psql '" + server.uri(user) + "' -X -q -v ON_ERROR_STOP=1 " +
                              "-v role=quota_app -v schema=quota_shared -f " +
                              QUOTA_SOURCE_DIR "/docs/postgresql-roles.sql >" + output + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(output);
  std::stringstream text;
  text << in.rdbuf();
  return {status, text.str()};
}

TEST_CASE("docs/postgresql-roles.sql works for an owner without CREATEROLE",
          "[postgresql][security]") {
  PrivateServer server;
  TempDir scratch;
  ManualClock clock;
  server.exec("CREATE ROLE quota_owner LOGIN NOCREATEROLE NOSUPERUSER");
  server.exec("CREATE SCHEMA quota_shared AUTHORIZATION quota_owner");
  const std::string in_schema = "options=-csearch_path%3Dquota_shared";
  Engine owner = Engine::open(server.uri("quota_owner", "", in_schema), options_with(clock));
  owner.define(make_limit("send", Algorithm::sliding_log, 2, 60'000));

  // No role yet, and the owner may not make one: the script stops, and says what to run.
  const auto [refused, said] = run_roles_script(server, scratch, "quota_owner");
  INFO(said);
  CHECK(refused != 0);
  CHECK_THAT(said, Catch::Contains("role quota_app does not exist, and quota_owner may not "
                                   "create roles (no CREATEROLE)") &&
                       Catch::Contains("CREATE ROLE quota_app LOGIN") &&
                       !Catch::Contains("permission denied to create role"));

  // A superuser makes the role; the owner's run only grants.
  server.exec("CREATE ROLE quota_app LOGIN");
  const auto [granted, output] = run_roles_script(server, scratch, "quota_owner");
  INFO(output);
  REQUIRE(granted == 0);
  Options options = options_with(clock);
  options.migrate = false;
  Engine app = Engine::open(server.uri("quota_app", "", in_schema), options);
  CHECK(app.consume("send", "alice").allowed);
  CHECK(app.consume("send", "alice").allowed);
  CHECK_FALSE(app.consume("send", "alice").allowed);
  try {
    app.define(make_limit("other"));
    FAIL("the role defined a limit");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::permission_denied);
  }
}

}  // namespace
}  // namespace quota::test
