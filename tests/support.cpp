#include "support.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace quota::test {

int property_seeds(int count) {
  const char* text = std::getenv("QUOTA_PROPERTY_SEEDS");
  if (!text || !*text) return count;
  const int most = std::atoi(text);
  return most >= 1 && most < count ? most : count;
}


Limit make_limit(const std::string& name, Algorithm algorithm, std::int64_t maximum,
                 std::int64_t period_ms) {
  Limit limit;
  limit.name = name;
  limit.algorithm = algorithm;
  limit.maximum = maximum;
  limit.period = std::chrono::milliseconds(period_ms);
  return limit;
}

Limit make_bucket(const std::string& name, std::int64_t maximum, std::int64_t period_ms,
                  std::optional<std::int64_t> burst) {
  Limit limit = make_limit(name, Algorithm::token_bucket, maximum, period_ms);
  limit.burst = burst;
  return limit;
}

Options options_with(const ManualClock& clock) {
  Options options;
  options.clock = clock.clock();
  // The tests move time themselves; the tests of expiry turn it on (expiry_test.cpp).
  options.expire_interval = std::chrono::milliseconds{0};
  return options;
}

TempDir::TempDir(Reach reach) {
  if (reach == Reach::anyone) {
    char pattern[] = "/tmp/quota-test-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      throw std::runtime_error(std::string("cannot make a folder in /tmp: ") +
                               std::strerror(errno));
    }
    path_ = pattern;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all |
                                            std::filesystem::perms::group_read |
                                            std::filesystem::perms::group_exec |
                                            std::filesystem::perms::others_read |
                                            std::filesystem::perms::others_exec);
    return;
  }
  const char* root = std::getenv("QUOTA_TEST_TMP");
  const std::filesystem::path base = root ? root : std::filesystem::temp_directory_path();
  std::filesystem::create_directories(base);
  std::random_device random;
  for (;;) {
    path_ = base / ("quota-test-" + std::to_string(random()));
    if (std::filesystem::create_directory(path_)) break;
  }
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path_, ignored);
}

RawDb::RawDb(const std::string& path) {
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    throw std::runtime_error("cannot open " + path);
  }
}

RawDb::~RawDb() { sqlite3_close(db_); }

void RawDb::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "?";
    sqlite3_free(message);
    throw std::runtime_error(text);
  }
}

std::vector<std::vector<std::string>> RawDb::rows(const std::string& sql) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    throw std::runtime_error(sqlite3_errmsg(db_));
  }
  std::vector<std::vector<std::string>> result;
  int status;
  while ((status = sqlite3_step(statement)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(statement); ++i) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, i));
      row.push_back(text ? text : "NULL");
    }
    result.push_back(std::move(row));
  }
  sqlite3_finalize(statement);
  if (status != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db_));
  return result;
}

std::int64_t RawDb::integer(const std::string& sql) {
  const auto result = rows(sql);
  if (result.empty() || result[0].empty()) throw std::runtime_error("no value: " + sql);
  return std::stoll(result[0][0]);
}

std::string dump(const std::string& path) {
  RawDb db(path);
  std::ostringstream out;
  for (const auto& entry :
       db.rows("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")) {
    out << entry[0] << ' ' << entry[1] << ' ' << entry[2] << '\n';
    if (entry[0] == "table") {
      for (const auto& row : db.rows("SELECT * FROM \"" + entry[1] + "\"")) {
        for (const auto& value : row) out << value << '|';
        out << '\n';
      }
    }
  }
  return out.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int fork_child(const std::function<int()>& body) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid > 0) return pid;
  // A child dies with the test process: one that a failed REQUIRE left behind (a lease holder
  // waiting to be killed, say) would otherwise keep the test's output pipe open, and CTest
  // would wait for it forever.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(124);
  int status = 125;
  try {
    status = body();
  } catch (const std::exception& error) {
    // The child's exception would be lost with it: say what it was.
    std::fprintf(stderr, "child process %d: exception: %s\n", static_cast<int>(getpid()),
                 error.what());
  } catch (...) {
    std::fprintf(stderr, "child process %d: an exception that is not a std::exception\n",
                 static_cast<int>(getpid()));
  }
  _exit(status);  // no atexit handlers, no flushing of the parent's buffers a second time
}

bool become_unprivileged() { return geteuid() != 0 || (setgid(65534) == 0 && setuid(65534) == 0); }

std::string text_of_child(const std::function<std::string()>& body) {
  int ends[2];
  if (pipe(ends) != 0) throw std::runtime_error("pipe failed");
  const int pid = fork_child([&] {
    close(ends[0]);
    const std::string text = body();
    std::size_t written = 0;
    while (written < text.size()) {
      const ssize_t size = write(ends[1], text.data() + written, text.size() - written);
      if (size <= 0) return 123;
      written += static_cast<std::size_t>(size);
    }
    return 0;
  });
  close(ends[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t size; (size = read(ends[0], buffer, sizeof buffer)) != 0;) {
    if (size < 0 && errno == EINTR) continue;
    if (size < 0) break;
    text.append(buffer, static_cast<std::size_t>(size));
  }
  close(ends[0]);
  const int status = wait_child(pid);
  if (status != 0) return "the child failed with status " + std::to_string(status);
  return text;
}

int wait_child(int pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int kill_and_count_reports(int pid, std::chrono::microseconds pause, int reports,
                           std::vector<std::int64_t>& reported) {
  std::this_thread::sleep_for(pause);
  if (kill(pid, SIGKILL) != 0) throw std::runtime_error("kill failed");
  const int status = wait_child(pid);
  char index = 0;
  while (read(reports, &index, 1) == 1) ++reported.at(static_cast<std::size_t>(index));
  close(reports);
  return status;
}

LockHolder::LockHolder(const std::string& path, const std::string& inside) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork_child([&] {
    close(to_child[1]);
    close(from_child[0]);
    RawDb db(path);
    db.exec("BEGIN IMMEDIATE");
    if (!inside.empty()) db.exec(inside);
    char byte = 'L';
    if (write(from_child[1], &byte, 1) != 1) return 1;
    (void)!read(to_child[0], &byte, 1);  // until the parent closes its end
    db.exec("ROLLBACK");
    return 0;
  });
  close(to_child[0]);
  close(from_child[1]);
  release_ = to_child[1];
  char byte = 0;
  const bool locked = read(from_child[0], &byte, 1) == 1;
  close(from_child[0]);
  if (!locked) {
    close(release_);
    wait_child(pid_);
    throw std::runtime_error("the lock holder failed before taking its lock");
  }
}

LockHolder::~LockHolder() {
  close(release_);
  wait_child(pid_);
}

TerminalRun run_on_terminal(std::vector<std::string> words, std::vector<std::string> environment,
                            const std::function<void(int, const std::string&)>& interact,
                            std::chrono::milliseconds timeout) {
  // Built before fork(): the child only calls execve() and _exit().
  std::vector<char*> argv, envp;
  for (std::string& word : words) argv.push_back(word.data());
  for (std::string& variable : environment) envp.push_back(variable.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  TerminalRun run;
  int terminal = -1;
  const pid_t child = forkpty(&terminal, nullptr, nullptr, nullptr);
  if (child < 0) return run;
  if (child == 0) {
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd fd{terminal, POLLIN, 0};
    if (poll(&fd, 1, 100) <= 0) continue;
    const ssize_t size = read(terminal, buffer, sizeof buffer);
    if (size > 0) {
      run.out.append(buffer, static_cast<std::size_t>(size));
      if (interact) interact(terminal, run.out);
    } else if (size < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO: the child has closed the terminal
    }
  }
  termios modes{};
  if (tcgetattr(terminal, &modes) == 0) {
    run.restored = (modes.c_lflag & ICANON) && (modes.c_lflag & ECHO);
  }
  if (std::chrono::steady_clock::now() >= until) kill(child, SIGKILL);
  run.status = wait_child(child);
  // Once it has ended, whatever it wrote that a kernel still had queued at the first EIO.
  fcntl(terminal, F_SETFL, fcntl(terminal, F_GETFL) | O_NONBLOCK);
  for (;;) {
    const ssize_t size = read(terminal, buffer, sizeof buffer);
    if (size > 0) {
      run.out.append(buffer, static_cast<std::size_t>(size));
    } else if (size == 0 || errno != EINTR) {
      break;  // EIO: nothing left; EAGAIN: nothing now, and it has ended
    }
  }
  close(terminal);
  return run;
}

std::string plain_override_sql(const Override& override) {
  auto number = [](const std::optional<std::int64_t>& value) {
    return value ? std::to_string(*value) : std::string("NULL");
  };
  return "INSERT INTO quota_overrides (limit_name, owner, policy, maximum, burst) VALUES ('" +
         override.limit + "', '" + override.owner + "', '" +
         std::string(to_string(override.policy)) + "', " + number(override.maximum) + ", " +
         number(override.burst) +
         ") ON CONFLICT (limit_name, owner) DO UPDATE SET policy = excluded.policy, "
         "maximum = excluded.maximum, burst = excluded.burst";
}

}  // namespace quota::test
