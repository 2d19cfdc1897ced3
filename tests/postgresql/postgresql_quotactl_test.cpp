// quotactl on a PostgreSQL database only (docs/quotactl.md): passwords never shown, a server
// that is not there, migrates run at once from several processes, and the statement that
// `quotactl sql` prints, run through psql, answering as the library does.
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backend.h"
#include "cli.h"
#include "postgresql/postgresql_store.h"
#include "statements.h"
#include "support/quotactl_run.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

using nlohmann::json;

constexpr std::int64_t kStart = 1'700'000'000'000;

QuotactlRun quotactl_run(std::vector<std::string> args, const quotactl::Context& context = {}) {
  args.insert(args.begin(), {"--now", std::to_string(kStart)});
  return run_quotactl(args, context);
}

// `uri` with the password "secret" both in its user-info part and as a parameter. The test
// server trusts its local connections, so the password is sent and ignored.
std::string with_password(const std::string& uri) {
  const std::size_t authority = uri.find("://") + 3;
  const std::size_t at = uri.find('@', authority);
  REQUIRE(at != std::string::npos);  // the URI names a user (tools/postgres.sh: postgres@)
  std::string result = uri;
  if (result.substr(authority, at - authority).find(':') == std::string::npos) {
    result.insert(at, ":secret");
  }
  return result + (result.find('?') == std::string::npos ? "?" : "&") + "password=secret";
}

// A quotactl command line and the status it exits with, on the database that the commands
// before it have left: each does its work, so that its whole output is searched for the
// password.
struct Command {
  std::vector<std::string> args;
  int status = 0;
};

// Every command that opens the database, in order, run in JSON and as text, with the URI in
// --db and in $QUOTA_DB.
std::vector<Command> every_command() {
  return {{{"status"}, 0},  // not migrated yet: the pending migrations
          {{"migrate", "--dry-run"}, 0},
          {{"migrate"}, 0},
          {{"status"}, 0},
          {{"limit", "set", "send", "--max", "2", "--per", "1m"}, 0},
          {{"limit", "get", "send"}, 0},
          {{"limit", "list"}, 0},
          {{"consume", "send", "u1"}, 0},
          {{"consume", "send", "u1"}, 0},
          {{"consume", "send", "u1"}, 1},
          {{"check", "send", "u1"}, 1},
          {{"record", "send", "u1"}, 1},
          {{"refund", "send", "u1"}, 0},
          {{"reset", "send", "u1"}, 0},
          {{"usage", "send"}, 0},
          {{"override", "set", "send", "u2", "--max", "5"}, 0},
          {{"override", "list"}, 0},
          {{"override", "rm", "send", "u2"}, 0},
          {{"gc"}, 0},
          {{"sql", "consume", "send"}, 0},
          {{"sql", "consume", "send", "--key"}, 0},
          {{"consume", "send", "u3", "--key", "k1"}, 0},
          {{"consume", "send", "u3", "--key", "k1"}, 0},               // replayed
          {{"limit", "set", "jobs", "--max", "2", "--ttl", "1m"}, 0},  // a concurrency limit
          {{"sql", "acquire", "jobs"}, 0},
          {{"sql", "acquire", "jobs", "--key"}, 0},
          {{"lease", "acquire", "jobs", "u1"}, 0},
          {{"lease", "acquire", "jobs", "u1", "--key", "k2"}, 0},
          {{"lease", "acquire", "jobs", "u1", "--key", "k2"}, 0},  // replayed
          // The same key for another cost: idempotency_conflict.
          {{"lease", "acquire", "jobs", "u1", "--key", "k2", "--cost", "2"}, 2},
          {{"lease", "list", "jobs"}, 0},
          {{"lease", "list", "jobs", "--owner", "u1"}, 0},
          {{"consume", "send,jobs", "u4"}, 0},  // prints its lease
          {{"consume", "send,jobs", "u4", "--key", "k3"}, 0},
          {{"usage", "jobs"}, 0},
          {{"reset", "jobs", "u1"}, 0},
          {{"lease", "renew", "00000000000000000000000000000000"}, 1},  // lease_expired
          {{"lease", "release", "00000000000000000000000000000000"}, 0},
          {{"limit", "rm", "jobs"}, 0},
          {{"consume", "nope", "u1"}, 2},
          {{"limit", "rm", "send"}, 0},
          {{"limit", "get", "send"}, 2}};
}

TEST_CASE("quotactl never prints the password of a PostgreSQL URI", "[slow][quotactl][postgresql]") {
  for (const bool json_output : {false, true}) {
    for (const bool from_environment : {false, true}) {
      CAPTURE(json_output, from_environment);
      TestDatabase db(Backend::postgresql);
      const std::string uri = with_password(db.location());
      quotactl::Context context;
      if (from_environment) context.quota_db = uri;
      // Not migrated yet: the refusal names `quotactl migrate --db URI`, masked.
      std::vector<Command> commands = {{{"limit", "list"}, 3}};
      for (const Command& command : every_command()) commands.push_back(command);
      // The keyed protocol with no limit named needs no database (the URI's dialect).
      commands.push_back({{"sql", "consume", "--key"}, 0});
      bool refused_unmigrated = false;
      for (const Command& row : commands) {
        std::vector<std::string> args = row.args;
        if (!from_environment) args.insert(args.begin(), {"--db", uri});
        if (json_output) args.push_back("--json");
        const QuotactlRun outcome = quotactl_run(args, context);
        INFO(json(args).dump() << " -> " << outcome.status << "\n" << outcome.out << outcome.err);
        CHECK(outcome.status == row.status);
        CHECK(outcome.out.find("secret") == std::string::npos);
        CHECK(outcome.err.find("secret") == std::string::npos);
        if (!refused_unmigrated) {
          CHECK(outcome.status == 3);
          // A command to paste: quoted, and the password left out rather than masked.
          const std::size_t command = outcome.err.find("`quotactl migrate --db 'postgresql://postgres@");
          REQUIRE(command != std::string::npos);
          CHECK(outcome.err.substr(command, outcome.err.find('`', command + 1) - command)
                    .find("***") == std::string::npos);
          CHECK(outcome.err.find("the password is left out") != std::string::npos);
          refused_unmigrated = true;
        }
      }
      // The status names the server, masked, so the operator still sees which one it is.
      std::vector<std::string> status = {"status", "--json"};
      if (!from_environment) status.insert(status.begin(), {"--db", uri});
      const QuotactlRun shown = quotactl_run(status, context);
      REQUIRE(shown.status == 0);
      const json document = json::parse(shown.out);
      CHECK(document["path"].get<std::string>().rfind("postgresql://postgres:***@", 0) == 0);
      CHECK(document["journal_mode"].is_null());
      CHECK(document["schema_version"] ==
            detail::latest_version(detail::built_in_postgresql_migrations()));
    }
  }
}

TEST_CASE("quotactl reports a PostgreSQL server that is not there (exit 3), masked",
          "[quotactl][postgresql]") {
  // A socket folder where no server runs.
  TempDir dir;
  const std::string uri =
      "postgresql://quota:secret@/quota?host=" + dir.path().string() + "&password=secret";
  std::vector<Command> commands = every_command();
  commands.push_back({{"sql", "check", "send"}});
  for (const bool json_output : {false, true}) {
    for (const Command& row : commands) {
      std::vector<std::string> args = row.args;
      args.insert(args.begin(), {"--db", uri});
      if (json_output) args.push_back("--json");
      const QuotactlRun outcome = quotactl_run(args);
      INFO(json(args).dump() << "\n" << outcome.out << outcome.err);
      CHECK(outcome.status == 3);
      // With --json the error is also the one document on stdout, as masked as the line.
      CHECK((json_output ? json::parse(outcome.out)["error"]["code"] == "io" : outcome.out.empty()));
      CHECK(outcome.out.find("secret") == std::string::npos);
      CHECK(outcome.err.rfind("quotactl: error: cannot connect to PostgreSQL at "
                              "postgresql://quota:***@/quota?host=",
                              0) == 0);
      CHECK(outcome.err.find("check that the server runs") != std::string::npos);
      CHECK(outcome.err.find("secret") == std::string::npos);
      CHECK(std::count(outcome.err.begin(), outcome.err.end(), '\n') == 1);
      CHECK(outcome.err.find('\t') == std::string::npos);  // libpq indents its hints
    }
  }
  // A URI that libpq cannot parse: bad input (exit 2), named by its fault, none of it shown.
  const QuotactlRun malformed =
      quotactl_run({"--db", "postgresql://quota:secret@/quota?password=secret&bogus=1", "status"});
  CHECK(malformed.status == 2);
  CHECK(malformed.err.rfind("quotactl: error: the PostgreSQL connection string cannot be read "
                            "(invalid URI query parameter; 'bogus' is not a connection parameter "
                            "libpq knows)",
                            0) == 0);
  CHECK(malformed.err.find("secret") == std::string::npos);
  // The bare `sql OPERATION` needs no database: it prints the statement of the URI's dialect.
  const QuotactlRun bare = quotactl_run({"--db", uri, "sql", "consume", "--json"});
  REQUIRE(bare.status == 0);
  CHECK(json::parse(bare.out)["dialect"] == "postgresql");
}

// Runs the real binary with `args` (each quoted for the shell); its stdout, and its status.
std::pair<int, std::string> run_binary(const std::vector<std::string>& args) {
  std::string command = QUOTACTL_PATH;
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  for (std::size_t read; (read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    output.append(buffer.data(), read);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST_CASE("quotactl migrate run by several processes at once applies each migration once",
          "[quotactl][postgresql]") {
  // Regression: the store's has_table() read the connection's stale catalog cache after the
  // migration lock, so a second migrate applied the migration again ("already exists").
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    TestDatabase db(Backend::postgresql);  // a fresh, empty schema
    constexpr int kProcesses = 4;
    std::vector<std::pair<int, std::string>> results(kProcesses);
    std::vector<std::thread> threads;
    for (int i = 0; i < kProcesses; ++i) {
      threads.emplace_back([&, i] {
        results[i] = run_binary({"--db", db.location(), "--json", "migrate"});
      });
    }
    for (std::thread& thread : threads) thread.join();
    // Each migration is applied under the lock by exactly one of them (one process may apply
    // the first and another the next): together, every migration once, in order.
    std::vector<int> applied;
    for (const auto& [status, output] : results) {
      INFO(output);
      REQUIRE(status == 0);
      const json document = json::parse(output);
      CHECK(document["schema_version"] ==
            detail::latest_version(detail::built_in_postgresql_migrations()));
      for (const json& version : document["applied"]) applied.push_back(version.get<int>());
    }
    std::sort(applied.begin(), applied.end());
    std::vector<int> every;
    for (const auto& migration : detail::built_in_postgresql_migrations()) {
      every.push_back(migration.version);
    }
    CHECK(applied == every);
    const QuotactlRun status = quotactl_run({"--db", db.location(), "--json", "status"});
    REQUIRE(status.status == 0);
    CHECK(json::parse(status.out)["pending"] == json::array());
  }
}

// psql's rows for `script` on `uri`: each line of unaligned output split at '|'.
std::vector<std::vector<std::string>> psql_rows(const std::string& uri, const std::string& script) {
  TempDir dir;
  const std::string file = dir.file("script.sql");
  std::ofstream(file) << script;
  const std::string command =
      "psql -X -q -A -t -F '|' -v ON_ERROR_STOP=1 -d '" + uri + "' -f '" + file + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string output;
  std::array<char, 4096> buffer{};
  for (std::size_t read; (read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    output.append(buffer.data(), read);
  }
  const int status = pclose(pipe);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    std::vector<std::string> fields;
    std::istringstream parts(line);
    for (std::string field; std::getline(parts, field, '|');) fields.push_back(field);
    rows.push_back(fields);
  }
  return rows;
}

// The first columns every statement returns, as psql shows them: allowed (t/f), reason,
// remaining, retry_after_ms, reset_at_ms, denied and shadow_denied (0/1 or t/f).
std::string describe(const Result& result) {
  return fmt::format("{} {} {} {} {} {} {}", result.allowed ? 1 : 0, to_string(result.reason),
                     result.remaining, result.retry_after_ms, result.reset_at_ms, result.denied,
                     result.shadow_denied ? 1 : 0);
}

std::string describe(const std::vector<std::string>& row) {
  REQUIRE(row.size() >= 7);
  const auto truth = [](const std::string& text) { return text == "t" || text == "1" ? 1 : 0; };
  return fmt::format("{} {} {} {} {} {} {}", truth(row[0]), row[1], row[2], row[3], row[4], row[5],
                     truth(row[6]));
}

TEST_CASE("quotactl sql's PostgreSQL statements, run through psql, answer as the library does",
          "[quotactl][postgresql][sql]") {
  const Algorithm algorithm =
      GENERATE(from_range(std::begin(kAllAlgorithms), std::end(kAllAlgorithms)));
  CAPTURE(algorithm);
  TestDatabase db(Backend::postgresql);
  ManualClock clock;
  clock.set(kStart);
  Engine engine = Engine::open(db.location(), options_with(clock));
  engine.define(algorithm == Algorithm::token_bucket ? make_bucket("l", 4, 1000, 6)
                                                     : make_limit("l", algorithm, 4, 1000));

  struct Step {
    detail::Operation operation;
    std::int64_t cost;
    std::int64_t at_ms;
    bool null_cost = false;  // psql passes NULL for the cost (1)
  };
  using detail::Operation;
  const std::vector<Step> steps = {
      {Operation::consume, 1, 0},     {Operation::consume, 2, 100},
      {Operation::check, 1, 150},     {Operation::consume, 1, 200, true},
      {Operation::consume, 3, 250},   {Operation::check, 2, 300},
      {Operation::record, 5, 400},    {Operation::refund, 2, 500},
      {Operation::consume, 1, 600},   {Operation::reset, 1, 700},
      {Operation::consume, 4, 800},   {Operation::consume, 1, 1'500},
      {Operation::check, 1, 2'500},   {Operation::record, 1, 2'600, true},
      {Operation::consume, 9, 2'700}, {Operation::refund, 1, 3'000, true},
  };

  // The library's answers, for owner "lib".
  std::vector<std::string> expected;
  for (const Step& step : steps) {
    clock.set(kStart + step.at_ms);
    switch (step.operation) {
      case Operation::consume:
        expected.push_back(describe(engine.consume("l", "lib", step.cost)));
        break;
      case Operation::check:
        expected.push_back(describe(engine.check("l", "lib", step.cost)));
        break;
      case Operation::record:
        expected.push_back(describe(engine.record("l", "lib", step.cost)));
        break;
      case Operation::refund:
        expected.push_back(describe(engine.refund("l", "lib", step.cost)));
        break;
      case Operation::reset:
        expected.push_back(describe(engine.reset("l", "lib")));
        break;
    }
  }

  // psql's, for owner "psql", from exactly what `quotactl sql OPERATION l` prints.
  std::string script;
  for (const char* operation : {"consume", "check", "record", "refund", "reset"}) {
    const QuotactlRun printed = quotactl_run({"--db", db.location(), "sql", operation, "l"});
    INFO(printed.err);
    REQUIRE(printed.status == 0);
    CHECK(printed.out.find(fmt::format("PREPARE quota_{}(text, text, bigint, bigint) AS\n",
                                       operation)) != std::string::npos);
    CHECK(printed.out.find(fmt::format("-- EXECUTE quota_{}('l', 'u1', NULL, NULL);\n",
                                       operation)) != std::string::npos);
    script += printed.out;
  }
  for (const Step& step : steps) {
    script += fmt::format("EXECUTE quota_{}('l', 'psql', {}, {});\n",
                          detail::operation_name(step.operation),
                          step.null_cost ? "NULL" : std::to_string(step.cost), kStart + step.at_ms);
  }
  // NULL for the time: the server's clock, which also answers.
  script += "EXECUTE quota_check('l', 'other', NULL, NULL);\n";
  const std::vector<std::vector<std::string>> rows = psql_rows(db.location(), script);
  REQUIRE(rows.size() == steps.size() + 1);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(i, detail::operation_name(steps[i].operation), steps[i].cost, steps[i].at_ms);
    CHECK(describe(rows[i]) == expected[i]);
  }
  CHECK(rows.back().at(0) == "t");
}

}  // namespace
}  // namespace quota::test

namespace quota::test {
namespace {

TEST_CASE("quotactl --server-clock takes the time from the server, and refuses --now with it",
          "[postgresql][quotactl][clock]") {
  TestDatabase database(Backend::postgresql);
  const std::string& uri = database.location();
  REQUIRE(run_quotactl({"--db", uri, "migrate"}).status == 0);
  REQUIRE(run_quotactl({"--db", uri, "limit", "set", "w", "--max", "3", "--per", "1m", "--algo",
                        "fixed_window"})
              .status == 0);
  const std::int64_t before = system_clock_ms();
  const QuotactlRun consumed =
      run_quotactl({"--db", uri, "--server-clock", "--json", "consume", "w", "u"});
  REQUIRE(consumed.status == 0);
  // The server's clock is this machine's: the window ends within a minute of now.
  const std::int64_t reset_at = json::parse(consumed.out).at("reset_at_ms").get<std::int64_t>();
  CHECK(reset_at > before);
  CHECK(reset_at <= system_clock_ms() + 60'000);

  const QuotactlRun both =
      run_quotactl({"--db", uri, "--server-clock", "--now", "5", "consume", "w", "u"});
  CHECK(both.status == 2);
  CHECK(both.err.find("--now and --server-clock") != std::string::npos);
  CHECK(database.integer("SELECT used FROM quota_windows WHERE owner = 'u'") == 1);
}

}  // namespace
}  // namespace quota::test
