// A password is never printed, whatever spelling carried it (SPEC §12): the attacker's table.
// Each of the spellings below carries a password (in a URI's user-info or query, percent-
// encoded keys and values, libpq's key=value form, sslpassword, PGPASSWORD, near misses of a
// URI, strings libpq cannot parse, a wrong password the server refuses, watch's second
// connection refused by a role's CONNECTION LIMIT 1). Each goes through every quotactl
// command that connects, as text and as JSON, and through the library (Engine::open, its
// watch, quota_open); the password appears in no output, no error and no exception.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "postgresql/private_server.h"
#include "quota/admin.h"
#include "quota/engine.h"
#include "quota/quota.h"
#include "support.h"
#include "support/quotactl_run.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

// The passwords, each distinctive enough that no other text holds a piece of it.
const std::string kRight = "Right-Pw-4417";
const std::string kWrong = "Wrong-Pw-9123";
const std::string kSsl = "Ssl-Pw-3318";
const std::string kOne = "One-Pw-5521";
// Pieces of them that a message must not hold either (a password cut in two by a parser).
const std::vector<std::string> kPieces = {"Right-Pw", "Pw-4417", "Wrong-Pw", "Pw-9123",
                                          "Ssl-Pw",   "Pw-3318", "One-Pw",   "Pw-5521",
                                          "Sekret",   "ekret77", "%2DPw",    "Pw%2D"};

struct Spelling {
  std::string label;
  std::string location;
  std::string pgpassword;  // PGPASSWORD while it is used, when not empty
  bool connects = false;   // the server lets it in (else it is refused, somewhere)
};

// Sets PGPASSWORD for as long as it lives (libpq reads it at each connection).
class Environment {
 public:
  explicit Environment(const std::string& pgpassword) : set_(!pgpassword.empty()) {
    if (set_) setenv("PGPASSWORD", pgpassword.c_str(), 1);
  }
  ~Environment() {
    if (set_) unsetenv("PGPASSWORD");
  }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

 private:
  bool set_;
};

// A server whose roles quota_pw and quota_one log in only with their passwords (every other
// local connection is trusted). quota_pw owns the database and its quota schema, with the
// limit `send`; quota_one may use it too, but has one connection at most.
struct Secured {
  PrivateServer server{PrivateServer::Setup{
      false, "local all quota_pw scram-sha-256\nlocal all quota_one scram-sha-256"}};
  std::string dir = server.dir();
  std::string port = std::to_string(server.port());
  std::string host = "host=" + dir + "&port=" + port;  // a URI's query
  std::string key_host = "host=" + dir + " port=" + port + " dbname=quota_test";

  Secured() {
    server.exec("CREATE ROLE quota_pw LOGIN PASSWORD '" + kRight + "'");
    server.exec("ALTER DATABASE quota_test OWNER TO quota_pw");
    server.exec("ALTER SCHEMA public OWNER TO quota_pw");
    server.exec("CREATE ROLE quota_one LOGIN PASSWORD '" + kOne +
                "' CONNECTION LIMIT 1 IN ROLE quota_pw");
    Engine engine = Engine::open(uri("quota_pw:" + kRight));
    engine.define(make_limit("send", Algorithm::fixed_window, 1'000'000, 60'000));
    engine.define(make_limit("slots", Algorithm::concurrency, 1'000'000, 60'000));
  }

  std::string uri(const std::string& user_info, const std::string& query = "") const {
    return "postgresql://" + user_info + "@/quota_test?" + host + query;
  }

  std::vector<Spelling> spellings() const {
    return {
        {"URI user-info", uri("quota_pw:" + kRight), "", true},
        {"postgres:// user-info", "postgres" + uri("quota_pw:" + kRight).substr(10), "", true},
        {"POSTGRESQL:// in capitals", "POSTGRESQL" + uri("quota_pw:" + kRight).substr(10), "",
         true},
        {"password= parameter", uri("quota_pw", "&password=" + kRight), "", true},
        {"pass%77ord= parameter", uri("quota_pw", "&pass%77ord=" + kRight), "", true},
        {"%70assword= parameter", uri("quota_pw", "&%70assword=" + kRight), "", true},
        {"percent-encoded value", uri("quota_pw", "&password=Right%2DPw%2D4417"), "", true},
        {"percent-encoded user-info", uri("quota_pw:Right%2DPw%2D4417"), "", true},
        {"sslpassword beside the password",
         uri("quota_pw:" + kRight, "&sslpassword=" + kSsl), "", true},
        {"ssl%70assword", uri("quota_pw:" + kRight, "&ssl%70assword=" + kSsl), "", true},
        {"key=value", key_host + " user=quota_pw password=" + kRight, "", true},
        {"key=value quoted", key_host + " user=quota_pw password='" + kRight + "'", "", true},
        {"key=value with leading spaces", "   " + key_host + " user=quota_pw password=" + kRight,
         "", true},
        {"key=value sslpassword", key_host + " user=quota_pw sslpassword=" + kSsl, kRight, true},
        {"PGPASSWORD with a URI", uri("quota_pw"), kRight, true},
        {"PGPASSWORD with key=value", key_host + " user=quota_pw", kRight, true},
        // Refused by the server: a wrong password, each way.
        {"wrong password in the user-info", uri("quota_pw:" + kWrong), "", false},
        {"wrong password= parameter", uri("quota_pw", "&password=" + kWrong), "", false},
        {"wrong pass%77ord=", uri("quota_pw", "&pass%77ord=" + kWrong), "", false},
        {"wrong key=value password", key_host + " user=quota_pw password=" + kWrong, "", false},
        {"wrong PGPASSWORD", uri("quota_pw"), kWrong, false},
        // Near misses of a URI.
        {"postgresq://", "postgresq" + uri("quota_pw:" + kRight).substr(10), "", false},
        {"a leading space", " " + uri("quota_pw:" + kRight), "", false},
        {"a leading tab", "\t" + uri("quota_pw:" + kRight), "", false},
        {"postgres: without //", "postgres:quota_pw:" + kRight + "@quota", "", false},
        {"POSTGRESQL:/ one slash", "POSTGRESQL:/quota_pw:" + kRight + "@x/quota", "", false},
        {"postgressql://", "postgressql" + uri("quota_pw:" + kRight).substr(10), "", false},
        {"another scheme", "mysql://quota_pw:" + kRight + "@db/quota", "", false},
        // What libpq cannot parse, and what would split the password.
        {"IPv6 bracket not closed", "postgresql://u:" + kRight + "@[::1:5510/quota", "", false},
        {"IPv6 empty", "postgresql://u:" + kRight + "@[]:5510/quota", "", false},
        {"IPv6 then junk", "postgresql://u:" + kRight + "@[::1]x:5510/quota", "", false},
        {"a bare % in the password", "postgresql://u:100%Sekret77@/quota_test?" + host, "",
         false},
        {"%00 in the password", "postgresql://u:Sek%00ret77@/quota_test?" + host, "", false},
        {"unknown parameter", uri("quota_pw", "&password=" + kRight + "&bogus=1"), "", false},
        {"key=value without =", key_host + " password=" + kRight + " " + kRight, "", false},
        {"key=value quote not closed", key_host + " password='" + kRight, "", false},
        {"unencoded @ in the password", "postgresql://quota_pw:Sekret77@x@/quota_test?" + host,
         "", false},
        {"a NUL byte", std::string("postgresql://quota_pw:") + kRight + "@/quota_test\0?" + host,
         "", false},
        // A password of digits then '/', which libpq would read as a port and a database.
        {"digits and / in the password",
         "postgresql://quota_pw:2024/" + kRight + "@/quota_test?" + host, "", false},
        {"digits, / and a port",
         "postgresql://quota_pw:2024/" + kRight + "@localhost:" + port + "/quota_test", "", false},
        // Connection strings of other spellings, which are no location quota reads.
        {"a JDBC URL",
         "jdbc:postgresql://localhost:" + port + "/quota_test?user=quota_pw&password=" + kRight,
         "", false},
        {"user-info without a scheme",
         "quota_pw:" + kRight + "@localhost:" + port + "/quota_test", "", false},
        {"user-info after //", "//quota_pw:" + kRight + "@localhost/quota_test", "", false},
        {"key=value in capitals", "PASSWORD=" + kRight + " HOST=" + dir, "", false},
        // Watch's second connection, refused by CONNECTION LIMIT 1 (the first works).
        {"watch's second connection", uri("quota_one:" + kOne), "", true},
        {"watch's second connection, key=value", key_host + " user=quota_one password=" + kOne,
         "", true},
    };
  }
};

void require_no_password(const std::string& text, const Spelling& spelling) {
  for (const std::string& piece : kPieces) {
    INFO("the piece " << piece);
    CHECK(text.find(piece) == std::string::npos);
  }
  if (!spelling.pgpassword.empty()) CHECK(text.find(spelling.pgpassword) == std::string::npos);
}

// Every command that connects.
const std::vector<std::vector<std::string>> kCommands = {
    {"status"},
    {"migrate", "--dry-run"},
    {"migrate"},
    {"limit", "list"},
    {"limit", "get", "send"},
    {"consume", "send", "u1"},
    {"consume", "send", "u1", "--key", "order-1"},
    {"check", "send", "u1"},
    {"lease", "acquire", "slots", "u1"},
    {"lease", "list", "slots"},
    {"sql", "acquire", "slots"},
    {"usage", "send"},
    {"sql", "consume", "send"},
    {"watch", "send", "--for", "200ms"},
};

TEST_CASE("no spelling of a password is ever printed: quotactl, Engine and the C API",
          "[slow][postgresql][password]") {
  Secured secured;
  const std::vector<Spelling> spellings = secured.spellings();
  REQUIRE(spellings.size() >= 30);
  const std::filesystem::path cwd = std::filesystem::current_path();
  TempDir scratch;
  std::filesystem::current_path(scratch.path());  // where a near miss taken for a file would land
  int refused_by_the_server = 0;
  int watches_refused = 0;
  for (const Spelling& spelling : spellings) {
    INFO("spelling: " << spelling.label);
    const Environment environment(spelling.pgpassword);
    const bool second_refused = spelling.label.rfind("watch's second", 0) == 0;
    bool all_worked = true;
    std::string failed;  // the commands that failed, with what they said
    for (const bool json : {false, true}) {
      for (std::vector<std::string> args : kCommands) {
        args.insert(args.begin(), {"--db", spelling.location});
        if (json) args.push_back("--json");
        INFO("quotactl " << args[2] << (json ? " --json" : ""));
        const QuotactlRun outcome = run_quotactl(args);
        INFO(outcome.out << outcome.err);
        require_no_password(outcome.out, spelling);
        require_no_password(outcome.err, spelling);
        if (outcome.status != 0) {
          all_worked = false;
          failed += args[2] + (json ? " --json: " : ": ") + outcome.err;
        }
        if (second_refused && args[2] == "watch") {
          CHECK(outcome.status == 3);
          CHECK_THAT(outcome.err, Catch::Contains("cannot connect to PostgreSQL") &&
                                      Catch::Contains("***"));
          ++watches_refused;
        }
        if (outcome.err.find("password authentication failed") != std::string::npos) {
          ++refused_by_the_server;
        }
      }
    }
    // The same location in $QUOTA_DB.
    quotactl::Context context;
    context.quota_db = spelling.location;
    const QuotactlRun from_environment = run_quotactl({"status", "--json"}, context);
    require_no_password(from_environment.out + from_environment.err, spelling);
    if (spelling.connects && !second_refused) {
      CHECK(failed == "");
      CHECK(from_environment.status == 0);
    }
    if (!spelling.connects) CHECK_FALSE(all_worked);

    // The library: open, consume, and watch (a second connection of its own).
    std::string said;
    try {
      Options options;
      options.create = false;
      options.migrate = false;
      Engine engine = Engine::open(spelling.location, options);
      said += engine.consume("send", "lib").allowed ? "allowed\n" : "denied\n";
      Watch watch = engine.watch("send", [](const Usage&) {});
      CHECK_FALSE(second_refused);
    } catch (const Error& error) {
      said += error.what();
      CHECK((!spelling.connects || second_refused));
    }
    require_no_password(said, spelling);
    quota_engine* engine = nullptr;
    quota_options options;
    quota_options_init(&options);
    options.create = 0;
    options.migrate = 0;
    const int status =
        quota_open(spelling.location.data(), spelling.location.size(), &options, &engine);
    require_no_password(quota_last_error(), spelling);
    // (quota_one's connection of a moment ago may still count against its limit of one.)
    if (!second_refused) CHECK((status == QUOTA_OK) == spelling.connects);
    quota_close(engine);
  }
  // Nothing was created for a near miss, in the folder where a file name would have landed.
  CHECK(std::filesystem::is_empty(scratch.path()));
  std::filesystem::current_path(cwd);
  CHECK(refused_by_the_server >= 5 * 2 * static_cast<int>(kCommands.size()));
  CHECK(watches_refused == 4);
}

TEST_CASE("an error that suggests quotactl migrate pastes into a shell, without the password",
          "[postgresql][password]") {
  Secured secured;
  secured.server.exec("CREATE SCHEMA empty_schema AUTHORIZATION quota_pw");
  const std::string uri =
      secured.uri("quota_pw:" + kRight, "&options=-csearch_path%3Dempty_schema");
  const QuotactlRun outcome = run_quotactl({"--db", uri, "consume", "send", "u1"});
  INFO(outcome.out << outcome.err);
  CHECK(outcome.status == 3);
  require_no_password(outcome.out + outcome.err, {});
  const std::size_t at = outcome.err.find("`quotactl migrate --db '");
  REQUIRE(at != std::string::npos);
  const std::string pasted = outcome.err.substr(at + 1, outcome.err.find('`', at + 1) - at - 1);
  CHECK(pasted.find("***") == std::string::npos);
  CHECK_THAT(outcome.err, Catch::Contains("the password is left out: give it in PGPASSWORD"));
  // Pasted into a shell with the password in PGPASSWORD, it migrates that very schema.
  const std::string shell = "PGPASSWORD='" + kRight + "' " + std::string(QUOTACTL_PATH) +
                            pasted.substr(std::string("quotactl").size()) + " >/dev/null 2>&1";
  CHECK(std::system(shell.c_str()) == 0);
  CHECK(admin::schema_status(uri).pending.empty());
}

}  // namespace
}  // namespace quota::test
