// Schema migrations (docs/sql.md, issue 2): a fresh database is migrated, a migrated one is left
// alone, and a database this build cannot use (newer, edited, not a database, not migrated)
// is refused with the right code and left exactly as it was.
#include <SQLiteCpp/Database.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "quota/sqlite.h"
#include "sqlite/sqlite_store.h"
#include "support.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

ErrorCode code_of_open(const std::string& path, Options options) {
  try {
    Engine::open(path, std::move(options));
  } catch (const Error& error) {
    INFO(error.what());
    return error.code();
  }
  FAIL("Engine::open did not refuse " << path);
  return ErrorCode::io;
}

std::string message_of_open(const std::string& path, Options options = {}) {
  try {
    Engine::open(path, std::move(options));
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Compared without printing: the bytes of a database are not worth reading in a report.
bool same_bytes(const std::string& path, const std::string& bytes) {
  return read_file(path) == bytes;
}

std::string journal_mode(const std::string& path) {
  RawDb raw(path);
  return raw.rows("PRAGMA journal_mode")[0][0];
}

// An application's database as it might be before quota joins it: its own tables, rows,
// index, view and trigger, in the default rollback-journal mode.
void create_application_database(const std::string& path) {
  RawDb raw(path);
  raw.exec(
      "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);"
      "CREATE TABLE limits (what TEXT);"  // a name quota must not collide with
      "INSERT INTO users (email) VALUES ('a@example.org'), ('b@example.org');"
      "INSERT INTO limits VALUES ('the application''s own');"
      "CREATE INDEX users_by_email ON users (email);"
      "CREATE VIEW user_count AS SELECT count(*) AS n FROM users;"
      "CREATE TRIGGER users_no_delete BEFORE DELETE ON users BEGIN SELECT 1; END;");
}

TEST_CASE("a new database is migrated to the latest version", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  clock.set(1'234'567);
  Engine engine = Engine::open(path, options_with(clock));
  CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
  CHECK(journal_mode(path) == "wal");

  RawDb raw(path);
  const auto& built_in = detail::built_in_sqlite_migrations();
  const auto rows = raw.rows(
      "SELECT version, name, checksum, applied_at_ms FROM quota_migrations "
      "ORDER BY version");
  REQUIRE(rows.size() == built_in.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i] == std::vector<std::string>{std::to_string(built_in[i].version), built_in[i].name,
                                              built_in[i].checksum, "1234567"});
  }
  // Every object is the engine's and named quota_* (docs/sql.md).
  CHECK(raw.rows("SELECT name FROM sqlite_schema WHERE name NOT LIKE 'quota\\_%' ESCAPE '\\' "
                 "AND name NOT LIKE 'sqlite\\_autoindex\\_quota\\_%' ESCAPE '\\'")
            .empty());
  for (const char* name : {"quota_migrations", "quota_limits", "quota_log", "quota_log_owners",
                           "quota_windows", "quota_resets", "quota_usage"}) {
    CAPTURE(name);
    CHECK(raw.integer(std::string("SELECT count(*) FROM sqlite_schema WHERE name = '") + name +
                      "'") == 1);
  }
  CHECK(raw.integer("SELECT count(*) FROM quota_limits") == 0);
}

TEST_CASE("the built-in migrations are the files of migrations/, verbatim", "[migrations]") {
  const auto& built_in = detail::built_in_sqlite_migrations();
  REQUIRE_FALSE(built_in.empty());
  for (std::size_t i = 0; i < built_in.size(); ++i) {
    const auto& migration = built_in[i];
    CAPTURE(migration.version, migration.name);
    CHECK(migration.version == static_cast<int>(i) + 1);
    char file[32];
    std::snprintf(file, sizeof file, "%04d_", migration.version);
    const std::string path =
        std::string(QUOTA_SOURCE_DIR) + "/migrations/" + file + migration.name + ".sql";
    CHECK(read_file(path) == migration.sql);
    CHECK(std::string(migration.checksum).size() == 64);
  }
}

TEST_CASE("opening a migrated database again changes nothing", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  ManualClock clock;
  {
    Engine engine = Engine::open(path, options_with(clock));
    Limit limit;
    limit.name = "send";
    engine.define(limit);
    engine.consume("send", "u");
  }
  const std::string before = dump(path);
  clock.advance(60'000);
  for (int i = 0; i < 2; ++i) {
    Engine engine = Engine::open(path, options_with(clock));
    CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
  }
  Options no_migrate = options_with(clock);
  no_migrate.migrate = false;
  Engine::open(path, no_migrate);
  CHECK(dump(path) == before);
}

TEST_CASE("a database migrated by a newer build is refused and left alone", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  Engine::open(path);
  {
    RawDb raw(path);
    raw.exec("INSERT INTO quota_migrations VALUES (" +
             std::to_string(detail::latest_version(detail::built_in_sqlite_migrations()) + 1) +
             ", 'from_the_future', 'abc', 0)");
    raw.exec("PRAGMA journal_mode = DELETE");  // so that a switch to WAL would show
  }
  const std::string before = dump(path);
  const std::string bytes = read_file(path);
  CHECK(code_of_open(path, {}) == ErrorCode::schema_too_new);
  Options no_migrate;
  no_migrate.migrate = false;
  CHECK(code_of_open(path, no_migrate) == ErrorCode::schema_too_new);
  CHECK_THAT(message_of_open(path),
             Catch::Contains(std::to_string(
                 detail::latest_version(detail::built_in_sqlite_migrations()) + 1)) &&
                 Catch::Contains("newer build"));
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    try {
      Engine engine = quota::sqlite::attach(db);
      FAIL("an Engine on the application's connection accepted it");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::schema_too_new);
    }
  }
  CHECK(dump(path) == before);
  CHECK(journal_mode(path) == "delete");
  CHECK(same_bytes(path, bytes));
}

TEST_CASE("an applied migration whose text was edited is refused", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  Engine::open(path);
  {
    RawDb raw(path);
    raw.exec("UPDATE quota_migrations SET checksum = 'x'");
    raw.exec("PRAGMA journal_mode = DELETE");
  }
  const std::string before = dump(path);
  const std::string bytes = read_file(path);
  CHECK(code_of_open(path, {}) == ErrorCode::checksum_mismatch);
  CHECK_THAT(message_of_open(path), Catch::Contains("checksum") && Catch::Contains("0001_initial"));
  CHECK(dump(path) == before);
  CHECK(journal_mode(path) == "delete");
  CHECK(same_bytes(path, bytes));
}

TEST_CASE("an application's database keeps its own tables and rows", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  create_application_database(path);
  const std::string before = dump(path);

  SECTION("opened by path") {
    Engine engine = Engine::open(path);
    CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
  }
  SECTION("on the application's own connection, whose journal mode stays") {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    Engine engine = quota::sqlite::attach(db);
    CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
    CHECK(journal_mode(path) == "delete");
  }
  // The dump of the application's objects alone is what it was.
  RawDb raw(path);
  std::string after;
  for (const auto& entry : raw.rows("SELECT type, name, sql FROM sqlite_schema WHERE name NOT "
                                    "LIKE '%quota%' ORDER BY type, name")) {
    after += entry[0] + ' ' + entry[1] + ' ' + entry[2] + '\n';
    if (entry[0] == "table") {
      for (const auto& row : raw.rows("SELECT * FROM \"" + entry[1] + "\"")) {
        for (const auto& value : row) after += value + '|';
        after += '\n';
      }
    }
  }
  CHECK(after == before);
}

TEST_CASE("a database at version 1 is upgraded in place and keeps every owner's state",
          "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  const auto& built_in = detail::built_in_sqlite_migrations();
  REQUIRE(built_in.size() >= 2);
  {
    // What a build with only migration 0001 left behind, with owners of every table.
    RawDb raw(path);
    raw.exec(built_in[0].sql);
    raw.exec("INSERT INTO quota_migrations VALUES (1, '" + std::string(built_in[0].name) + "', '" +
             built_in[0].checksum + "', 0)");
    raw.exec(
        "INSERT INTO quota_limits VALUES ('log', 'sliding_log', 2, 1000, NULL),"
        " ('window', 'fixed_window', 2, 1000, NULL), ('bucket', 'token_bucket', 2, 1000, 2)");
    raw.exec(
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, used, previous_used,"
        " denied, window_key, seen_ms) VALUES ('window', 'old', 2, 1000, 2, 0, 0, 5000, 5000000)");
  }
  ManualClock clock;
  clock.set(5'000'100);
  Engine engine = Engine::open(path, options_with(clock));
  CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
  // The owner written under version 1 keeps its usage; new owners are created as before.
  CHECK(engine.consume("window", "old").reason == Reason::rate_limited);
  for (const char* limit : {"log", "window", "bucket"}) {
    CAPTURE(limit);
    CHECK(engine.consume(limit, "new", 2).remaining == 0);
    CHECK(engine.consume(limit, "new").reason == Reason::rate_limited);
  }
  CHECK_THROWS_WITH(engine.consume("missing", "new"), Catch::Contains("unknown limit"));
  CHECK(RawDb(path).integer("SELECT count(*) FROM quota_new_owners") == 0);
}

TEST_CASE("a database at version 3 is upgraded to tables keyed by owner, every row kept",
          "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  const auto& built_in = detail::built_in_sqlite_migrations();
  REQUIRE(built_in.size() >= 4);
  REQUIRE(built_in[3].version == 4);
  const std::vector<std::string> tables = {"quota_windows", "quota_log_owners", "quota_log",
                                           "quota_buckets"};
  auto dump = [&](RawDb& raw) {
    std::vector<std::vector<std::string>> rows;
    for (const std::string& table : tables) {
      for (auto& row : raw.rows("SELECT * FROM " + table + " ORDER BY limit_name, owner")) {
        row.insert(row.begin(), table);
        rows.push_back(std::move(row));
      }
    }
    return rows;
  };
  std::vector<std::vector<std::string>> before;
  {
    // What a build with migrations 0001-0003 left behind: owners in every state table, a log
    // with events, a denial and a shadow denial.
    RawDb raw(path);
    for (int i = 0; i < 3; ++i) {
      raw.exec(built_in[i].sql);
      raw.exec("INSERT INTO quota_migrations VALUES (" + std::to_string(built_in[i].version) +
               ", '" + std::string(built_in[i].name) + "', '" + built_in[i].checksum + "', 0)");
    }
    raw.exec(
        "INSERT INTO quota_limits (name, algorithm, maximum, period_ms, burst) VALUES"
        " ('log', 'sliding_log', 2, 1000, NULL), ('window', 'fixed_window', 2, 1000, NULL),"
        " ('bucket', 'token_bucket', 2, 1000, 2)");
    raw.exec(
        "INSERT INTO quota_windows (limit_name, owner, maximum, period_ms, used, previous_used,"
        " denied, window_key, seen_ms, shadow_denied) VALUES"
        " ('window', 'old', 2, 1000, 2, 0, 3, 5000, 5000000, 1),"
        " ('window', 'b', 2, 1000, 1, 0, 0, 5000, 5000001, 0)");
    raw.exec(
        "INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total,"
        " newest_at_ms, recorded, denied, seen_ms) VALUES"
        " ('log', 'old', 2, 1000, 2, 5000050, 0, 1, 5000050)");
    raw.exec(
        "INSERT INTO quota_log (limit_name, owner, at_ms, cost, total) VALUES"
        " ('log', 'old', 5000010, 1, 1), ('log', 'old', 5000050, 1, 2)");
    raw.exec(
        "INSERT INTO quota_buckets (limit_name, owner, maximum, period_ms, burst, level, denied,"
        " seen_ms) VALUES ('bucket', 'old', 2, 1000, 2, 0, 0, 5000000)");
    before = dump(raw);
  }
  REQUIRE(before.size() == 6);
  ManualClock clock;
  clock.set(5'000'100);
  {
    Engine engine = Engine::open(path, options_with(clock));
    CHECK(engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations()));
  }
  RawDb raw(path);
  // Later migrations add columns at the end, NULL in these rows: the rest is as it was.
  std::vector<std::vector<std::string>> after = dump(raw);
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    for (std::size_t column = before[i].size(); column < after[i].size(); ++column) {
      CHECK(after[i][column] == "NULL");
    }
    after[i].resize(before[i].size());
  }
  CHECK(after == before);
  CHECK(raw.rows("PRAGMA integrity_check")[0][0] == "ok");
  for (const std::string table : {"quota_windows", "quota_log_owners", "quota_buckets"}) {
    CAPTURE(table);
    CHECK(raw.integer("SELECT count(*) FROM pragma_index_list('" + table +
                      "') WHERE \"unique\" AND origin = 'u'") == 1);
  }
  CHECK(raw.rows("SELECT name FROM pragma_table_info('quota_log') WHERE pk > 0 ORDER BY pk") ==
        std::vector<std::vector<std::string>>{{"owner"}, {"limit_name"}, {"at_ms"}});

  // The owners keep their state: each of them is at its limit.
  Engine engine = Engine::open(path, options_with(clock));
  for (const char* limit : {"log", "window", "bucket"}) {
    CAPTURE(limit);
    CHECK(engine.consume(limit, "old").reason == Reason::rate_limited);
    CHECK(engine.consume(limit, "new", 2).remaining == 0);
  }
  CHECK(engine.consume("window", "b").remaining == 0);
}

TEST_CASE("a migration that fails leaves the database as it was", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  create_application_database(path);
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE quota_log (mine TEXT); INSERT INTO quota_log VALUES ('keep me')");
  }
  const std::string before = dump(path);
  CHECK_THROWS_AS(Engine::open(path), Error);
  CHECK(dump(path) == before);
}

TEST_CASE("a file that is not a SQLite database is refused and left alone", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("random.bin");
  std::string bytes(4096, '\0');
  std::mt19937 random(7);
  for (char& byte : bytes) byte = static_cast<char>(random());
  const std::string text = "name,email\nalice,a@example.org\n";
  const auto content = GENERATE_COPY(bytes, text);
  {
    std::ofstream out(path, std::ios::binary);
    out << content;
  }
  CHECK(code_of_open(path, {}) == ErrorCode::not_a_database);
  Options no_migrate;
  no_migrate.migrate = false;
  CHECK(code_of_open(path, no_migrate) == ErrorCode::not_a_database);
  CHECK_THAT(message_of_open(path), Catch::Contains("not a SQLite database"));
  CHECK(same_bytes(path, content));
}

TEST_CASE("without migrate, an unmigrated database is refused and left alone", "[migrations]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  Options no_migrate;
  no_migrate.migrate = false;

  SECTION("an empty file") {
    { std::ofstream touch(path); }
    CHECK(code_of_open(path, no_migrate) == ErrorCode::not_migrated);
    CHECK(read_file(path).empty());
  }
  SECTION("a new file") { CHECK(code_of_open(path, no_migrate) == ErrorCode::not_migrated); }
  SECTION("an application's database") {
    create_application_database(path);
    const std::string before = dump(path);
    const std::string bytes = read_file(path);
    CHECK(code_of_open(path, no_migrate) == ErrorCode::not_migrated);
    CHECK_THAT(message_of_open(path, no_migrate), Catch::Contains("quotactl migrate"));
    CHECK(dump(path) == before);
    CHECK(journal_mode(path) == "delete");
    CHECK(same_bytes(path, bytes));
  }
}

TEST_CASE("engines opening a new file at the same time all get a migrated database",
          "[migrations]") {
  // Regression: apply_pending read the pending list before taking the write lock, so the
  // openers that lost the race re-ran 0001 and failed with "table quota_migrations already
  // exists" (ErrorCode::io). Embedding: several Engines and processes may share one file.
  int failed = 0;
  std::string message;
  for (int round = 0; round < 10; ++round) {
    TempDir dir;
    const std::string path = dir.file("quota.db");
    std::mutex mutex;
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&] {
        try {
          Engine engine = Engine::open(path);
          if (engine.schema_version() !=
              detail::latest_version(detail::built_in_sqlite_migrations()))
            throw Error(ErrorCode::io, "?");
        } catch (const Error& error) {
          std::lock_guard lock(mutex);
          ++failed;
          message = error.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  INFO(message);
  CHECK(failed == 0);
}

}  // namespace
}  // namespace quota::test
