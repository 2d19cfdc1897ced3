// Helpers shared by the tests: a clock the test moves, scratch files, raw SQL access.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quota/engine.h"

namespace quota::test {

// A clock that stands still until the test moves it.
struct ManualClock {
  std::shared_ptr<std::atomic<std::int64_t>> now =
      std::make_shared<std::atomic<std::int64_t>>(1'700'000'000'000);

  Clock clock() const {
    return [now = now] { return now->load(); };
  }
  void set(std::int64_t ms) { now->store(ms); }
  void advance(std::int64_t ms) { now->fetch_add(ms); }
  std::int64_t get() const { return now->load(); }
};

// How many seeds a long property run uses: `count`, or fewer when QUOTA_PROPERTY_SEEDS says
// so (tools/test.sh sets 1 for the sanitizers' build; the Release build runs every seed).
int property_seeds(int count);

inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::sliding_log, Algorithm::fixed_window,
                                               Algorithm::sliding_window, Algorithm::token_bucket};

// A limit of `algorithm`, `maximum` per `period_ms`.
Limit make_limit(const std::string& name, Algorithm algorithm = Algorithm::sliding_log,
                 std::int64_t maximum = 3, std::int64_t period_ms = 1000);

// A token bucket; no `burst` means a capacity of `maximum`.
Limit make_bucket(const std::string& name, std::int64_t maximum, std::int64_t period_ms,
                  std::optional<std::int64_t> burst = std::nullopt);

// An override written with plain SQL, as docs/sql.md shows (the same text on both backends).
std::string plain_override_sql(const Override& override);

// Options with the manual clock installed.
Options options_with(const ManualClock& clock);

// A fresh, empty folder for the current test, removed when the object goes away.
class TempDir {
 public:
  // Where the folder is made: under $QUOTA_TEST_TMP (the build folder's tests/tmp), or, for
  // a test that drops to uid 65534 (become_unprivileged), in /tmp, which that user can reach
  // wherever the repository is cloned (root's home folder is mode 700); the folder is then
  // mode 755.
  enum class Reach { tests, anyone };
  explicit TempDir(Reach reach = Reach::tests);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A plain SQLite connection (no Engine), for SQL-only checks and inspection.
class RawDb {
 public:
  explicit RawDb(const std::string& path);
  ~RawDb();
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* handle() const { return db_; }
  void exec(const std::string& sql);
  // Rows of `sql`, every value as text ("NULL" for NULL).
  std::vector<std::vector<std::string>> rows(const std::string& sql);
  // The single value of `sql` as an integer.
  std::int64_t integer(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
};

// A new database file with an Engine on it (its clock standing still until the test moves
// it) and a plain connection beside it: the fixture of most tests of one file.
struct EngineOnFile {
  TempDir dir;
  std::string path = dir.file("quota.db");
  ManualClock clock;
  Engine engine = Engine::open(path, options_with(clock));
  RawDb raw{path};
};

// The full text of `sqlite3 PATH .dump`-like content: every schema entry and every row, to
// prove that a failed operation changed nothing.
std::string dump(const std::string& path);

// The bytes of a file.
std::string read_file(const std::string& path);

// Runs `body` in a forked child process, which exits with what `body` returns (125 when it
// throws). The child never returns into the test runner. Returns the child's pid.
int fork_child(const std::function<int()>& body);

// Runs `body` in a forked child and returns the text it returned, or a line saying how the
// child failed.
std::string text_of_child(const std::function<std::string()>& body);

// When the tests run as root, makes this process user and group 65534 (nobody), so that file
// permissions bind it as they bind an ordinary user; for a forked child only. False when that
// failed.
bool become_unprivileged();

// A child process that holds the write lock of `path` (BEGIN IMMEDIATE, then `inside`, if
// any, within the transaction) until the object goes away; then it rolls back.
class LockHolder {
 public:
  explicit LockHolder(const std::string& path, const std::string& inside = "");
  ~LockHolder();
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;

 private:
  int pid_ = -1;
  int release_ = -1;
};

// Waits for the child `pid` to end: its exit status, or 128 + the signal that killed it.
int wait_child(int pid);

// A program run with a pseudo-terminal as its terminal (stdin, stdout and stderr).
struct TerminalRun {
  std::string out;        // everything it wrote there, as written ("\r\n" for "\n")
  int status = -1;        // its exit status, or 128 + the signal that ended it
  bool restored = false;  // the terminal's modes at its end: lines and echo, as at its start
};

// Runs `words` (the program's path, then its arguments) with exactly `environment` on a new
// pseudo-terminal, until it closes the terminal or `timeout` passes (then it is killed).
// `interact`, if given, is called with the terminal and the output so far whenever output
// arrives, and may write keys to it.
TerminalRun run_on_terminal(std::vector<std::string> words, std::vector<std::string> environment,
                            const std::function<void(int, const std::string&)>& interact = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The crash tests' kill: after `pause`, kills the child `pid` with SIGKILL and waits for it
// (returning what wait_child returns), then reads every byte the child still wrote down
// `reports` (each an index into `reported`, whose count it adds one to) and closes it.
int kill_and_count_reports(int pid, std::chrono::microseconds pause, int reports,
                           std::vector<std::int64_t>& reported);

}  // namespace quota::test
