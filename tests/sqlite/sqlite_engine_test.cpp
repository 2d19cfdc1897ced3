// The engine on SQLite's own connection: each operation is one statement (SQLite's trace),
// statements are prepared once (sqlite3_stmt_status), a consume takes part in the
// application's transaction, and threads on two engines sharing one file never over-admit.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>
#include <sqlite3.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "quota/sqlite.h"
#include "sql/families.h"
#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

// The statement texts the connection started, without the "-- TRIGGER name" entries that
// SQLITE_TRACE_STMT also reports for the triggers a statement fires.
int trace_statement(unsigned type, void* context, void*, void* text) {
  if (type == SQLITE_TRACE_STMT) {
    const std::string sql = static_cast<const char*>(text);
    if (sql.rfind("--", 0) != 0) static_cast<std::vector<std::string>*>(context)->push_back(sql);
  }
  return 0;
}

// An Engine on the application's own connection to a scratch file, with a manual clock.
struct AppEngine {
  TempDir dir;
  ManualClock clock;
  SQLite::Database db{dir.file("app.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE};
  Engine engine = quota::sqlite::attach(db, options_with(clock));
};

// A plain limit's consume and record run their own statement (src/statements.h), in two
// parts in a transaction of their own (detail::plain_parts): the UPDATE, then the answer's
// SELECT; for an owner without state the UPDATE changes nothing, no answer is read, and the
// general statement runs after the commit.
TEST_CASE("a consume, check or record is one statement (a plain consume or record: its two "
          "parts in one transaction); a reset, one per table of the registry and its own",
          "[engine]") {
  AppEngine app;
  auto& [dir, clock, db, engine] = app;
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                  Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(algorithm));
  engine.define(make_limit("l", algorithm, 2, 1000));
  engine.consume("l", "warm-up");

  std::vector<std::string> started;
  sqlite3_trace_v2(db.getHandle(), SQLITE_TRACE_STMT, trace_statement, &started);
  using detail::Operation;
  auto expect = [&](Operation operation, bool has_state, auto&& run) {
    started.clear();
    run();
    std::vector<std::string> expected;
    const auto plain = detail::plain_kind(operation, detail::kind_of(algorithm));
    if (operation == Operation::reset) {
      // Every row naming the owner on the limit, of the registry's tables, then the statement.
      expected.push_back("SAVEPOINT quota_operation");
      for (const detail::sql::StateTable* table : detail::sql::owner_tables()) {
        expected.push_back(detail::sql::forget_owner(*table));
      }
      expected.push_back(detail::statement(operation, detail::kind_of(algorithm)));
      expected.push_back("RELEASE quota_operation");
    } else if (const auto* parts = plain ? detail::plain_parts(detail::kSqlite, operation, *plain)
                                  : nullptr) {
      expected.push_back("BEGIN IMMEDIATE");
      expected.push_back(parts->write);
      if (has_state) expected.push_back(parts->answer);
      expected.push_back("COMMIT");
      if (!has_state) expected.push_back(detail::statement(operation, detail::kind_of(algorithm)));
    } else if (plain) {
      expected.push_back(detail::statement(operation, *plain));
    } else {
      expected.push_back(detail::statement(operation, detail::kind_of(algorithm)));
    }
    CHECK(started == expected);
  };
  expect(Operation::consume, false, [&] { CHECK(engine.consume("l", "u").allowed); });
  expect(Operation::consume, true, [&] { CHECK(engine.consume("l", "u").allowed); });
  expect(Operation::consume, true, [&] { CHECK_FALSE(engine.consume("l", "u").allowed); });
  expect(Operation::check, true, [&] { CHECK_FALSE(engine.check("l", "u").allowed); });
  // Engine::owner_usage reads the limit afresh, then the owner by the same statement as check.
  started.clear();
  CHECK(engine.owner_usage("l", "u").used == 2);
  REQUIRE(started.size() == 2);
  const auto plain_check = detail::plain_kind(Operation::check, detail::kind_of(algorithm));
  CHECK(started.back() ==
        detail::statement(Operation::check, plain_check ? *plain_check : detail::kind_of(algorithm)));
  expect(Operation::record, true, [&] { CHECK_FALSE(engine.record("l", "u").allowed); });
  expect(Operation::reset, true, [&] { CHECK(engine.reset("l", "u").allowed); });
  clock.advance(5000);
  expect(Operation::consume, false, [&] { CHECK(engine.consume("l", "u", 2).allowed); });
  sqlite3_trace_v2(db.getHandle(), 0, nullptr, nullptr);
}

// On the database's clock a plain consume runs its plain statement whole: the two parts would
// read the clock twice, and measure the answer's wait from a later time than the decision's.
TEST_CASE("on the database's clock a plain consume is its one plain statement", "[engine]") {
  TempDir dir;
  SQLite::Database db{dir.file("app.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE};
  Options options;
  options.server_clock = true;
  Engine engine = quota::sqlite::attach(db, options);
  engine.define(make_limit("l", Algorithm::fixed_window, 2, 60'000));
  engine.consume("l", "a");
  std::vector<std::string> started;
  sqlite3_trace_v2(db.getHandle(), SQLITE_TRACE_STMT, trace_statement, &started);
  const Result second = engine.consume("l", "a");
  const Result third = engine.consume("l", "a");
  sqlite3_trace_v2(db.getHandle(), 0, nullptr, nullptr);
  const std::string& plain =
      detail::statement(detail::Operation::consume, detail::StatementKind::plain_fixed_window);
  CHECK(started == std::vector<std::string>{plain, plain});
  CHECK(second.allowed);
  CHECK_FALSE(third.allowed);
  CHECK(third.retry_after_ms > 0);
  CHECK(third.retry_after_ms <= 60'000);
}

// A batch runs a plain limit's plain statements too, in parts, inside the batch's transaction;
// for an owner without state the general statement runs in that transaction, before the
// requests after it.
TEST_CASE("consume_many runs a plain limit's statements in parts inside its one transaction",
          "[engine][batch]") {
  AppEngine app;
  auto& [dir, clock, db, engine] = app;
  engine.define(make_limit("l", Algorithm::fixed_window, 2, 1000));
  engine.define(make_limit("log", Algorithm::sliding_log, 2, 1000));
  engine.consume("l", "a");
  engine.check("log", "a");  // the limits' kinds are read before the batch
  std::vector<std::string> started;
  sqlite3_trace_v2(db.getHandle(), SQLITE_TRACE_STMT, trace_statement, &started);
  const std::vector<Result> answers =
      engine.consume_many({{"l", "a", 1}, {"l", "new", 1}, {"log", "a", 1}, {"l", "a", 1}});
  sqlite3_trace_v2(db.getHandle(), 0, nullptr, nullptr);
  using detail::Operation;
  using detail::StatementKind;
  const auto& parts =
      *detail::plain_parts(detail::kSqlite, Operation::consume, StatementKind::plain_fixed_window);
  const auto& log_parts =
      *detail::plain_parts(detail::kSqlite, Operation::consume, StatementKind::plain_sliding_log);
  // In the order of (limit, owner): l/a, l/a, l/new, log/a (no state yet).
  const std::vector<std::string> expected = {
      "BEGIN IMMEDIATE",
      parts.write,
      parts.answer,
      parts.write,
      parts.answer,
      parts.write,
      detail::statement(Operation::consume, StatementKind::fixed_window),
      log_parts.write,
      detail::statement(Operation::consume, StatementKind::sliding_log),
      "COMMIT"};
  CHECK(started == expected);
  REQUIRE(answers.size() == 4);
  CHECK(answers[0].allowed);
  CHECK(answers[0].remaining == 0);
  CHECK(answers[1].allowed);
  CHECK(answers[1].remaining == 1);
  CHECK(answers[2].allowed);
  CHECK_FALSE(answers[3].allowed);
  CHECK(answers[3].reason == Reason::rate_limited);
  CHECK(engine.owner_usage("l", "a").used == 2);
  CHECK(engine.owner_usage("l", "new").used == 1);
}

// SQLite expires a statement whose plan it made with a bound value in view when its bindings
// are cleared, and from 3.54 on it does that for every `column = :parameter` of a check: an
// engine that cleared its bindings after each operation prepared its check statement again
// every time. On an older SQLite this test passes either way; it guards the newer ones.
TEST_CASE("the engine's statements are prepared once and never again", "[engine]") {
  AppEngine app;
  auto& [dir, clock, db, engine] = app;
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                  Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(algorithm));
  engine.define(make_limit("l", algorithm, 5, 1000));

  auto statements = [&] {
    int count = 0, reprepared = 0;
    for (sqlite3_stmt* s = sqlite3_next_stmt(db.getHandle(), nullptr); s != nullptr;
         s = sqlite3_next_stmt(db.getHandle(), s)) {
      ++count;
      reprepared += sqlite3_stmt_status(s, SQLITE_STMTSTATUS_REPREPARE, 0);
    }
    return std::pair{count, reprepared};
  };
  auto run_all = [&](int round) {
    const std::string owner = "owner-" + std::to_string(round % 7);
    const std::int64_t cost = 1 + round % 3;
    engine.check("l", owner, cost);
    engine.consume("l", owner, cost);
    engine.check("l", owner);
    engine.record("l", owner, cost);
    (void)engine.owner_usage("l", owner);
    if (round % 5 == 0) engine.reset("l", owner);
    clock.advance(37);
  };
  run_all(0);
  const auto [prepared, reprepared_before] = statements();
  CHECK(reprepared_before == 0);
  for (int round = 1; round < 200; ++round) run_all(round);
  const auto [prepared_after, reprepared_after] = statements();
  CHECK(prepared_after == prepared);
  CHECK(reprepared_after == 0);
}

TEST_CASE("a consume inside the application's transaction commits or rolls back with it",
          "[engine]") {
  TempDir dir;
  ManualClock clock;
  SQLite::Database db(dir.file("app.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)");
  Engine engine = quota::sqlite::attach(db, options_with(clock));
  const auto algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                  Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(algorithm));
  engine.define(make_limit("send", algorithm, 1, 60'000));
  clock.set(T);

  {
    SQLite::Transaction transaction(db);
    db.exec("INSERT INTO messages (body) VALUES ('rolled back')");
    CHECK(engine.consume("send", "u").allowed);
    CHECK_FALSE(engine.consume("send", "u").allowed);
    // No commit: the destructor rolls back the message, the usage and the denial.
  }
  CHECK(db.execAndGet("SELECT count(*) FROM messages").getInt() == 0);
  CHECK(engine.check("send", "u") == Result{true, Reason::ok, 1, 0, T, 0});

  {
    SQLite::Transaction transaction(db);
    db.exec("INSERT INTO messages (body) VALUES ('sent')");
    CHECK(engine.consume("send", "u").allowed);
    transaction.commit();
  }
  CHECK(db.execAndGet("SELECT count(*) FROM messages").getInt() == 1);
  CHECK(engine.check("send", "u").remaining == 0);
}

TEST_CASE("threads sharing engines never over-admit or lose a record", "[engine]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  clock.set(T + 1);
  Engine first = Engine::open(path, options_with(clock));
  Engine second = Engine::open(path, options_with(clock));
  const std::vector<std::string> names = {"log", "win", "sw", "tb"};
  first.define(make_limit("log", Algorithm::sliding_log, 37, 86'400'000));
  first.define(make_limit("win", Algorithm::fixed_window, 37, 86'400'000));
  first.define(make_limit("sw", Algorithm::sliding_window, 37, 86'400'000));
  first.define(make_bucket("tb", 37, 86'400'000));

  constexpr int kThreads = 4;
  constexpr int kEach = 40;
  std::vector<std::atomic<int>> allowed(names.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    Engine& engine = i % 2 == 0 ? first : second;  // two threads per Engine, two Engines
    threads.emplace_back([&engine, &allowed, &names] {
      for (int k = 0; k < kEach; ++k) {
        for (std::size_t n = 0; n < names.size(); ++n) {
          if (engine.consume(names[n], "u").allowed) ++allowed[n];
          engine.record(names[n], "r");
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (std::size_t n = 0; n < names.size(); ++n) {
    CAPTURE(names[n]);
    CHECK(allowed[n] == 37);
    const auto usage = first.usage(names[n]);
    REQUIRE(usage.size() == 2);
    CHECK(usage[0].owner == "r");
    // The clock stands still: no window moves on and no token comes back.
    CHECK(usage[0].used == kThreads * kEach);
    CHECK(usage[1].owner == "u");
    CHECK(usage[1].used == 37);
    CHECK(usage[1].denied == kThreads * kEach - 37);
  }
}

}  // namespace
}  // namespace quota::test
