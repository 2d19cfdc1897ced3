// A connection string typed where it does not belong is never echoed with its password
// (SPEC §12): as a positional, as the value of an option, as a limit name or a help topic,
// or taken for a SQLite file name (also inside the suggested `quotactl migrate --db …`).
// quota::redacted is the one function every echo passes through; the library's errors about
// such a file name say "***" too.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.h"
#include "quota/admin.h"
#include "quota/engine.h"
#include "quota/error.h"
#include "quota/quota.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

const std::string kSecret = "Sekret-4417";
const std::vector<std::string> kPieces = {"Sekret", "ekret-4417", "4417"};

void require_no_secret(const std::string& text) {
  for (const std::string& piece : kPieces) {
    INFO("the piece " << piece << " in " << text);
    CHECK(text.find(piece) == std::string::npos);
  }
}

// Strings that carry a password but are no PostgreSQL connection string quota reads: each is
// refused as a near miss, or taken for a file name.
std::vector<std::string> file_like_spellings() {
  return {
      "jdbc:postgresql://h/db?user=u&password=" + kSecret,
      "jdbc:postgresql://u:" + kSecret + "@h/db",
      "quser:" + kSecret + "@host:5432/db",
      "//quser:" + kSecret + "@host/db",
      "PASSWORD=" + kSecret + " HOST=h",
      "Password='" + kSecret + "' host=h",
      "db/x?pass%77ord=" + kSecret,
      "nodir/mydb PWD=" + kSecret,
  };
}

}  // namespace

TEST_CASE("quota::redacted hides every spelling of a password and keeps the rest", "[redaction]") {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"},
      {"postgresql://quser:2024/Summer@127.0.0.1:55432/qdb",
       "postgresql://quser:***@127.0.0.1:55432/qdb"},
      {"postgresql://u:a@b@h/db", "postgresql://u:***@h/db"},
      {"postgresql://:pw@h/db", "postgresql://:***@h/db"},
      {"quser:pw@host:5432/db", "quser:***@host:5432/db"},
      {"//quser:pw@host/db", "//quser:***@host/db"},
      {"jdbc:postgresql://h/db?user=u&password=pw&ssl=1",
       "jdbc:postgresql://h/db?user=u&password=***&ssl=1"},
      {"PASSWORD=pw HOST=h", "PASSWORD=*** HOST=h"},
      {"host=h password='a b\\'c' user=u", "host=h password='***' user=u"},
      {"pass%77ord=pw&%70assword=pw", "pass%77ord=***&%70assword=***"},
      {"sslpassword=pw PWD=x secret=y", "sslpassword=*** PWD=*** secret=***"},
      {"argument was not expected: postgresql://u:pw@h/db; run `quotactl help`",
       "argument was not expected: postgresql://u:***@h/db; run `quotactl help`"},
      {"database 'u:pw@h/db' does not exist", "database 'u:***@h/db' does not exist"},
      // Nothing to hide.
      {"postgresql://u@h:5432/db", "postgresql://u@h:5432/db"},
      {"postgresql://[::1]:5432/db", "postgresql://[::1]:5432/db"},
      {"postgresql://u:***@h/db", "postgresql://u:***@h/db"},
      {"tokens=500,requests", "tokens=500,requests"},
      {"send", "send"},
      {"a note: see user@example.com", "a note: see user@example.com"},
      {"/var/lib/quota.db", "/var/lib/quota.db"},
  };
  for (const auto& [text, expected] : table) {
    CAPTURE(text);
    CHECK(redacted(text) == expected);
  }
  CHECK(bounded("postgresql://u:" + std::string(100, 'p') + "@h/db") == "postgresql://u:***@h/db");
}

TEST_CASE("quotactl never echoes a connection string's password, wherever it is typed",
          "[redaction][quotactl]") {
  TempDir dir;
  const std::string db = dir.file("quota.db");
  REQUIRE(run_quotactl({"--db", db, "migrate"}).status == 0);
  const std::vector<std::string> uris = {
      "postgresql://quser:" + kSecret + "@127.0.0.1:55432/qdb",
      "postgresql://quser:2024/" + kSecret + "@127.0.0.1:55432/qdb",
      "postgres://quser@h/db?password=" + kSecret,
      "host=h user=u password=" + kSecret,
  };
  for (const std::string& uri : uris) {
    const std::vector<std::vector<std::string>> commands = {
        {uri, "status"},
        {"status", uri},
        {"--busy-timeout", uri, "status"},
        {"--now", uri, "status"},
        {"limit", "get", uri},
        {"consume", uri, "u"},
        {"consume", "send", "u", "--cost", uri},
        {"help", uri},
        {"lease", "renew", uri},
    };
    for (const std::vector<std::string>& command : commands) {
      for (const bool json : {false, true}) {
        std::vector<std::string> args = {"--db", db};
        args.insert(args.end(), command.begin(), command.end());
        if (json) args.push_back("--json");
        const QuotactlRun run = run_quotactl(args);
        CAPTURE(uri, command, json);
        CHECK(run.status == 2);
        require_no_secret(run.out + run.err);
      }
    }
  }
}

TEST_CASE("a string with a password taken for a file name is never echoed with it",
          "[redaction][quotactl]") {
  const std::filesystem::path cwd = std::filesystem::current_path();
  TempDir scratch;
  std::filesystem::current_path(scratch.path());
  for (const std::string& location : file_like_spellings()) {
    CAPTURE(location);
    for (const char* command : {"status", "migrate", "consume", "limit", "usage"}) {
      for (const bool json : {false, true}) {
        std::vector<std::string> args = {"--db", location, command};
        if (args[2] == "consume") args.insert(args.end(), {"send", "u"});
        if (args[2] == "limit") args.push_back("list");
        if (args[2] == "usage") args.push_back("send");
        if (json) args.push_back("--json");
        const QuotactlRun run = run_quotactl(args);
        CAPTURE(command, json, run.out, run.err);
        CHECK(run.status != 0);
        require_no_secret(run.out + run.err);
      }
    }
    quotactl::Context context;
    context.quota_db = location;
    const QuotactlRun from_environment = run_quotactl({"status"}, context);
    require_no_secret(from_environment.out + from_environment.err);
    require_no_secret(admin::shown(location));
    require_no_secret(admin::migrate_command(location));
    try {
      Options options;
      options.create = false;
      Engine::open(location, options);
      FAIL("opened");
    } catch (const Error& error) {
      require_no_secret(error.what());
    }
    quota_engine* engine = nullptr;
    quota_options options;
    quota_options_init(&options);
    options.create = 0;
    CHECK(quota_open(location.data(), location.size(), &options, &engine) != QUOTA_OK);
    require_no_secret(quota_last_error());
  }
  CHECK(std::filesystem::is_empty(scratch.path()));
  std::filesystem::current_path(cwd);
}

}  // namespace quota::test
