// A desktop-style status line: how many messages its user has left, live, while other
// processes send on the same database file.
//
//   live DB_PATH USER [SECONDS]   shows "USER: N left, refills in S s" until Ctrl-C (or for
//                                 SECONDS), redrawn in place on a terminal, a line per
//                                 change otherwise
//   live DB_PATH USER --send      sends one message as USER (what another window would do)
//
// The limit, live.send, is a token bucket of 5 messages that refills one every 2 seconds. The
// line changes when a message is sent (by any process on the file) and when a message comes
// back, at the millisecond it does: Engine::watch calls back then, with no polling here. The
// callback asks the engine when the next message comes back (a check of one more than is
// left): a callback may use the Engine.
//
// Run by the test suite (tests/embedding/live_test.py) with sends from other processes.
#include <quota/engine.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

namespace {

constexpr const char* kLimit = "live.send";

volatile std::sig_atomic_t stopping = 0;
extern "C" void on_signal(int) { stopping = 1; }

// "3 left, refills in 1.6 s", or "5 left (full)".
std::string status_line(quota::Engine& engine, const quota::Usage& usage) {
  std::string line = usage.owner + ": " + std::to_string(usage.remaining) + " left";
  if (usage.remaining >= usage.capacity) return line + " (full)";
  const std::int64_t wait = engine.check(kLimit, usage.owner, usage.remaining + 1).retry_after_ms;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(wait) / 1000);
  return line + ", refills in " + seconds + " s";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: live DB_PATH USER [SECONDS | --send]\n";
    return 2;
  }
  const std::string user = argv[2];
  try {
    quota::Engine engine = quota::Engine::open(argv[1]);
    // Created on the first run; afterwards the file's limit wins (quotactl limit set).
    engine.ensure({kLimit, quota::Algorithm::token_bucket, 1, std::chrono::seconds(2), 5});
    if (argc == 4 && std::string(argv[3]) == "--send") {
      const quota::Result sent = engine.consume(kLimit, user);
      std::cout << (sent.allowed ? "sent\n" : "not sent: no message left\n");
      return sent.allowed ? 0 : 1;
    }
    const double seconds = argc == 4 ? std::stod(argv[3]) : 0;

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const bool terminal = isatty(1) != 0;
    quota::Watch watch = engine.watch(kLimit, user, [&](const quota::Usage& usage) {
      const std::string line = status_line(engine, usage);
      if (terminal) {
        std::cout << '\r' << line << "\x1b[K" << std::flush;
      } else {
        std::cout << line << '\n' << std::flush;
      }
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!stopping && (seconds <= 0 || std::chrono::steady_clock::now() < until)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    watch.stop();
    if (terminal) std::cout << '\n';
  } catch (const quota::Error& error) {
    std::cerr << "live: " << error.what() << '\n';
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "live: " << error.what() << '\n';
    return 2;
  }
  return 0;
}
