// Faults and bad files (guarantees): a truncated or corrupted database, a read-only file or
// folder, a full disk, a database locked by another process past the timeout. Each is a clear
// error that changes nothing, through the library and through quotactl. And the failure
// policy: what consume, check and record answer when the database itself fails.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

// A migrated file database with a limit of each algorithm and some state, every connection
// closed (so the file holds everything and no -wal file is left).
void make_database(const std::string& path) {
  ManualClock clock;
  clock.set(T);
  Engine engine = Engine::open(path, options_with(clock));
  engine.define(make_limit("log", Algorithm::sliding_log, 100, 60'000));
  engine.define(make_limit("win", Algorithm::fixed_window, 100, 60'000));
  engine.define(make_limit("sw", Algorithm::sliding_window, 100, 60'000));
  engine.define(make_bucket("tb", 100, 60'000));
  for (const char* limit : {"log", "win", "sw", "tb"}) {
    for (int owner = 0; owner < 50; ++owner) engine.consume(limit, "u" + std::to_string(owner));
  }
}

// "code: message" of the Error that opening `path` and consuming throws, or "no error".
std::string error_of_consume(const std::string& path, Options options = {}) {
  try {
    Engine engine = Engine::open(path, std::move(options));
    engine.consume("log", "u1");
    return "no error";
  } catch (const Error& error) {
    return std::string(to_string(error.code())) + ": " + error.what();
  }
}

// "status|stderr" of `quotactl --db PATH ARGS...`.
std::string quotactl_outcome(const std::string& path, std::vector<std::string> args) {
  args.insert(args.begin(), {"--db", path, "--now", std::to_string(T)});
  const QuotactlRun run = run_quotactl(args);
  return std::to_string(run.status) + "|" + run.err;
}

void overwrite(const std::string& path, std::size_t offset, const std::string& bytes) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const std::vector<std::vector<std::string>> kQuotactlCommands = {{"consume", "log", "u1"},
                                                                 {"check", "log", "u1"},
                                                                 {"record", "win", "u1"},
                                                                 {"reset", "sw", "u1"},
                                                                 {"limit", "list"},
                                                                 {"usage", "tb"},
                                                                 {"migrate"},
                                                                 {"status"},
                                                                 {"gc"}};

// The library and every quotactl command refuse the damaged file at `path` as corrupt, and
// leave its bytes as they were.
void require_refused_as_corrupt(const std::string& path) {
  const std::string bytes = read_file(path);
  const std::string error = error_of_consume(path);
  CHECK_THAT(error, Catch::StartsWith("io: the database file is corrupt"));
  CHECK_THAT(error, Catch::Contains("restore it from a backup"));
  for (const auto& args : kQuotactlCommands) {
    INFO(args[0]);
    const std::string outcome = quotactl_outcome(path, args);
    CHECK_THAT(outcome, Catch::StartsWith("3|quotactl: error: "));
    CHECK_THAT(outcome, Catch::Contains("corrupt") || Catch::Contains("malformed"));
  }
  CHECK(read_file(path) == bytes);
}

TEST_CASE("a truncated database is an error that changes nothing", "[faults]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  const std::string whole = read_file(path);
  REQUIRE(whole.size() > 3 * 4096);
  std::filesystem::resize_file(path, whole.size() / 2);
  require_refused_as_corrupt(path);
}

TEST_CASE("a corrupted database is an error that changes nothing", "[faults]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  const std::string whole = read_file(path);
  // Garbage over the b-tree page headers of every page but the first (the file header and the
  // schema stay readable, so SQLite opens the file and meets the damage on its first read).
  for (std::size_t page = 4096; page < whole.size(); page += 4096) {
    overwrite(path, page, std::string(64, '\xA5'));
  }
  require_refused_as_corrupt(path);
}

TEST_CASE("a read-only database file is an error that changes nothing", "[faults]") {
  TempDir dir(TempDir::Reach::anyone);  // uid 65534 reaches it wherever the clone lives
  const std::string path = dir.file("quota.db");
  make_database(path);
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);  // the -wal may be made
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::group_read |
                                         std::filesystem::perms::others_read);
  const std::string bytes = read_file(path);

  const std::string outcome = text_of_child([&] {
    if (!become_unprivileged()) return std::string("cannot drop privileges");
    std::string text = error_of_consume(path) + "\n";
    for (const auto& args : kQuotactlCommands) {
      const std::string result = quotactl_outcome(path, args);
      text += args[0] + ":" + result.substr(0, 1) + " ";
      if (args[0] == "consume") text += result.substr(2);
    }
    return text;
  });
  INFO(outcome);
  // The errors name the file and say why it cannot be written.
  CHECK_THAT(outcome, Catch::StartsWith("io: '" + path + "' cannot be written"));
  CHECK_THAT(outcome, Catch::Contains("the file is read-only for this user"));
  // What writes is refused; what only reads works (migrate and gc have nothing to write).
  CHECK_THAT(outcome, Catch::Contains("consume:3 quotactl: error: '" + path +
                                      "' cannot be written (attempt to write a readonly "
                                      "database): the file is read-only for this user"));
  CHECK_THAT(outcome, Catch::EndsWith("check:0 record:3 reset:3 limit:0 usage:0 migrate:0 "
                                      "status:0 gc:0 "));
  CHECK(read_file(path) == bytes);
}

TEST_CASE(
    "a database in a read-only folder (no -wal file can be made): what only reads works, what "
    "writes is an error naming the folder, and nothing changes",
    "[faults]") {
  TempDir dir(TempDir::Reach::anyone);  // uid 65534 reaches it wherever the clone lives
  const std::string folder = dir.file("data");
  std::filesystem::create_directory(folder);
  const std::string path = folder + "/quota.db";
  make_database(path);
  REQUIRE_FALSE(std::filesystem::exists(path + "-wal"));
  std::filesystem::permissions(path, std::filesystem::perms::all);
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  std::filesystem::permissions(
      folder, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                  std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
  const std::string bytes = read_file(path);

  // Every command that only reads, and those that write.
  const std::vector<std::vector<std::string>> commands{
      {"status"},          {"limit", "list"},           {"limit", "get", "log"},
      {"check", "log", "u1"}, {"usage", "tb"},          {"usage", "--owner", "u1"},
      {"sql", "consume", "log"}, {"override", "list"},  {"consume", "log", "u1"},
      {"record", "win", "u1"}, {"reset", "sw", "u1"},   {"limit", "rm", "log"},
      {"gc"},              {"migrate"}};
  const std::string outcome = text_of_child([&] {
    if (!become_unprivileged()) return std::string("cannot drop privileges");
    std::string text = error_of_consume(path) + "\n";
    for (const auto& args : commands) {
      const std::string result = quotactl_outcome(path, args);
      text += args[0] + (args.size() > 1 && args[0] != "check" ? " " + args[1] : "") + ":" +
              result.substr(0, 1) + " ";
      if (args[0] == "consume") text += result.substr(2);
    }
    return text;
  });
  INFO(outcome);
  // The errors name the file and say why it cannot be written: its folder.
  const std::string why = "' cannot be written (attempt to write a readonly database): its folder " +
                          folder + " cannot be written, and WAL mode keeps -wal and -shm files "
                          "beside the database";
  CHECK_THAT(outcome, Catch::StartsWith("io: '" + path + why));
  CHECK_THAT(outcome, Catch::Contains("consume log:3 quotactl: error: '" + path + why));
  // What only reads works; what writes is refused.
  CHECK_THAT(outcome, Catch::Contains("status:0 limit list:0 limit get:0 check:0 usage tb:0 usage "
                                      "--owner:0 sql consume:0 override list:0 consume log:3"));
  CHECK_THAT(outcome, Catch::EndsWith("record win:3 reset sw:3 limit rm:3 gc:3 migrate:3 "));
  std::filesystem::permissions(folder, std::filesystem::perms::all);
  CHECK(read_file(path) == bytes);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
}

// In a child whose files may not grow beyond `room` bytes more than the database file (as on
// a full disk; SIGXFSZ ignored, so a write beyond it fails with EFBIG): consumes for new owners
// until one fails, and returns "<owners consumed> <code>: <message>".
std::string fill_the_disk(const std::string& path, Options options, std::size_t room) {
  return text_of_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    const rlim_t size = std::filesystem::file_size(path) + room;
    const rlimit limit{size, size};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return std::string("setrlimit failed");
    ManualClock clock;
    clock.set(T);
    options.clock = clock.clock();
    int consumed = 0;
    std::string failure = "no error";
    try {
      Engine engine = Engine::open(path, std::move(options));
      for (; consumed < 100'000; ++consumed) {
        const Result result = engine.consume("win", "new" + std::to_string(consumed));
        if (result.reason == Reason::store_unavailable) {
          failure = "store_unavailable";
          break;
        }
      }
    } catch (const Error& error) {
      failure = std::string(to_string(error.code())) + ": " + error.what();
    }
    return std::to_string(consumed) + " " + failure;
  });
}

TEST_CASE("a full disk is an io error, and what was consumed before it is intact", "[faults]") {
  // Regression: the answer was read from RETURNING's first row and the statement's final
  // status ignored, so a commit that failed on a full disk answered allowed with nothing
  // stored (100,000 consumes allowed, 28 in the file).
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  const std::string outcome = fill_the_disk(path, {}, 64 * 1024);
  INFO(outcome);
  const int consumed = std::stoi(outcome);
  CHECK(consumed > 0);
  CHECK_THAT(outcome, Catch::Contains(" io: "));
  CHECK_THAT(outcome, Catch::Contains("full") || Catch::Contains("disk failed"));

  RawDb db(path);
  CHECK(db.rows("PRAGMA integrity_check") == std::vector<std::vector<std::string>>{{"ok"}});
  // Every consume that answered is in the file; the one that failed left nothing.
  CHECK(db.integer("SELECT count(*) FROM quota_windows WHERE owner LIKE 'new%'") == consumed);
  CHECK(db.integer("SELECT count(*) FROM quota_windows WHERE owner = 'new" +
                   std::to_string(consumed) + "'") == 0);
}

TEST_CASE("quotactl on a full disk: exit 3, the file intact", "[faults]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  const std::string outcome = text_of_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    const rlim_t size = 1024;  // not even a page of the -wal file
    const rlimit limit{size, size};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return std::string("setrlimit failed");
    return quotactl_outcome(path, {"limit", "set", "big", "--max", "5", "--per", "1m"});
  });
  CHECK_THAT(outcome, Catch::StartsWith("3|quotactl: error: "));
  RawDb db(path);
  CHECK(db.rows("PRAGMA integrity_check") == std::vector<std::vector<std::string>>{{"ok"}});
  CHECK(db.integer("SELECT count(*) FROM quota_limits WHERE name = 'big'") == 0);
}

TEST_CASE("a database locked by another process past the timeout: busy, exit 3, nothing changed",
          "[faults][busy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  const std::string before = dump(path);
  {
    LockHolder holder(path);
    Options options;
    options.busy_timeout = std::chrono::milliseconds(100);
    const std::string error = error_of_consume(path, options);
    CHECK_THAT(error, Catch::StartsWith("busy: the database stayed locked by another connection "
                                        "for longer than the busy timeout (100 ms)"));
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"consume", "log", "u1"},
          {"record", "log", "u1"},
          {"reset", "log", "u1"},
          {"limit", "set", "log", "--max", "1", "--per", "1s"},
          {"limit", "rm", "log"},
          {"gc"}}) {
      INFO(args[0]);
      auto with_timeout = args;
      with_timeout.insert(with_timeout.end(), {"--busy-timeout", "100ms"});
      const std::string outcome = quotactl_outcome(path, with_timeout);
      CHECK_THAT(outcome, Catch::StartsWith("3|quotactl: error: "));
      CHECK_THAT(outcome, Catch::Contains("locked by another connection"));
    }
    // Readers are not blocked by a writer in WAL mode.
    CHECK_THAT(quotactl_outcome(path, {"check", "log", "u1", "--busy-timeout", "100ms"}),
               Catch::StartsWith("0|"));
  }
  CHECK(dump(path) == before);
}

TEST_CASE("quotactl --busy-timeout takes a DURATION, checked before the database is opened",
          "[faults][busy][quotactl]") {
  TempDir dir;
  const std::string path = dir.file("missing.db");
  for (const char* bad : {"0ms", "-1s", "abc", "1.5s", "", "367d"}) {
    INFO(bad);
    const std::string outcome =
        quotactl_outcome(path, {"consume", "log", "u", "--busy-timeout", bad});
    CHECK_THAT(outcome, Catch::StartsWith("2|quotactl: error: invalid duration"));
    CHECK_THAT(outcome, Catch::Contains("--busy-timeout"));
    CHECK_THAT(outcome, !Catch::Contains("period"));  // a timeout is not a limit's period
  }
  CHECK_FALSE(std::filesystem::exists(path));
  const QuotactlRun help = run_quotactl({"--help"});
  CHECK_THAT(help.out, Catch::Contains("--busy-timeout DURATION"));
}

// --- the failure policy ------------------------------------------------------------------------

TEST_CASE("fail_closed (the default): a failing store is an error for every operation",
          "[faults][policy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  CHECK(Options{}.failure_policy == FailurePolicy::fail_closed);
  Options options;
  options.busy_timeout = std::chrono::milliseconds(50);
  int reported = 0;
  options.on_error = [&](const Error&) { ++reported; };  // fail_closed: the caller gets it
  Engine engine = Engine::open(path, options);
  LockHolder holder(path);
  CHECK_THROWS_AS(engine.consume("log", "u1"), Error);
  CHECK_THROWS_AS(engine.record("log", "u1"), Error);
  CHECK_THROWS_AS(engine.reset("log", "u1"), Error);
  CHECK(reported == 0);
}

TEST_CASE(
    "fail_open: consume, check and record answer allowed with store_unavailable and report "
    "the error",
    "[faults][policy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  ManualClock clock;
  clock.set(T + 5);
  Options options = options_with(clock);
  options.busy_timeout = std::chrono::milliseconds(50);
  options.failure_policy = FailurePolicy::fail_open;
  std::vector<std::string> reported;
  options.on_error = [&](const Error& error) {
    reported.push_back(std::string(to_string(error.code())) + ": " + error.what());
  };
  Engine engine = Engine::open(path, options);
  const std::string before = dump(path);
  {
    // A reader in a deferred transaction blocks no one; a writer holding the lock does.
    LockHolder holder(path);
    Result unavailable;
    unavailable.allowed = true;
    unavailable.reason = Reason::store_unavailable;
    unavailable.reset_at_ms = T + 5;
    CHECK(engine.consume("log", "u1") == unavailable);
    CHECK(engine.record("tb", "u1", 7) == unavailable);
    REQUIRE(reported.size() == 2);
    CHECK_THAT(reported[0], Catch::StartsWith("busy: the database stayed locked"));
    // check only reads, and a writer does not block readers in WAL: a real answer.
    CHECK(engine.check("log", "u1").reason == Reason::ok);
    CHECK(reported.size() == 2);

    // Bad input and unknown limits stay errors; so do the operations that are not requests.
    CHECK_THROWS_AS(engine.consume("log", "u1", 0), Error);
    CHECK_THROWS_AS(engine.consume("nope", "u1"), Error);
    CHECK_THROWS_AS(engine.reset("log", "u1"), Error);
    CHECK_THROWS_AS(engine.define(make_limit("new")), Error);
    CHECK(reported.size() == 2);
  }
  CHECK(dump(path) == before);
  CHECK(engine.consume("log", "u1").reason == Reason::ok);  // the store is back
}

TEST_CASE("fail_open: an on_error that throws makes the call throw", "[faults][policy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  Options options;
  options.busy_timeout = std::chrono::milliseconds(20);
  options.failure_policy = FailurePolicy::fail_open;
  options.on_error = [](const Error&) { throw std::runtime_error("logging failed"); };
  Engine engine = Engine::open(path, options);
  LockHolder holder(path);
  CHECK_THROWS_WITH(engine.consume("log", "u1"), "logging failed");
}

TEST_CASE("fail_open on a full disk: allowed, store_unavailable, the io error reported",
          "[faults][policy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  make_database(path);
  Options options;
  options.failure_policy = FailurePolicy::fail_open;
  const std::string outcome = fill_the_disk(path, options, 64 * 1024);
  INFO(outcome);
  CHECK(std::stoi(outcome) > 0);
  CHECK_THAT(outcome, Catch::EndsWith(" store_unavailable"));
  RawDb db(path);
  CHECK(db.rows("PRAGMA integrity_check") == std::vector<std::vector<std::string>>{{"ok"}});
}

}  // namespace
}  // namespace quota::test
