// The SQL interface (docs/sql.md) on SQLite without the Engine, for all four algorithms: the
// statements of src/statements.cpp run through SQLite's C API on a database the engine created
// give the engine's answers; unknown limits; NULL :cost and :now; REAL-bound numbers; the
// quota_usage view. tests/common/sql_test.cpp runs the statements beside the engine on every
// backend.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

using detail::Operation;

constexpr std::int64_t T = 1'700'000'000'000;

constexpr const auto& kAlgorithms = kAllAlgorithms;

// What one run of a statement gave: a row, no row, or an error.
struct Answer {
  int status = SQLITE_OK;  // of the last step: SQLITE_ROW when there was a row
  std::string error;       // sqlite3_errmsg when the statement failed
  std::optional<Result> row;
};

// A SQLite client of its own: the statements of src/statements.cpp, prepared once on a plain
// connection and reused, as an application in another language would.
class SqlClient {
 public:
  explicit SqlClient(sqlite3* db) : db_(db) {}
  ~SqlClient() {
    for (auto& [text, statement] : prepared_) sqlite3_finalize(statement);
  }
  SqlClient(const SqlClient&) = delete;
  SqlClient& operator=(const SqlClient&) = delete;

  sqlite3* db() const { return db_; }
  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt*& statement = prepared_[&sql];
    if (!statement && sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
      FAIL(sqlite3_errmsg(db_));
    }
    return statement;
  }

 private:
  sqlite3* db_;
  std::map<const std::string*, sqlite3_stmt*> prepared_;
};

// How :cost and :now are bound: as integers, or as doubles, as JavaScript clients (sql.js)
// bind numbers above 2^31.
enum class Binding { integer, real };

// Runs statement(operation, algorithm): bind the named parameters (an empty optional stays
// NULL), step, read the columns by name.
Answer run_sql(SqlClient& client, Operation operation, Algorithm algorithm,
               const std::string& limit, const std::string& owner, std::optional<double> cost,
               std::optional<double> now, Binding binding = Binding::integer) {
  sqlite3_stmt* statement = client.prepare(detail::statement(operation, detail::kind_of(algorithm)));
  sqlite3_clear_bindings(statement);
  auto bind_text = [&](const char* name, const std::string& value) {
    const int index = sqlite3_bind_parameter_index(statement, name);
    REQUIRE(index > 0);
    sqlite3_bind_text(statement, index, value.c_str(), -1, SQLITE_TRANSIENT);
  };
  auto bind_integer = [&](const char* name, std::optional<double> value) {
    const int index = sqlite3_bind_parameter_index(statement, name);
    if (operation != Operation::reset || std::string(name) == ":now") REQUIRE(index > 0);
    if (index == 0 || !value) return;
    if (binding == Binding::real) {
      sqlite3_bind_double(statement, index, *value);
    } else {
      REQUIRE(*value == static_cast<double>(static_cast<std::int64_t>(*value)));
      sqlite3_bind_int64(statement, index, static_cast<std::int64_t>(*value));
    }
  };
  bind_text(":limit", limit);
  bind_text(":owner", owner);
  bind_integer(":cost", cost);
  bind_integer(":now", now);

  Answer answer;
  answer.status = sqlite3_step(statement);
  if (answer.status == SQLITE_ROW) {
    auto column = [&](const std::string& name) {
      for (int i = 0; i < sqlite3_column_count(statement); ++i) {
        if (name == sqlite3_column_name(statement, i)) return i;
      }
      FAIL("no column " << name);
      return -1;
    };
    // Every number is an INTEGER: a REAL would be cut to an integer by sqlite3_column_int64.
    for (const char* name :
         {"allowed", "remaining", "retry_after_ms", "reset_at_ms", "denied", "shadow_denied"}) {
      CAPTURE(name);
      CHECK(sqlite3_column_type(statement, column(name)) == SQLITE_INTEGER);
    }
    Result result;
    result.allowed = sqlite3_column_int64(statement, column("allowed")) != 0;
    const auto* reason =
        reinterpret_cast<const char*>(sqlite3_column_text(statement, column("reason")));
    REQUIRE(reason);
    REQUIRE(parse_reason(reason));
    result.reason = *parse_reason(reason);
    result.remaining = sqlite3_column_int64(statement, column("remaining"));
    result.retry_after_ms = sqlite3_column_int64(statement, column("retry_after_ms"));
    result.reset_at_ms = sqlite3_column_int64(statement, column("reset_at_ms"));
    result.denied = sqlite3_column_int64(statement, column("denied"));
    result.shadow_denied = sqlite3_column_int64(statement, column("shadow_denied")) != 0;
    answer.row = result;
    CHECK(sqlite3_step(statement) == SQLITE_DONE);  // exactly one row
  } else if (answer.status != SQLITE_DONE) {
    answer.error = sqlite3_errmsg(client.db());
  }
  sqlite3_reset(statement);
  return answer;
}

Result sql_result(SqlClient& client, Operation operation, Algorithm algorithm,
                  const std::string& limit, const std::string& owner, std::optional<double> cost,
                  std::optional<double> now, Binding binding = Binding::integer) {
  const Answer answer = run_sql(client, operation, algorithm, limit, owner, cost, now, binding);
  INFO(answer.error);
  REQUIRE(answer.row);
  return *answer.row;
}

// reset_at_ms as quota_usage spells it: ISO-8601 UTC with milliseconds.
std::string iso8601(std::int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  const std::size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return std::string(text, length) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z";
}

struct Fixture : EngineOnFile {
  SqlClient sql{raw.handle()};

  // Like the engine's own connection: no fsync per commit in WAL mode (keeps the test fast).
  Fixture() { raw.exec("PRAGMA synchronous = NORMAL"); }
};

TEST_CASE("the statements: one each, check read-only, the others writing", "[sql][sqlite]") {
  Fixture f;
  for (const Algorithm algorithm : kAlgorithms) {
    for (const Operation operation :
         {Operation::check, Operation::consume, Operation::record, Operation::reset}) {
      const std::string& sql = detail::statement(operation, detail::kind_of(algorithm));
      CAPTURE(to_string(algorithm), detail::operation_name(operation), sql);
      sqlite3_stmt* statement = nullptr;
      const char* tail = nullptr;
      REQUIRE(sqlite3_prepare_v2(f.raw.handle(), sql.c_str(), -1, &statement, &tail) == SQLITE_OK);
      CHECK(std::string(tail).find_first_not_of(" \n\t") == std::string::npos);
      CHECK(sqlite3_stmt_readonly(statement) == (operation == Operation::check ? 1 : 0));
      if (operation == Operation::check) {
        CHECK(sql.rfind("SELECT", 0) == 0);
      } else if (operation != Operation::reset) {
        CHECK(sql.rfind("INSERT", 0) == 0);
        CHECK_THAT(sql, Catch::Contains("ON CONFLICT") && Catch::Contains("DO UPDATE") &&
                            Catch::Contains("RETURNING"));
      }
      sqlite3_finalize(statement);
    }
  }
}

TEST_CASE("the worked examples of src/statements.cpp, in plain SQL", "[sql][sqlite]") {
  Fixture f;
  f.engine.define(make_limit("send", Algorithm::sliding_log, 2, 1000));
  SqlClient& db = f.sql;
  const auto algorithm = Algorithm::sliding_log;
  auto run = [&](Operation operation, std::int64_t now) {
    return sql_result(db, operation, algorithm, "send", "u", std::nullopt, now);
  };
  CHECK(run(Operation::consume, 5000) == Result{true, Reason::ok, 1, 0, 6000, 0});
  CHECK(run(Operation::consume, 5400) == Result{true, Reason::ok, 0, 0, 6400, 0});
  CHECK(run(Operation::consume, 5500) == Result{false, Reason::rate_limited, 0, 500, 6400, 1});
  CHECK(run(Operation::check, 6000) == Result{true, Reason::ok, 1, 0, 6400, 1});
  CHECK(run(Operation::consume, 4000) == Result{false, Reason::rate_limited, 0, 2000, 6400, 2});
}

TEST_CASE("plain SQL: an unknown limit fails the writes, writes nothing, and checks no row",
          "[sql][sqlite]") {
  Fixture f;
  const std::map<Algorithm, std::string> limits = {{Algorithm::sliding_log, "log"},
                                                   {Algorithm::fixed_window, "win"},
                                                   {Algorithm::sliding_window, "sw"},
                                                   {Algorithm::token_bucket, "tb"}};
  for (const auto& [algorithm, name] : limits) {
    f.engine.define(make_limit(name, algorithm, 3, 1000));
    f.engine.consume(name, "u");
  }
  SqlClient& db = f.sql;
  const std::string before = dump(f.path);

  for (const Algorithm algorithm : kAlgorithms) {
    // A limit of another algorithm is unknown to this algorithm's statements too.
    std::vector<std::string> unknown = {"nope"};
    for (const auto& [other, name] : limits) {
      if (other != algorithm) unknown.push_back(name);
    }
    for (const std::string& limit : unknown) {
      CAPTURE(to_string(algorithm), limit);
      for (const Operation operation : {Operation::consume, Operation::record, Operation::reset}) {
        if (operation == Operation::reset && limit != "nope") continue;  // reset is for all
        CAPTURE(detail::operation_name(operation));
        const Answer answer = run_sql(db, operation, algorithm, limit, "u", 1, T);
        CHECK(answer.status == SQLITE_CONSTRAINT);
        CHECK_THAT(answer.error, Catch::Contains("unknown limit"));
        CHECK_FALSE(answer.row);
      }
      const Answer check = run_sql(db, Operation::check, algorithm, limit, "u", 1, T);
      CHECK(check.status == SQLITE_DONE);
      CHECK_FALSE(check.row);
    }
  }
  CHECK(sqlite3_get_autocommit(f.raw.handle()) == 1);
  CHECK(dump(f.path) == before);
}

TEST_CASE("plain SQL: a NULL :cost is a cost of 1", "[sql][sqlite]") {
  Fixture f;
  SqlClient& db = f.sql;
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    f.engine.define(make_limit("l", algorithm, 3, 1000));
    for (const Operation operation : {Operation::check, Operation::consume, Operation::record}) {
      CAPTURE(detail::operation_name(operation));
      const Result with_null = sql_result(db, operation, algorithm, "l", "null", std::nullopt, T);
      const Result with_one = sql_result(db, operation, algorithm, "l", "one", 1, T);
      CHECK(with_null == with_one);
    }
    CHECK(f.engine.check("l", "null").remaining == 1);  // consume and record took 1 each
    f.engine.remove("l");
  }
}

TEST_CASE("plain SQL: :now and :cost bound as REAL give the integer-bound answers",
          "[sql][sqlite]") {
  // Regression: bound as doubles (as sql.js binds numbers above 2^31), a token-bucket check with
  // an override answered retry_after_ms 1223.111... and reset_at_ms 1700000001667.5557.
  Fixture integer_bound;
  Fixture real_bound;
  std::vector<std::string> names;
  for (Fixture* f : {&integer_bound, &real_bound}) {
    for (const Algorithm algorithm : kAlgorithms) {
      const std::string name(to_string(algorithm));
      f->engine.define(algorithm == Algorithm::token_bucket ? make_bucket(name, 7, 3000, 5)
                                                            : make_limit(name, algorithm, 7, 3000));
      // Owners with their own maximum (and burst), one exempt, one denied on every limit.
      f->engine.set_override({name, "o", Policy::maximum, 11, std::nullopt});
      f->engine.set_override(
          {name, "b", Policy::maximum, 3,
           algorithm == Algorithm::token_bucket ? std::optional<std::int64_t>(2) : std::nullopt});
      f->engine.set_override({name, "x", Policy::exempt});
      f->engine.set_override({"*", "d", Policy::deny});
      f->engine.set_override({"*", "w", Policy::maximum, 13});
    }
  }
  for (const Algorithm algorithm : kAlgorithms) names.emplace_back(to_string(algorithm));
  const std::vector<std::string> owners = {"u", "v", "o", "b", "x", "d", "w"};
  std::mt19937_64 random(17);
  auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  std::int64_t now = T;
  int compared = 0;
  for (int step = 0; step < 3000; ++step) {
    now += between(0, 9) < 6 ? between(0, 700) : -between(0, 300);
    const auto algorithm = static_cast<Algorithm>(between(0, 3));
    const std::string& limit = names[static_cast<std::size_t>(algorithm)];
    const std::string& owner = owners[static_cast<std::size_t>(between(0, 6))];
    const auto operation = static_cast<Operation>(between(0, 9) < 8 ? between(0, 2)
                                                  : between(0, 1)   ? 3
                                                                    : 4);
    const std::optional<double> cost =
        between(0, 5) == 0 ? std::nullopt : std::optional<double>(between(1, 6));
    // Never NULL: the two files would read the real clock at different moments.
    const std::optional<double> at = static_cast<double>(now);
    const Answer expected =
        run_sql(integer_bound.sql, operation, algorithm, limit, owner, cost, at, Binding::integer);
    const Answer actual =
        run_sql(real_bound.sql, operation, algorithm, limit, owner, cost, at, Binding::real);
    INFO(expected.error << " / " << actual.error);
    REQUIRE(expected.row);
    REQUIRE(actual.row);
    REQUIRE(*actual.row == *expected.row);
    ++compared;
  }
  CHECK(compared == 3000);
  // The states written are the same, integers all.
  CHECK(dump(real_bound.path) == dump(integer_bound.path));
}

TEST_CASE("plain SQL: a cost or a time that is not a whole number is refused", "[sql][sqlite]") {
  Fixture f;
  for (const Algorithm algorithm : kAlgorithms) {
    f.engine.define(make_limit(std::string(to_string(algorithm)), algorithm, 3, 1000));
    f.engine.consume(std::string(to_string(algorithm)), "u");
  }
  const std::string before = dump(f.path);
  for (const Algorithm algorithm : kAlgorithms) {
    const std::string limit(to_string(algorithm));
    for (const Operation operation :
         {Operation::check, Operation::consume, Operation::record, Operation::refund}) {
      CAPTURE(limit, detail::operation_name(operation));
      for (const double cost : {1.5, 0.0, -1.0, 0.5, 1e12 + 1, 1e300}) {
        CAPTURE(cost);
        const Answer answer =
            run_sql(f.sql, operation, algorithm, limit, "u", cost, T, Binding::real);
        CHECK(answer.status == SQLITE_ERROR);
        CHECK_THAT(answer.error, Catch::Contains("the cost must be a whole number from 1 to "
                                                 "1000000000000"));
        CHECK_FALSE(answer.row);
      }
      // An integral REAL is that integer.
      CHECK(
          run_sql(f.sql, Operation::check, algorithm, limit, "u", 2.0, T + 0.0, Binding::real).row);
    }
    for (const Operation operation : {Operation::check, Operation::consume, Operation::record,
                                      Operation::refund, Operation::reset}) {
      CAPTURE(limit, detail::operation_name(operation));
      for (const double now : {T + 0.5, -1.0, 1e300}) {
        CAPTURE(now);
        const Answer answer =
            run_sql(f.sql, operation, algorithm, limit, "u", 1, now, Binding::real);
        CHECK(answer.status == SQLITE_ERROR);
        CHECK_THAT(answer.error,
                   Catch::Contains("the time must be a whole number of Unix milliseconds"));
        CHECK_FALSE(answer.row);
      }
    }
  }
  CHECK(sqlite3_get_autocommit(f.raw.handle()) == 1);
  CHECK(dump(f.path) == before);
}

TEST_CASE("plain SQL: a NULL :now is the database's clock", "[sql][sqlite]") {
  Fixture f;
  SqlClient& db = f.sql;
  f.engine.define(make_limit("log", Algorithm::sliding_log, 3, 60'000));
  const std::int64_t before = system_clock_ms();
  const Result consumed =
      sql_result(db, Operation::consume, Algorithm::sliding_log, "log", "u", 1, std::nullopt);
  const Result reset = sql_result(db, Operation::reset, Algorithm::sliding_log, "log", "u",
                                  std::nullopt, std::nullopt);
  const std::int64_t after = system_clock_ms();
  CHECK(consumed.allowed);
  CHECK(consumed.reset_at_ms >= before + 60'000 - 1);
  CHECK(consumed.reset_at_ms <= after + 60'000 + 1);
  CHECK(reset.reset_at_ms >= before - 1);
  CHECK(reset.reset_at_ms <= after + 1);
}

TEST_CASE("quota_usage agrees with Engine::usage", "[sql][sqlite]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  Engine engine = Engine::open(path);  // the real clock, as the view has
  RawDb raw(path);
  SqlClient db(raw.handle());
  constexpr std::int64_t kDay = 86'400'000;
  for (const Algorithm algorithm : kAlgorithms) {
    const std::string name = std::string(to_string(algorithm));
    CAPTURE(name);
    engine.define(make_limit(name, algorithm, 5, kDay));
    auto sql = [&](Operation operation, const std::string& owner, std::int64_t cost) {
      return sql_result(db, operation, algorithm, name, owner, cost, std::nullopt);
    };
    engine.consume(name, "a", 3);                                 // used 3
    for (int i = 0; i < 7; ++i) sql(Operation::consume, "b", 1);  // used 5, denied 2
    engine.consume(name, "c", 2);                                 // used 3 (with the record)
    sql(Operation::record, "c", 1);
    engine.record(name, "d", 7);   // beyond: used 7
    engine.consume(name, "e", 1);  // reset: no row
    sql(Operation::reset, "e", 1);

    const auto usage = engine.usage(name);
    const auto rows = raw.rows(
        "SELECT owner, used, remaining, denied, reset_at_ms, reset_at FROM quota_usage "
        "WHERE limit_name = '" +
        name + "' ORDER BY used DESC, owner");
    REQUIRE(rows.size() == usage.size());
    REQUIRE(rows.size() == 4);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CAPTURE(i);
      CHECK(rows[i][0] == usage[i].owner);
      CHECK(std::stoll(rows[i][1]) == usage[i].used);
      CHECK(std::stoll(rows[i][2]) == usage[i].remaining);
      CHECK(std::stoll(rows[i][3]) == usage[i].denied);
      CHECK(std::stoll(rows[i][4]) == usage[i].reset_at_ms);
      CHECK(rows[i][5] == iso8601(usage[i].reset_at_ms));
    }
    CHECK(usage[0].owner == "d");
    CHECK(usage[0].used == 7);
    CHECK(usage[0].remaining == 0);
    CHECK(usage[1].owner == "b");
    CHECK(usage[1].denied == 2);
  }
}

TEST_CASE("quota_usage: the example of the migration's prose, at a fixed time", "[sql][sqlite]") {
  // send_message|u42|10|0|3|<reset_at_ms>|<ISO text>, with the state's remembered time in the
  // future so that the view (which uses the later of it and the real clock) is exact.
  Fixture f;
  SqlClient& db = f.sql;
  f.engine.define(make_limit("send_message", Algorithm::sliding_log, 10, 60'000));
  const std::int64_t future = 4'102'444'800'000;  // 2100-01-01T00:00:00Z
  for (int i = 0; i < 13; ++i) {
    sql_result(db, Operation::consume, Algorithm::sliding_log, "send_message", "u42", 1, future);
  }
  const auto rows = f.raw.rows("SELECT * FROM quota_usage ORDER BY remaining LIMIT 10");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == std::vector<std::string>{"send_message", "u42", "10", "0", "3", "4102444860000",
                                            "2100-01-01T00:01:00.000Z", "0", "NULL"});
  CHECK(iso8601(1'700'000'060'000) == "2023-11-14T22:14:20.000Z");
}

}  // namespace
}  // namespace quota::test
