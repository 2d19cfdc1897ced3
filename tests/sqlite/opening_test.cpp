// Opening a file that a killed process or other openers left in the middle of something: a
// transaction a killed process left unfinished in rollback-journal mode (a hot journal) is
// rolled back by the next open, by quotactl and the library alike; and processes opening a
// new file at once all wait each other out within the busy timeout (docs/guarantees.md).
#include <SQLiteCpp/Exception.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "quota/admin.h"
#include "sqlite/busy.h"
#include "sqlite/sqlite_store.h"
#include "support.h"
#include "support/quotactl_run.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t T = 1'700'000'000'000;

// `quotactl --db PATH --now T ARGS...`, run in this process.
QuotactlRun quotactl_run(const std::string& path, std::vector<std::string> args) {
  return run_quotactl_at(path, T, std::move(args));
}

// Forks children that each wait for a go, then run the quotactl binary with `args` and its
// output discarded (or `body`, when given); released together by go().
class Starters {
 public:
  explicit Starters(int count, const std::vector<std::string>& args,
                    const std::function<int()>& body = nullptr) {
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    // Built before fork(): a child only calls async-signal-safe functions before exec.
    std::vector<std::string> words{QUOTACTL_PATH};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    for (int i = 0; i < count; ++i) {
      pids_.push_back(fork_child([&]() -> int {
        close(ends[1]);
        char byte = 0;
        if (read(ends[0], &byte, 1) < 0) _exit(122);  // 0 at the go: the write end closed
        close(ends[0]);
        if (body) return body();
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execv(argv[0], argv.data());
        _exit(127);
      }));
    }
    close(ends[0]);
    go_ = ends[1];
  }
  ~Starters() {
    if (go_ >= 0) {  // never released (a failed REQUIRE): the children are not to run
      for (const int pid : pids_) kill(pid, SIGKILL);
      close(go_);
    }
    for (const int pid : pids_) wait_child(pid);
  }
  Starters(const Starters&) = delete;
  Starters& operator=(const Starters&) = delete;

  void go() {
    close(go_);
    go_ = -1;
  }
  // Every child's exit status (128 + the signal for a killed one), once all have ended.
  std::vector<int> statuses() {
    std::vector<int> found;
    for (const int pid : pids_) found.push_back(wait_child(pid));
    pids_.clear();
    return found;
  }
  const std::vector<int>& pids() const { return pids_; }

 private:
  std::vector<int> pids_;
  int go_ = -1;
};

void remove_database(const std::string& path) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
    std::filesystem::remove(path + suffix);
  }
}

// Whether `path` is an intact database migrated by this build, in WAL mode.
std::string migrated_problem(const std::string& path) {
  RawDb db(path);
  if (db.rows("PRAGMA integrity_check") != std::vector<std::vector<std::string>>{{"ok"}}) {
    return "integrity_check fails";
  }
  if (db.rows("PRAGMA journal_mode") != std::vector<std::vector<std::string>>{{"wal"}}) {
    return "not in WAL mode";
  }
  const std::int64_t latest = detail::latest_version(detail::built_in_sqlite_migrations());
  if (db.integer("SELECT count(*) FROM quota_migrations") != latest ||
      db.integer("SELECT max(version) FROM quota_migrations") != latest) {
    return "not migrated to the latest version";
  }
  return "";
}

// The extended code of reading `path` on a read-only connection (SQLITE_OK when it reads).
int read_only_read(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_extended_result_codes(db, 1);
  const int status =
      sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return status;
}

// Leaves in `path` (a database in rollback-journal mode) the journal of a transaction that a
// process began, wrote to the file, and was killed in: a hot journal. Returns the state of
// the file before that transaction.
std::string leave_unfinished_transaction(const std::string& path) {
  RawDb(path).exec("PRAGMA journal_mode = DELETE");
  const std::string before = dump(path);
  const int pid = fork_child([&] {
    RawDb db(path);
    // A cache of one page: the transaction's pages go to the file before any commit.
    db.exec(
        "PRAGMA cache_size = 1; BEGIN IMMEDIATE; "
        "CREATE TABLE IF NOT EXISTS scratch (body TEXT); "
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) "
        "INSERT INTO scratch SELECT hex(randomblob(500)) FROM n; "
        "DELETE FROM quota_limits");
    raise(SIGKILL);
    return 0;
  });
  REQUIRE(wait_child(pid) == 128 + SIGKILL);
  REQUIRE(std::filesystem::file_size(path + "-journal") > 0);
  REQUIRE(read_only_read(path) == SQLITE_READONLY_ROLLBACK);
  return before;
}

// A migrated database with a limit, in rollback-journal mode.
std::string make_database(const TempDir& dir) {
  const std::string path = dir.file("quota.db");
  REQUIRE(quotactl_run(path, {"migrate"}).status == 0);
  REQUIRE(quotactl_run(path, {"limit", "set", "send", "--max", "3", "--per", "1m"}).status == 0);
  REQUIRE(quotactl_run(path, {"consume", "send", "u1"}).status == 0);
  return path;
}

TEST_CASE("a transaction a killed process left unfinished is rolled back by the next open",
          "[opening][crash]") {
  // Regression: quotactl opened the file read-only first, which cannot roll back a hot
  // journal, so every command failed with "cannot be written ... check the permissions".
  TempDir dir;
  const std::string path = make_database(dir);

  SECTION("quotactl status rolls it back and says so") {
    const std::string before = leave_unfinished_transaction(path);
    const QuotactlRun run = quotactl_run(path, {"status", "--json"});
    INFO(run.err);
    REQUIRE(run.status == 0);
    const json status = json::parse(run.out);
    CHECK(status["recovered_journal"] == true);
    CHECK(status["limits"] == 1);
    CHECK(status["schema_version"] == detail::latest_version(detail::built_in_sqlite_migrations()));
    CHECK(dump(path) == before);
    CHECK_FALSE(std::filesystem::exists(path + "-journal"));
    // Nothing left to recover the next time.
    CHECK(json::parse(quotactl_run(path, {"status", "--json"}).out)["recovered_journal"] == false);
    leave_unfinished_transaction(path);
    const QuotactlRun human = quotactl_run(path, {"status"});
    CHECK(human.status == 0);
    CHECK_THAT(human.out, Catch::Contains("recovered       rolled back"));
  }
  SECTION("every other quotactl command rolls it back") {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"consume", "send", "u1"},
                                                 {"check", "send", "u1"},
                                                 {"limit", "list"},
                                                 {"usage", "send"},
                                                 {"migrate"},
                                                 {"gc"}}) {
      INFO(args[0]);
      const std::string before = leave_unfinished_transaction(path);
      const QuotactlRun run = quotactl_run(path, args);
      CHECK(run.err == "");
      CHECK(run.status == 0);
      if (args[0] != "consume") CHECK(dump(path) == before);
      CHECK(read_only_read(path) == SQLITE_OK);
    }
  }
  SECTION("the library's open rolls it back") {
    const std::string before = leave_unfinished_transaction(path);
    Options options;
    options.clock = [] { return T; };
    Engine engine = Engine::open(path, options);
    CHECK(engine.list().size() == 1);
    CHECK(engine.consume("send", "u1").remaining == 1);
  }
}

TEST_CASE(
    "a hot journal that cannot be rolled back for lack of write access says so, and changes "
    "nothing",
    "[opening][faults]") {
  TempDir dir(TempDir::Reach::anyone);  // uid 65534 reaches it wherever the clone lives
  const std::string path = make_database(dir);
  leave_unfinished_transaction(path);
  const std::string bytes = read_file(path);
  const std::string journal = read_file(path + "-journal");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::group_read |
                                         std::filesystem::perms::others_read);
  const std::string outcome = text_of_child([&] {
    if (!become_unprivileged()) return std::string("cannot drop privileges");
    std::string text;
    try {
      Engine::open(path);
      text += "opened\n";
    } catch (const Error& error) {
      text += std::string(to_string(error.code())) + ": " + error.what() + "\n";
    }
    for (const char* command : {"status", "consume"}) {
      std::vector<std::string> args{command};
      if (args[0] == "consume") args.insert(args.end(), {"send", "u1"});
      const QuotactlRun run = quotactl_run(path, args);
      text += std::to_string(run.status) + "|" + run.err;
    }
    return text;
  });
  INFO(outcome);
  CHECK_THAT(outcome,
             Catch::StartsWith("io: the database holds the journal of a transaction that a "
                               "process left unfinished"));
  const std::string quoted = "'" + path + "'";
  CHECK_THAT(outcome, Catch::Contains("3|quotactl: error: " + quoted +
                                      " holds the journal of a transaction that a process "
                                      "left unfinished ('" +
                                      path + "-journal')"));
  CHECK_THAT(outcome, Catch::Contains("write access to the file and its folder"));
  CHECK_THAT(outcome, Catch::Contains("do not delete"));
  CHECK_THAT(outcome, !Catch::Contains("check the permissions"));
  CHECK(read_file(path) == bytes);
  CHECK(read_file(path + "-journal") == journal);
}

// Whether `path` has a -wal or -shm file beside it.
bool has_wal_files(const std::string& path) {
  return std::filesystem::exists(path + "-wal") || std::filesystem::exists(path + "-shm");
}

TEST_CASE("status reads a WAL database without leaving -wal or -shm files, and says it is WAL",
          "[opening][status]") {
  TempDir dir(TempDir::Reach::anyone);  // uid 65534 reaches it wherever the clone lives
  const std::string path = make_database(dir);
  REQUIRE_FALSE(has_wal_files(path));
  const std::string bytes = read_file(path);

  SECTION("by a user who may write it") {
    const QuotactlRun run = quotactl_run(path, {"status", "--json"});
    INFO(run.err);
    REQUIRE(run.status == 0);
    CHECK(json::parse(run.out)["journal_mode"] == "wal");
    CHECK_FALSE(has_wal_files(path));
    CHECK(admin::schema_status(path).version > 0);
    CHECK(admin::summarize(path).journal_mode == "wal");
    CHECK_FALSE(has_wal_files(path));
    CHECK(read_file(path) == bytes);
  }
  SECTION("by a user who may only read it") {
    std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::group_read |
                                           std::filesystem::perms::others_read);
    for (const bool folder_writable : {true, false}) {
      CAPTURE(folder_writable);
      std::filesystem::permissions(dir.path(), folder_writable
                                                   ? std::filesystem::perms::all
                                                   : std::filesystem::perms::owner_all |
                                                         std::filesystem::perms::group_read |
                                                         std::filesystem::perms::group_exec |
                                                         std::filesystem::perms::others_read |
                                                         std::filesystem::perms::others_exec);
      const std::string outcome = text_of_child([&] {
        if (!become_unprivileged()) return std::string("cannot drop privileges");
        const QuotactlRun run = quotactl_run(path, {"status", "--json"});
        if (run.status != 0) return std::to_string(run.status) + "|" + run.err;
        return "0|" + json::parse(run.out)["journal_mode"].get<std::string>() + "|" +
               (has_wal_files(path) ? "files left" : "no files");
      });
      CHECK(outcome == "0|wal|no files");
      CHECK_FALSE(has_wal_files(path));
      CHECK(read_file(path) == bytes);
    }
    std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  }
}

TEST_CASE("quotactl migrate killed at random moments on a new file: the next commands succeed",
          "[slow][opening][crash]") {
  // Regression: a kill during the switch to WAL left a hot journal (a 4,096-byte file and a
  // 512-byte -journal) that every quotactl command then refused as read-only.
  TempDir dir;
  const std::string path = dir.file("quota.db");
  // How long a whole migrate takes here, and when it creates the file, so that the kills
  // spread over all of it: every other round over the whole, the others from the moment the
  // file exists (a slow start, as under the sanitizers, would otherwise leave too few kills
  // inside the migration).
  std::chrono::microseconds whole{0};
  std::chrono::microseconds creating{0};
  {
    Starters one(1, {"--db", path, "migrate"});
    const auto started = Clock::now();
    one.go();
    while (!std::filesystem::exists(path) && Clock::now() - started < std::chrono::seconds(10)) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    creating = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
    REQUIRE(one.statuses() == std::vector<int>{0});
    whole = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
  }
  CAPTURE(whole.count(), creating.count());
  std::mt19937 random(20241125);
  constexpr int kRounds = 300;
  int unfinished = 0;  // rounds whose kill left a journal that status rolled back
  int created = 0;     // rounds whose kill came after the file was created
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    remove_database(path);
    Starters child(1, {"--db", path, "migrate"});
    const std::int64_t earliest = round % 2 == 0 ? 0 : std::min(creating, whole).count();
    const auto delay = std::chrono::microseconds(
        std::uniform_int_distribution<std::int64_t>(earliest, whole.count())(random));
    child.go();
    std::this_thread::sleep_for(delay);
    kill(child.pids()[0], SIGKILL);
    const int status = child.statuses()[0];
    REQUIRE((status == 0 || status == 128 + SIGKILL));

    const QuotactlRun run = quotactl_run(path, {"status", "--json"});
    INFO(run.err);
    if (std::filesystem::exists(path)) {
      ++created;
      REQUIRE(run.status == 0);
      if (json::parse(run.out)["recovered_journal"] == true) ++unfinished;
    } else {
      REQUIRE(run.status == 3);  // killed before the file was made: "does not exist"
      REQUIRE_THAT(run.err, Catch::Contains("does not exist"));
    }
    const QuotactlRun migrate = quotactl_run(path, {"migrate"});
    INFO(migrate.err);
    REQUIRE(migrate.status == 0);
    REQUIRE(migrated_problem(path) == "");
  }
  CAPTURE(created, unfinished);
  CHECK(created > kRounds / 4);  // the kills did land inside the migration
}

TEST_CASE("eight quotactl migrate started together on a new file all succeed",
          "[slow][opening][busy][concurrency]") {
  // Regression: SQLite answers busy without calling the busy handler in some steps (the
  // switch to WAL, a read lock upgraded to a write lock), so about 1 in 100 of these failed
  // after some 50 ms with "stayed locked ... past the busy timeout" although it is 5 s.
  TempDir dir;
  const std::string path = dir.file("quota.db");
  constexpr int kRounds = 100;
  constexpr int kProcesses = 8;
  int failed = 0;
  for (int round = 0; round < kRounds; ++round) {
    remove_database(path);
    Starters starters(kProcesses, {"--db", path, "migrate"});
    starters.go();
    for (const int status : starters.statuses()) failed += status != 0;
    REQUIRE(migrated_problem(path) == "");
  }
  CHECK(failed == 0);
}

TEST_CASE("eight processes opening a new file with the library at once all succeed",
          "[slow][opening][busy][concurrency]") {
  // The library's side of the same contention, each process on a connection of its own (the
  // threads of one process: "engines opening a new file at the same time ...").
  TempDir dir;
  const std::string path = dir.file("quota.db");
  constexpr int kRounds = 30;
  constexpr int kProcesses = 8;
  int failed = 0;
  for (int round = 0; round < kRounds; ++round) {
    remove_database(path);
    Starters starters(kProcesses, {}, [&] {
      Engine engine = Engine::open(path);
      return engine.schema_version() == detail::latest_version(detail::built_in_sqlite_migrations())
                 ? 0
                 : 1;
    });
    starters.go();
    for (const int status : starters.statuses()) failed += status != 0;
    REQUIRE(migrated_problem(path) == "");
  }
  CHECK(failed == 0);
}

TEST_CASE("opening a file locked past the busy timeout says so only once the timeout has passed",
          "[opening][busy]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  RawDb(path).exec("CREATE TABLE notes (body TEXT)");  // an application's, not yet migrated
  const std::string before = dump(path);
  constexpr auto kTimeout = std::chrono::milliseconds(300);
  {
    LockHolder holder(path, "CREATE TABLE held (x)");
    auto started = Clock::now();
    const QuotactlRun run = quotactl_run(path, {"migrate", "--busy-timeout", "300ms"});
    auto waited = Clock::now() - started;
    CHECK(run.status == 3);
    CHECK_THAT(run.err, Catch::Contains("locked by another connection past the busy timeout"));
    CHECK(waited >= kTimeout);

    Options options;
    options.busy_timeout = kTimeout;
    started = Clock::now();
    std::string error = "no error";
    try {
      Engine::open(path, options);
    } catch (const Error& failure) {
      error = std::string(to_string(failure.code())) + ": " + failure.what();
    }
    waited = Clock::now() - started;
    CHECK_THAT(error, Catch::StartsWith("busy: the database stayed locked by another "
                                        "connection for longer than the busy timeout (300 ms)"));
    CHECK(waited >= kTimeout);
  }
  CHECK(dump(path) == before);
}

TEST_CASE("wait_out runs a step again while SQLite answers busy, until the timeout has passed",
          "[opening][busy]") {
  const detail::BusyHandler busy(std::chrono::milliseconds(200));
  const SQLite::Exception busy_error("database is locked", SQLITE_BUSY);
  int runs = 0;
  SECTION("a step busy a few times, then done, is run until it is done") {
    busy.wait_out([&] {
      if (++runs < 5) throw busy_error;
    });
    CHECK(runs == 5);
  }
  SECTION("a step busy for ever fails with busy once the timeout has passed") {
    const auto started = Clock::now();
    CHECK_THROWS_AS(busy.wait_out([&] {
      ++runs;
      throw busy_error;
    }),
                    SQLite::Exception);
    CHECK(Clock::now() - started >= std::chrono::milliseconds(200));
    CHECK(runs > 1);
  }
  SECTION("any other failure is thrown at once") {
    CHECK_THROWS_WITH(busy.wait_out([&] {
      ++runs;
      throw SQLite::Exception("disk I/O error", SQLITE_IOERR);
    }),
                      "disk I/O error");
    CHECK(runs == 1);
  }
  SECTION("a busy step that leaves the connection inside a transaction is not run again") {
    RawDb db(":memory:");
    db.exec("BEGIN");
    CHECK_THROWS_AS(busy.wait_out(
                        [&] {
                          ++runs;
                          throw busy_error;
                        },
                        db.handle()),
                    SQLite::Exception);
    CHECK(runs == 1);
  }
}

}  // namespace
}  // namespace quota::test
