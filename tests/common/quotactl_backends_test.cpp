// quotactl on every backend (docs/quotactl.md): the same commands give the same JSON and exit
// codes on a SQLite file and on a PostgreSQL database. What differs by nature (where the
// database is, SQLite's journal mode, the migrations each backend applies, the SQL dialect)
// is checked on each backend, then left out of the comparison.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "backend.h"
#include "cli.h"
#include "migrations.h"
#include "postgresql/postgresql_store.h"
#include "quota/policy.h"
#include "statements.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

using nlohmann::json;

constexpr std::int64_t kStart = 1'700'000'000'000;

// One command of the script, at a time relative to kStart, and the exit status it means to
// meet on every backend (and, where given, the reset_at_ms it answers).
struct Command {
  std::int64_t at_ms;
  std::vector<std::string> args;
  int status = 0;
  std::optional<std::int64_t> reset_at_ms = std::nullopt;
};

// What a command gave: its exit status, and its JSON document (or, for a failure, the one
// error line on stderr, compared only for what the backends share).
struct Answer {
  std::vector<std::string> args;
  int status = -1;
  json document;
  std::string error;
};

// The script: a database before and after migrate, every kind of limit, the operations,
// usage, overrides, gc and sql, with the failures a user meets.
std::vector<Command> script() {
  const std::int64_t minute = 60'000;
  return {
      {0, {"status"}},
      {0, {"limit", "list"}, 3},  // not migrated
      {0, {"migrate", "--dry-run"}},
      {0, {"migrate"}},
      {0, {"migrate"}},
      {0, {"status"}},
      {0, {"limit", "set", "send", "--max", "3", "--per", "1m"}},
      {0, {"limit", "set", "daily", "--max", "100", "--per", "1d", "--algo", "fixed_window"}},
      {0, {"limit", "set", "win", "--max", "5", "--per", "10s", "--algo", "sliding_window"}},
      {0,
       {"limit", "set", "bucket", "--max", "4", "--per", "1s", "--algo", "token_bucket", "--burst",
        "6"}},
      {0, {"limit", "set", "send", "--max", "3", "--per", "1m", "--burst", "2"}, 2},
      {0, {"limit", "get", "send"}},
      {0, {"limit", "get", "nope"}, 2},
      {0, {"limit", "list"}},
      {0, {"consume", "send", "u1"}},
      {10, {"consume", "send", "u1"}},
      {20, {"consume", "send", "u1", "--cost", "1"}},
      {30, {"consume", "send", "u1"}, 1},
      {40, {"check", "send", "u1"}, 1},
      {50, {"consume", "bucket", "u1", "--cost", "5"}},
      {60, {"check", "bucket", "u1", "--cost", "3"}, 1},
      {70, {"record", "daily", "u2", "--cost", "150"}, 1},  // over
      {80, {"consume", "send,daily", "u3"}},
      {90, {"refund", "send", "u1", "--cost", "2"}},
      {100, {"consume", "win", "u1", "--cost", "4"}},
      {12'000, {"consume", "win", "u1", "--cost", "2"}, 1},
      {12'100, {"consume", "win", "u4"}},
      {12'200, {"usage", "send"}},
      {12'200, {"usage", "daily", "--owner", "u2"}},
      {12'200, {"usage", "win", "--top", "1"}},
      {12'300, {"override", "set", "send", "u9", "--max", "10"}},
      {12'300, {"override", "set", "send", "u8", "--deny"}},
      {12'300, {"override", "set", "*", "u7", "--exempt"}},
      {12'300, {"override", "set", "bucket", "u6", "--max", "2", "--burst", "3"}},
      {12'400, {"override", "list"}},
      {12'400, {"consume", "send", "u8"}, 1},  // owner_denied
      {12'500, {"consume", "daily", "u7", "--cost", "1000"}},
      {12'600, {"override", "rm", "send", "u8"}},
      {12'600, {"override", "rm", "send", "u8"}, 2},  // none left
      {12'700, {"override", "list", "send"}},
      {12'800, {"reset", "send", "u1"}},
      {12'900, {"consume", "nope", "u1"}, 2},
      {13'000, {"sql", "consume"}},
      {13'000, {"sql", "check", "bucket"}},
      {13'000, {"sql", "reset", "daily"}},
      {13'000, {"sql", "refund", "win"}},
      {13'000, {"sql", "record", "nope"}, 2},
      {13'000, {"status"}},
      {2 * 24 * 60 * minute, {"gc"}},
      {2 * 24 * 60 * minute, {"status"}},
      {2 * 24 * 60 * minute, {"limit", "rm", "bucket"}},
      {2 * 24 * 60 * minute, {"limit", "rm", "bucket"}, 2},
      {2 * 24 * 60 * minute, {"limit", "list"}},
  };
}

// Calendar periods (SPEC §9): limits per month at +09:00 from an anchor and per ISO week, the
// owners' anchors (for a limit and for '*'), the windows they give, and the refusals. kStart
// is Tuesday 2023-11-14T22:13:20Z, 07:13:20 on the 15th at +09:00.
std::vector<Command> calendar_script() {
  const std::int64_t day = 24 * 60 * 60'000;
  return {
      {0, {"migrate"}},
      {0,
       {"limit", "set", "plan", "--max", "3", "--per", "month", "--utc-offset", "+09:00",
        "--anchor", "2026-03-17T09:30:00+09:00"}},
      {0, {"limit", "set", "weekly", "--max", "2", "--per", "week"}},
      {0, {"limit", "set", "daily", "--max", "5", "--per", "1d", "--algo", "fixed_window"}},
      {0, {"limit", "set", "plan", "--max", "3", "--per", "month", "--algo", "token_bucket"}, 2},
      {0, {"limit", "set", "daily", "--max", "5", "--per", "1d", "--utc-offset", "+09:00"}, 2},
      {0, {"limit", "set", "plan", "--max", "3", "--per", "month", "--anchor", "2026-03-17"}, 2},
      {0, {"limit", "get", "plan"}},
      {0, {"limit", "list"}},
      // The 17th at 09:30 (+09:00) is 2023-11-17T00:30:00Z.
      {0, {"consume", "plan", "u1"}, 0, 1'700'181'000'000},
      // Monday 2023-11-20T00:00:00Z.
      {0, {"consume", "weekly", "u1"}, 0, 1'700'438'400'000},
      {10, {"consume", "weekly", "u1"}},
      {20, {"consume", "weekly", "u1"}, 1, 1'700'438'400'000},
      {30, {"override", "set", "plan", "u2", "--anchor", "2026-01-31T00:00:00+09:00"}},
      {30, {"override", "set", "plan", "u3", "--max", "5", "--anchor", "2026-01-02T00:00:00Z"}},
      {30, {"override", "set", "*", "u4", "--anchor", "2026-01-07T12:00:00Z"}},
      {30, {"override", "set", "daily", "u2", "--anchor", "2026-01-31T00:00:00Z"}, 2},
      {30, {"override", "set", "daily", "u2", "--max", "9", "--anchor", "2026-01-31T00:00:00Z"}, 2},
      {40, {"override", "list"}},
      {40, {"override", "list", "plan"}},
      // 30 November (November lacks the 31st) at 00:00 +09:00.
      {50, {"consume", "plan", "u2"}, 0, 1'701'270'000'000},
      // The 2nd at 09:00 +09:00, the anchor's place at the limit's offset.
      {50, {"consume", "plan", "u3", "--cost", "5"}, 0, 1'701'475'200'000},
      {60, {"consume", "plan", "u3"}, 1},
      // '*': Wednesdays at 12:00 UTC.
      {60, {"consume", "weekly", "u4"}, 0, 1'700'049'600'000},
      {70, {"usage", "plan"}},
      {70, {"usage", "--owner", "u3"}},
      {80, {"override", "rm", "plan", "u3"}},
      {80, {"override", "rm", "plan", "u3"}, 2},
      {80, {"override", "rm", "*", "u4"}},
      {90, {"reset", "plan", "u1"}},
      // Ten days on, past the 17th: the next month, to 17 December.
      {10 * day, {"consume", "plan", "u1"}, 0, 1'702'773'000'000},
      {10 * day, {"limit", "list"}},
      {10 * day, {"override", "list"}},
  };
}

std::vector<int> versions_of(const std::vector<detail::Migration>& migrations) {
  std::vector<int> versions;
  for (const auto& migration : migrations) versions.push_back(migration.version);
  return versions;
}

std::vector<Answer> run_script(const TestDatabase& db,
                               const std::vector<Command>& commands = script()) {
  // An empty file is an empty database, as a server's empty schema is: status reads both.
  if (db.backend() == Backend::sqlite) std::ofstream(db.location()).flush();
  std::vector<Answer> answers;
  for (const Command& command : commands) {
    std::vector<std::string> args = {"--db", db.location(), "--now",
                                     std::to_string(kStart + command.at_ms), "--json"};
    args.insert(args.end(), command.args.begin(), command.args.end());
    const QuotactlRun run = run_quotactl(args);
    Answer answer;
    answer.args = command.args;
    answer.status = run.status;
    if (!run.out.empty()) answer.document = json::parse(run.out);
    answer.error = run.err;
    answers.push_back(std::move(answer));
  }
  return answers;
}

// Checks on `answer` what is the backend's own and removes it, leaving what both share.
void check_and_strip_backend_fields(const TestDatabase& db, Answer& answer) {
  const bool postgresql = db.backend() == Backend::postgresql;
  const std::string& command = answer.args.front();
  json& document = answer.document;
  if (answer.status != 0 && answer.status != 1) {
    // Errors name the database in their own way; each is one line on stderr.
    CHECK(answer.error.rfind("quotactl: error: ", 0) == 0);
    CHECK(answer.error.find('\n') == answer.error.size() - 1);
    // With --json the same message is the error document's; its code is the backends' both.
    if (!document.is_null()) {
      CHECK(document["error"]["message"] ==
            answer.error.substr(17, answer.error.size() - 18));
      document["error"].erase("message");
    }
    answer.error.clear();
    return;
  }
  CHECK(answer.error.empty());
  if (command == "status") {
    CHECK(document["path"] == (postgresql ? detail::mask_password(db.location()) : db.location()));
    if (postgresql) {
      CHECK(document["journal_mode"].is_null());
    } else {
      CHECK(document["journal_mode"].is_string());
    }
    // Each backend has its own first migrations (PostgreSQL's first is the whole schema).
    json pending = json::array();
    for (int version : versions_of(built_in_migrations(db.backend()))) {
      if (version > document["schema_version"].get<int>()) pending.push_back(version);
    }
    CHECK(document["pending"] == pending);
    document.erase("path");
    document.erase("journal_mode");
    document.erase("pending");
  } else if (command == "migrate" && document.contains("applied")) {
    if (!document["applied"].empty()) {
      CHECK(document["applied"] == json(versions_of(built_in_migrations(db.backend()))));
    }
    document["applied"] = !document["applied"].empty();
  } else if (command == "migrate") {  // --dry-run
    CHECK(document["pending"] == json(versions_of(built_in_migrations(db.backend()))));
    document.erase("pending");
  } else if (command == "sql") {
    const detail::Dialect& dialect = postgresql ? detail::kPostgresql : detail::kSqlite;
    CHECK(document["dialect"] == std::string(dialect.name));
    const auto algorithm = parse_algorithm(document["algorithm"].get<std::string>());
    REQUIRE(algorithm);
    for (auto operation :
         {detail::Operation::consume, detail::Operation::check, detail::Operation::record,
          detail::Operation::reset, detail::Operation::refund}) {
      if (document["operation"] == detail::operation_name(operation)) {
        CHECK(document["sql"] == detail::statement(dialect, operation, detail::kind_of(*algorithm)));
      }
    }
    document.erase("dialect");
    document.erase("sql");
  }
}

TEST_CASE("quotactl gives the same JSON and exit codes on SQLite and on PostgreSQL",
          "[slow][quotactl][backends]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase reference_db(Backend::sqlite);
  TestDatabase db(backend);
  std::vector<Answer> reference = run_script(reference_db);
  std::vector<Answer> answers = run_script(db);
  REQUIRE(answers.size() == reference.size());

  const std::vector<Command> commands = script();
  for (std::size_t i = 0; i < answers.size(); ++i) {
    Answer& answer = answers[i];
    Answer& expected = reference[i];
    INFO("command " << i << ": " << json(answer.args).dump() << "\n" << answer.error);
    CHECK(answer.status == commands[i].status);
    check_and_strip_backend_fields(reference_db, expected);
    check_and_strip_backend_fields(db, answer);
    CHECK(answer.status == expected.status);
    CHECK(answer.document.dump() == expected.document.dump());
  }
}

TEST_CASE("quotactl gives the same answers for calendar periods on SQLite and on PostgreSQL",
          "[slow][quotactl][backends][calendar]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase reference_db(Backend::sqlite);
  TestDatabase db(backend);
  const std::vector<Command> commands = calendar_script();
  std::vector<Answer> reference = run_script(reference_db, commands);
  std::vector<Answer> answers = run_script(db, commands);
  REQUIRE(answers.size() == reference.size());
  for (std::size_t i = 0; i < answers.size(); ++i) {
    Answer& answer = answers[i];
    Answer& expected = reference[i];
    INFO("command " << i << ": " << json(answer.args).dump() << "\n" << answer.error);
    CHECK(answer.status == commands[i].status);
    if (commands[i].reset_at_ms) CHECK(answer.document["reset_at_ms"] == *commands[i].reset_at_ms);
    check_and_strip_backend_fields(reference_db, expected);
    check_and_strip_backend_fields(db, answer);
    CHECK(answer.document.dump() == expected.document.dump());
  }
  // What the JSON of the limits and the owners' rows holds, at the end.
  const json limits = answers[answers.size() - 2].document;
  REQUIRE(limits.size() == 3);
  CHECK(limits[1]["period"] == "month");
  CHECK(limits[1]["period_ms"].is_null());
  CHECK(limits[1]["utc_offset"] == "+09:00");
  CHECK(limits[1]["anchor_ms"] == 1'773'707'400'000);
  CHECK(limits[0]["period"].is_null());
  CHECK(limits[0]["period_ms"] == 86'400'000);
  CHECK(answers.back().document ==
        json::parse(R"([{"limit":"plan","owner":"u2","policy":null,"maximum":null,"burst":null,)"
                    R"("anchor_ms":1769785200000}])"));
}

TEST_CASE("override list without a limit works on every backend", "[quotactl][backends]") {
  // Regression: on PostgreSQL, Engine::overrides() without a limit bound NULL to a parameter
  // whose type the server could not determine, and every `override list` failed (exit 3).
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  Engine engine = Engine::open(db.location());
  engine.define(make_limit("send"));
  engine.set_override({"send", "u1", Policy::exempt});
  CHECK(engine.overrides().size() == 1);
  CHECK(engine.overrides("send").size() == 1);
  CHECK(engine.overrides("other").empty());
}

TEST_CASE("quotactl takes the database from $QUOTA_DB on every backend", "[quotactl][backends]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  quotactl::Context context;
  context.quota_db = db.location();
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--now", std::to_string(kStart), "--json"});
    const QuotactlRun answer = run_quotactl(args, context);
    INFO(answer.err);
    REQUIRE(answer.status == 0);
    return answer.document();
  };
  CHECK(run({"migrate"})["schema_version"] == detail::latest_version(built_in_migrations(backend)));
  run({"limit", "set", "send", "--max", "2", "--per", "1m"});
  CHECK(run({"consume", "send", "u1"})["remaining"] == 1);
  const json status = run({"status"});
  CHECK(status["limits"] == 1);
  CHECK(status["state_rows"].get<int>() > 0);
}

}  // namespace
}  // namespace quota::test
