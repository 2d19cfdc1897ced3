// quotactl watch on every backend: NDJSON while another process consumes, and the live view
// in a real pseudo-terminal, left with q or Ctrl-C with the terminal as it was.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backend.h"
#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

extern char** environ;

namespace quota::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// `text` quoted for the shell.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST_CASE("quotactl watch --json prints usage's array at each change another process makes",
          "[quotactl][watch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    setup.define({"send", Algorithm::sliding_log, 100, std::chrono::hours(1)});
  }
  // Ten consumes, 50 ms apart, once the watch has printed its first line: well inside its two
  // seconds.
  int go[2];
  REQUIRE(pipe2(go, O_CLOEXEC) == 0);
  const int consumer = fork_child([&] {
    close(go[1]);
    char byte = 0;
    if (read(go[0], &byte, 1) != 1) return 1;
    Engine engine = Engine::open(database.location());
    for (int i = 0; i < 10; ++i) {
      engine.consume("send", i % 2 ? "u2" : "u1");
      std::this_thread::sleep_for(50ms);
    }
    return 0;
  });
  close(go[0]);
  const auto started = std::chrono::steady_clock::now();
  FILE* pipe = popen((std::string(QUOTACTL_PATH) + " --db " + quoted(database.location()) +
                      " --json watch send --for 2s")
                         .c_str(),
                     "r");
  REQUIRE(pipe);
  std::vector<std::string> lines;
  char buffer[4096];
  std::string line;
  while (std::fgets(buffer, sizeof buffer, pipe)) {
    line += buffer;
    if (line.ends_with('\n')) {
      lines.push_back(line);
      line.clear();
      if (lines.size() == 1) CHECK(write(go[1], "g", 1) == 1);
    }
  }
  close(go[1]);
  const int status = pclose(pipe);
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(wait_child(consumer) == 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(line.empty());  // every line ends
  CHECK(took >= 2s);

  REQUIRE(lines.size() >= 2);
  std::int64_t total_before = -1;
  json previous;
  for (const std::string& text : lines) {
    CAPTURE(text);
    const json document = json::parse(text);  // each line one JSON document
    REQUIRE(document.is_array());
    CHECK(document != previous);  // a line only when something changed
    std::int64_t total = 0;
    for (const json& row : document) {
      CHECK(row.size() == 8);
      for (const char* field :
           {"owner", "used", "remaining", "denied", "reset_at_ms", "shadow_denied", "capacity"}) {
        CHECK(row.contains(field));
      }
      CHECK(row["capacity"] == 100);
      CHECK(row["used"].get<std::int64_t>() + row["remaining"].get<std::int64_t>() == 100);
      total += row["used"].get<std::int64_t>();
    }
    CHECK(total > total_before);  // usage only grows here: each line shows more
    total_before = total;
    previous = document;
  }
  CHECK(json::parse(lines.front()) == json::array());  // nothing used when it began
  const json last = json::parse(lines.back());
  REQUIRE(last.size() == 2);
  CHECK(last[0]["used"] == 5);
  CHECK(last[1]["used"] == 5);
}

TEST_CASE("quotactl watch refuses bad input with exit 2", "[quotactl][watch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    setup.define({"send", Algorithm::sliding_log, 100, std::chrono::hours(1)});
  }
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", database.location()});
    const QuotactlRun answer = run_quotactl(args);
    return std::pair{answer.status, answer.err};
  };
  const auto [unknown, unknown_error] = run({"watch", "nope", "--for", "1s"});
  CHECK(unknown == 2);
  CHECK_THAT(unknown_error, Catch::Contains("unknown limit 'nope'"));
  const auto [duration, duration_error] = run({"watch", "send", "--for", "2x"});
  CHECK(duration == 2);
  CHECK_THAT(duration_error, Catch::Contains("--for"));
  const auto [zero, zero_error] = run({"watch", "send", "--for", "0s"});
  CHECK(zero == 2);
  const auto [now, now_error] = run({"--now", "5", "watch", "send", "--for", "1s"});
  CHECK(now == 2);
  CHECK_THAT(now_error, Catch::Contains("leave --now out"));
  const auto [owner, owner_error] = run({"watch", "send", "--owner", "", "--for", "1s"});
  CHECK(owner == 2);
  const auto [name, name_error] = run({"watch", "bad name", "--for", "1s"});
  CHECK(name == 2);
}

// quotactl watch with a pseudo-terminal as its terminal, left with `key` once it has drawn.
TerminalRun watch_on_terminal(const std::string& location, const std::string& key, bool no_color) {
  std::vector<std::string> variables;
  for (char** variable = environ; *variable; ++variable) {
    const std::string_view text(*variable);
    if (!text.starts_with("NO_COLOR=")) variables.emplace_back(text);
  }
  if (no_color) variables.emplace_back("NO_COLOR=1");
  bool pressed = false;
  return run_on_terminal({QUOTACTL_PATH, "--db", location, "watch", "send"}, variables,
                         [&](int terminal, const std::string& out) {
                           if (pressed || out.find("to leave") == std::string::npos) return;
                           pressed = write(terminal, key.data(), key.size()) ==
                                     static_cast<ssize_t>(key.size());
                         });
}

TEST_CASE("quotactl watch on a terminal draws the table in place and leaves on q or Ctrl-C",
          "[quotactl][watch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  const std::string key = GENERATE(std::string("q"), std::string("\x03"));
  const bool no_color = GENERATE(false, true);
  CAPTURE(to_string(backend), key == "q", no_color);
  TestDatabase database(backend);
  {
    Engine setup = Engine::open(database.location());
    setup.define({"send", Algorithm::sliding_log, 10, std::chrono::hours(1)});
    setup.consume("send", "alice", 3);
    setup.consume("send", "bob", 10);
  }
  const TerminalRun screen = watch_on_terminal(database.location(), key, no_color);
  CAPTURE(screen.out);
  CHECK(screen.status == 0);
  CHECK(screen.restored);
  // The alternate screen and a hidden cursor while it runs, both given back at the end.
  CHECK(screen.out.starts_with("\x1b[?1049h\x1b[?25l"));
  CHECK(screen.out.ends_with("\x1b[?25h\x1b[?1049l"));
  CHECK_THAT(screen.out, Catch::Contains("\x1b[H"));  // drawn from the top, in place
  CHECK_THAT(screen.out, Catch::Contains("OWNER"));
  CHECK_THAT(screen.out, Catch::Contains("alice"));
  CHECK_THAT(screen.out, Catch::Contains("3/10"));
  CHECK_THAT(screen.out, Catch::Contains("10/10"));
  if (no_color) {
    CHECK(screen.out.find("\x1b[3") == std::string::npos);  // no colour at all
    CHECK(screen.out.find("\x1b[1m") == std::string::npos);
    CHECK_THAT(screen.out, Catch::Contains("######"));
  } else {
    CHECK_THAT(screen.out, Catch::Contains("\x1b[31m####################"));  // bob: all used
    CHECK_THAT(screen.out, Catch::Contains("\x1b[32m######.............."));  // alice: 3 of 10
  }
}

// Whether the process `pid` is blocked in a write to its standard output (Linux's
// /proc/PID/syscall: the call's number, then its first argument).
bool writing_to_stdout(pid_t pid) {
  std::ifstream file(std::string("/proc/") + std::to_string(pid) + "/syscall");
  std::string number, fd;
  file >> number >> fd;
  return number == std::to_string(SYS_write) && fd == "0x1";
}

TEST_CASE("quotactl watch gives the terminal back when a signal interrupts a draw",
          "[quotactl][watch]") {
  // A table far larger than what a terminal holds unread: the first draw blocks in write()
  // while the test reads nothing, and each SIGINT then lands inside that write.
  TestDatabase database(Backend::sqlite);
  {
    Engine setup = Engine::open(database.location());
    setup.define({"send", Algorithm::sliding_log, 10, std::chrono::hours(1)});
    for (int owner = 0; owner < 1500; ++owner) {
      setup.consume("send",
                    std::string("owner-with-a-name-long-enough-to-fill-") + std::to_string(owner));
    }
  }
  int signals = 0;
  const TerminalRun screen = run_on_terminal(
      {QUOTACTL_PATH, "--db", database.location(), "watch", "send"}, {"NO_COLOR=1"},
      [&](int terminal, const std::string&) {
        if (signals > 0) return;
        const pid_t child = tcgetpgrp(terminal);  // a session of its own: its group is itself
        // Three signals, each once it is blocked again (or after a second): the first ends a
        // write that had written part of the draw, the next interrupt one that wrote nothing.
        for (; signals < 3; ++signals) {
          for (int wait = 0; wait < 20 && !writing_to_stdout(child); ++wait) {
            std::this_thread::sleep_for(50ms);
          }
          CHECK(kill(child, SIGINT) == 0);
        }
      });
  CAPTURE(screen.out.size());
  CHECK(signals == 3);
  CHECK(screen.status == 0);
  CHECK(screen.restored);
  CHECK(screen.out.starts_with("\x1b[?1049h\x1b[?25l"));
  CHECK(screen.out.ends_with("\x1b[?25h\x1b[?1049l"));
}

}  // namespace
}  // namespace quota::test
