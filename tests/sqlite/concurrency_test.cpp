// Guarantees under contention on SQLite: processes and threads consuming on one WAL file admit
// exactly what each algorithm allows and lose no update (on PostgreSQL:
// tests/postgresql/backends_test.cpp); a held lock is waited out promptly, up to the busy timeout,
// then a clear busy error; a consume inside the application's transaction commits or rolls
// back with it, and a deferred transaction whose snapshot went stale is refused with what to
// do.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "quota/sqlite.h"
#include "sqlite/busy.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;  // the clock stands still: no window ends
constexpr std::int64_t kDay = 86'400'000;

// One limit per algorithm, each allowing kMaximum per day (a token bucket of that burst):
// with the clock standing still, exactly kMaximum consumes of an owner are allowed.
constexpr std::int64_t kMaximum = 5;
const std::array<Algorithm, 4> kAlgorithms = {Algorithm::sliding_log, Algorithm::fixed_window,
                                              Algorithm::sliding_window, Algorithm::token_bucket};

std::string limit_of(Algorithm algorithm) { return std::string(to_string(algorithm)); }

void define_all(const std::string& path) {
  ManualClock clock;
  clock.set(T);
  Engine engine = Engine::open(path, options_with(clock));
  for (const Algorithm algorithm : kAlgorithms) {
    engine.define(make_limit(limit_of(algorithm), algorithm, kMaximum, kDay));
  }
}

// What one process saw: allowed consumes per algorithm and owner, and errors.
constexpr int kOwners = 12;
struct Tally {
  std::array<std::array<std::int64_t, kOwners>, 4> allowed{};
  std::int64_t errors = 0;

  void add(const Tally& other) {
    errors += other.errors;
    for (std::size_t a = 0; a < allowed.size(); ++a) {
      for (int owner = 0; owner < kOwners; ++owner) allowed[a][owner] += other.allowed[a][owner];
    }
  }
};

// The work of one process: kThreads threads, the first two sharing one Engine, every other
// thread with an Engine of its own. Each thread, for every owner and algorithm, consumes
// `attempts` times and records once on owner "r".
constexpr int kThreads = 3;
Tally hammer(const std::string& path, int owners, int attempts) {
  ManualClock clock;
  clock.set(T);
  std::vector<Engine> engines;
  for (int i = 0; i < kThreads - 1; ++i) engines.push_back(Engine::open(path, options_with(clock)));
  std::vector<Tally> tallies(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    Engine& engine = engines[i == 0 ? 0 : i - 1];
    threads.emplace_back([&engine, &tally = tallies[i], owners, attempts] {
      for (int attempt = 0; attempt < attempts; ++attempt) {
        for (int owner = 0; owner < owners; ++owner) {
          for (std::size_t a = 0; a < kAlgorithms.size(); ++a) {
            try {
              const std::string limit = limit_of(kAlgorithms[a]);
              tally.allowed[a][owner] += engine.consume(limit, "u" + std::to_string(owner)).allowed;
              if (owner == 0) engine.record(limit, "r");
            } catch (const Error&) {
              ++tally.errors;
            }
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Tally total;
  for (const Tally& tally : tallies) total.add(tally);
  return total;
}

// Runs `processes` processes of hammer() on `path` at once and sums what they saw.
Tally hammer_in_processes(const std::string& path, int processes, int owners, int attempts) {
  std::vector<std::pair<int, int>> children;  // pid, read end of its pipe
  for (int p = 0; p < processes; ++p) {
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    const int pid = fork_child([&] {
      close(ends[0]);
      const Tally tally = hammer(path, owners, attempts);
      const bool written = write(ends[1], &tally, sizeof tally) == sizeof tally;
      return written ? 0 : 1;
    });
    close(ends[1]);
    children.emplace_back(pid, ends[0]);
  }
  Tally total;
  for (const auto& [pid, from] : children) {
    Tally tally;
    std::size_t got = 0;
    while (got < sizeof tally) {
      const ssize_t size = read(from, reinterpret_cast<char*>(&tally) + got, sizeof tally - got);
      if (size <= 0) break;
      got += static_cast<std::size_t>(size);
    }
    close(from);
    CHECK(wait_child(pid) == 0);
    REQUIRE(got == sizeof tally);
    total.add(tally);
  }
  return total;
}

// Every owner was admitted exactly kMaximum times in all, denied the rest, and every record
// on "r" is in the file.
void require_exact(const std::string& path, const Tally& total, int owners,
                   std::int64_t attempts_per_owner, std::int64_t records) {
  CHECK(total.errors == 0);
  ManualClock clock;
  clock.set(T);
  Engine engine = Engine::open(path, options_with(clock));
  for (std::size_t a = 0; a < kAlgorithms.size(); ++a) {
    const std::string limit = limit_of(kAlgorithms[a]);
    CAPTURE(limit);
    std::int64_t with_state = 0;
    for (const Usage& usage : engine.usage(limit)) {
      if (usage.owner == "r") {
        CHECK(usage.used == records);
        continue;
      }
      ++with_state;
      CAPTURE(usage.owner);
      CHECK(usage.used == kMaximum);
      CHECK(usage.denied == attempts_per_owner - kMaximum);
    }
    CHECK(with_state == owners);
    for (int owner = 0; owner < owners; ++owner) {
      CAPTURE(owner);
      CHECK(total.allowed[a][owner] == kMaximum);
    }
  }
}

TEST_CASE("4 processes of 3 threads on one SQLite file admit exactly the maximum, one owner",
          "[concurrency][sqlite]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_all(path);
  constexpr int kProcesses = 4, kAttempts = 12;
  const Tally total = hammer_in_processes(path, kProcesses, 1, kAttempts);
  const std::int64_t per_owner = std::int64_t{kProcesses} * kThreads * kAttempts;
  require_exact(path, total, 1, per_owner, per_owner);
}

TEST_CASE("4 processes of 3 threads on one SQLite file admit exactly the maximum, many owners",
          "[concurrency][sqlite]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_all(path);
  constexpr int kProcesses = 4, kAttempts = 3;
  const Tally total = hammer_in_processes(path, kProcesses, kOwners, kAttempts);
  const std::int64_t per_owner = std::int64_t{kProcesses} * kThreads * kAttempts;
  require_exact(path, total, kOwners, per_owner, per_owner);
}

// --- busy -------------------------------------------------------------------------------------

TEST_CASE("the busy handler yields first, then backs off to at most 128 us a pause",
          "[concurrency][sqlite][busy]") {
  using detail::BusyHandler;
  for (int attempt = 0; attempt < BusyHandler::kYields; ++attempt) {
    CHECK(BusyHandler::pause(attempt).count() == 0);
  }
  std::chrono::microseconds previous{0};
  for (int attempt = BusyHandler::kYields; attempt < 1000; ++attempt) {
    const auto pause = BusyHandler::pause(attempt);
    CHECK(pause > std::chrono::microseconds(0));
    CHECK(pause >= previous);
    CHECK(pause <= BusyHandler::kLongestPause);
    previous = pause;
  }
  CHECK(previous == BusyHandler::kLongestPause);
}

TEST_CASE(
    "a lock held past the busy timeout is a busy error that says what to do, and "
    "changes nothing",
    "[concurrency][sqlite][busy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_all(path);
  ManualClock clock;
  clock.set(T);
  Options options = options_with(clock);
  options.busy_timeout = std::chrono::milliseconds(200);
  Engine engine = Engine::open(path, options);
  CHECK(engine.consume("sliding_log", "u").allowed);
  const std::string before = dump(path);

  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");  // the write lock, until the rollback below
  for (const Algorithm algorithm : kAlgorithms) {
    CAPTURE(to_string(algorithm));
    const auto started = std::chrono::steady_clock::now();
    try {
      engine.consume(limit_of(algorithm), "u");
      FAIL("a consume succeeded while another connection held the write lock");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::busy);
      const std::string message = error.what();
      CHECK(message.find("locked by another connection") != std::string::npos);
      CHECK(message.find("200 ms") != std::string::npos);
      CHECK(message.find("raise the timeout") != std::string::npos);
    }
    // The handler gives up only once the timeout has passed (a lower bound, never flaky).
    CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(200));
  }
  holder.exec("ROLLBACK");
  CHECK(dump(path) == before);
  CHECK(engine.consume("sliding_log", "u").remaining == kMaximum - 2);
}

TEST_CASE("the busy handler outlives its Engine on the application's connection",
          "[concurrency][sqlite][busy]") {
  // Regression: the handler pointed into the Engine, so a connection that outlived its
  // Engine called into freed memory at its next wait (AddressSanitizer: heap-use-after-free).
  TempDir dir;
  const std::string path = dir.file("app.db");
  define_all(path);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  {
    Options options;
    options.busy_timeout = std::chrono::milliseconds(50);
    Engine engine = quota::sqlite::attach(db, options);
  }
  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");
  try {
    db.exec("DELETE FROM quota_limits");
    FAIL("a write succeeded while another connection held the write lock");
  } catch (const SQLite::Exception& error) {
    CHECK(error.getErrorCode() == SQLITE_BUSY);
  }
  holder.exec("ROLLBACK");
}

TEST_CASE("a lock released within the busy timeout is waited out", "[concurrency][sqlite][busy]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  define_all(path);
  ManualClock clock;
  clock.set(T);
  Engine engine = Engine::open(path, options_with(clock));  // the default 5 s
  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");
  std::atomic<bool> waiting{false};
  std::thread releaser([&] {
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    holder.exec("COMMIT");
  });
  waiting = true;
  for (const Algorithm algorithm : kAlgorithms) {
    CHECK(engine.consume(limit_of(algorithm), "u").allowed);
  }
  releaser.join();
}

// --- transactions ------------------------------------------------------------------------------

TEST_CASE(
    "a consume in a deferred transaction whose snapshot went stale is refused with what "
    "to do, and a retry succeeds",
    "[concurrency][sqlite][transactions]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  define_all(path);  // WAL mode
  ManualClock clock;
  clock.set(T);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  Engine engine = quota::sqlite::attach(db, options_with(clock));
  Engine other = Engine::open(path, options_with(clock));
  const Algorithm algorithm = GENERATE(Algorithm::sliding_log, Algorithm::fixed_window,
                                       Algorithm::sliding_window, Algorithm::token_bucket);
  const std::string limit = limit_of(algorithm);
  CAPTURE(limit);
  for (const FailurePolicy policy : {FailurePolicy::fail_closed, FailurePolicy::fail_open}) {
    Options options = options_with(clock);
    options.failure_policy = policy;
    Engine on_app = quota::sqlite::attach(db, options);
    {
      SQLite::Transaction transaction(db);       // BEGIN (deferred)
      CHECK(on_app.check(limit, "u").allowed);   // the transaction reads: its snapshot begins
      CHECK(other.consume(limit, "u").allowed);  // another connection writes meanwhile
      try {
        on_app.consume(limit, "u");
        FAIL("a write on a stale snapshot succeeded");
      } catch (const Error& error) {
        // Even fail_open refuses: the answer is a retry away, not unavailable.
        CHECK(error.code() == ErrorCode::busy);
        const std::string message = error.what();
        CHECK(message.find("SQLITE_BUSY_SNAPSHOT") != std::string::npos);
        CHECK(message.find("roll it back and run it again") != std::string::npos);
        CHECK(message.find("BEGIN IMMEDIATE") != std::string::npos);
      }
    }  // rolled back
    // The retry, as the message says: an immediate transaction takes the write lock first.
    {
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      CHECK(on_app.check(limit, "u").allowed);
      CHECK(other.check(limit, "u").allowed);  // readers still read
      CHECK(on_app.consume(limit, "u").allowed);
      transaction.commit();
    }
    engine.reset(limit, "u");
  }
}

TEST_CASE("a busy answer that SQLite gives at once does not claim that the busy timeout passed",
          "[concurrency][sqlite][transactions][busy]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  define_all(path);  // WAL mode
  ManualClock clock;
  clock.set(T);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  Engine on_app = quota::sqlite::attach(db, options_with(clock));  // the default 5 s
  RawDb holder(path);
  SQLite::Transaction transaction(db);              // BEGIN (deferred)
  CHECK(on_app.check("sliding_log", "u").allowed);  // the transaction reads
  holder.exec("BEGIN IMMEDIATE");                   // another connection takes the write lock
  const auto started = std::chrono::steady_clock::now();
  try {
    // A read that must upgrade to a write while another connection writes: no handler waits.
    on_app.consume("sliding_log", "u");
    FAIL("a write succeeded while another connection held the write lock");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::busy);
    const std::string message = error.what();
    CHECK(message.find("busy timeout") == std::string::npos);
    CHECK(message.find("5000 ms") == std::string::npos);
    CHECK(message.find("at once") != std::string::npos);
    CHECK(message.find("BEGIN IMMEDIATE") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  holder.exec("ROLLBACK");
}

TEST_CASE(
    "a consume in the application's transaction on a SQLite file commits or rolls back with it, "
    "as other connections see",
    "[concurrency][sqlite][transactions]") {
  TempDir dir;
  const std::string path = dir.file("app.db");
  define_all(path);
  ManualClock clock;
  clock.set(T);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  db.exec("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)");
  Engine engine = quota::sqlite::attach(db, options_with(clock));
  Engine other = Engine::open(path, options_with(clock));
  for (const Algorithm algorithm : kAlgorithms) {
    const std::string limit = limit_of(algorithm);
    CAPTURE(limit);
    {
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      db.exec("INSERT INTO messages (body) VALUES ('kept')");
      CHECK(engine.consume(limit, "u", 2).remaining == kMaximum - 2);
      // Not committed yet: another connection still sees the state before it.
      CHECK(other.check(limit, "u").remaining == kMaximum);
      transaction.commit();
    }
    CHECK(other.check(limit, "u").remaining == kMaximum - 2);
    {
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      db.exec("INSERT INTO messages (body) VALUES ('dropped')");
      CHECK(engine.consume(limit, "u", 3).remaining == 0);
      CHECK_FALSE(engine.consume(limit, "u").allowed);
    }  // rolled back: the usage and the denial go with the message
    const Result after = other.check(limit, "u");
    CHECK(after.remaining == kMaximum - 2);
    CHECK(after.denied == 0);
  }
  CHECK(db.execAndGet("SELECT count(*) FROM messages").getInt() == 4);
}

}  // namespace
}  // namespace quota::test
