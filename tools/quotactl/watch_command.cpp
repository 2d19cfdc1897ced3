// watch: a limit's usage, live (Engine::watch). On a terminal, usage's table redrawn in place
// like top, until `q`, Ctrl-C or the end of --for; with --json, usage's array again on a line
// of its own (NDJSON) at every change; otherwise usage's table again at every change.
#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <map>
#include <mutex>
#include <ostream>

#include "commands.h"
#include "text.h"

namespace quotactl {
namespace {

// The write end of the pipe that wakes the loop: a signal handler may only write().
std::atomic<int> wake_fd{-1};
volatile std::sig_atomic_t stop_signal = 0;

extern "C" void on_stop_signal(int) {
  stop_signal = 1;
  const int fd = wake_fd.load();
  if (fd >= 0) {
    const char byte = 's';
    [[maybe_unused]] const ssize_t written = write(fd, &byte, 1);
  }
}

// SIGINT and SIGTERM end the watch with exit 0 while it runs; the handlers before are put
// back after.
class StopSignals {
 public:
  explicit StopSignals(int wake) {
    stop_signal = 0;
    wake_fd = wake;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    // A write to the terminal that the signal interrupts goes on (else it fails with EINTR,
    // and the failed stream would swallow the sequences that give the terminal back).
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    wake_fd = -1;
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// The terminal while the view is on it: keys read one at a time without echo (Ctrl-C still
// a signal), the alternate screen, no cursor. Everything is put back when it goes.
class TerminalView {
 public:
  TerminalView(std::ostream& out, bool keys) : out_(out) {
    if (keys && tcgetattr(0, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = tcsetattr(0, TCSANOW, &raw) == 0;
    }
    out_ << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~TerminalView() {
    out_.clear();  // a draw that failed must not keep the terminal from being given back
    out_ << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (restore_) tcsetattr(0, TCSANOW, &saved_);
  }
  TerminalView(const TerminalView&) = delete;
  TerminalView& operator=(const TerminalView&) = delete;

  void draw(const std::string& screen) {
    // Home, the screen line by line each erased to its end, then the rest erased.
    std::string text = "\x1b[H";
    std::size_t start = 0;
    while (start < screen.size()) {
      const std::size_t end = screen.find('\n', start);
      text += screen.substr(start, end - start) + "\x1b[K\r\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
    out_ << text << "\x1b[J" << std::flush;
  }

 private:
  std::ostream& out_;
  termios saved_{};
  bool restore_ = false;
};

class Pipe {
 public:
  Pipe() {
    if (pipe(fds_) != 0) {
      throw quota::Error(quota::ErrorCode::io,
                         "cannot create a pipe for watch: too many open files?");
    }
    for (int fd : fds_) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  ~Pipe() {
    close(fds_[0]);
    close(fds_[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  void drain() const {
    char buffer[64];
    while (read(fds_[0], buffer, sizeof buffer) > 0) {
    }
  }

 private:
  int fds_[2] = {-1, -1};
};

// The usages the watch has delivered, as usage shows them: most used first.
class Board {
 public:
  void put(const quota::Usage& usage) {
    std::lock_guard lock(mutex_);
    const auto found = usages_.find(usage.owner);
    if (found != usages_.end() && !quota::usage_differs(found->second, usage)) return;
    usages_.insert_or_assign(usage.owner, usage);
    changed_ = true;
  }
  // The rows when something changed since the last call, else nothing; `all` keeps owners
  // without usage or denials (a watched owner), else they are left out like usage does.
  std::optional<std::vector<quota::Usage>> take(bool all, bool force) {
    std::lock_guard lock(mutex_);
    if (!changed_ && !force) return std::nullopt;
    changed_ = false;
    std::vector<quota::Usage> rows;
    for (const auto& [owner, usage] : usages_) {
      if (all || usage.used > 0 || usage.denied > 0 || usage.shadow_denied > 0) {
        rows.push_back(usage);
      }
    }
    std::stable_sort(rows.begin(), rows.end(), [](const quota::Usage& a, const quota::Usage& b) {
      return a.used != b.used ? a.used > b.used : a.owner < b.owner;
    });
    return rows;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, quota::Usage> usages_;
  bool changed_ = false;
};

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int run_watch(Session& session, const Arguments& arguments) {
  quota::validate_limit_name(arguments.limit);
  if (arguments.owner_filter) quota::validate_owner(*arguments.owner_filter);
  std::optional<std::chrono::milliseconds> duration;
  if (arguments.watch_for) duration = parse_duration(*arguments.watch_for, "--for");
  if (session.fixed_now) {
    throw quota::Error(quota::ErrorCode::invalid_argument,
                       "--now fixes the clock, and watch shows how usage changes as time goes "
                       "on: leave --now out");
  }

  quota::Engine engine = session.open_engine(quota::system_clock_ms);
  const quota::Limit limit = existing_limit(engine, arguments.limit);

  // What there is now, shown at once; then what the watch says changed.
  Board board;
  if (arguments.owner_filter) {
    board.put(engine.owner_usage(arguments.limit, *arguments.owner_filter));
  } else {
    for (const quota::Usage& usage : engine.usage(arguments.limit)) board.put(usage);
  }
  Pipe wake;
  const auto deliver = [&](const quota::Usage& usage) {
    board.put(usage);
    const char byte = 'c';
    [[maybe_unused]] const ssize_t written = write(wake.write_end(), &byte, 1);
  };
  StopSignals signals(wake.write_end());
  quota::Watch watch = arguments.owner_filter
                           ? engine.watch(arguments.limit, *arguments.owner_filter, deliver)
                           : engine.watch(arguments.limit, deliver);

  const bool view = session.show_progress;  // a terminal, and not --json
  const bool keys = view && isatty(0) != 0;
  std::optional<TerminalView> terminal;
  if (view) terminal.emplace(session.out, keys);
  const std::int64_t ends_at = duration ? steady_ms() + duration->count() : 0;
  const std::string if_empty = arguments.owner_filter ? "no usage and no denials for that owner"
                                                      : "no owner has usage or denials";
  // The countdowns' now: the clock the operations use (--server-clock: the database's).
  const auto shown_now = [&] {
    return session.server_clock ? engine.now() : quota::system_clock_ms();
  };
  bool first = true;
  bool force = true;  // the first screen, even with no rows
  for (;;) {
    const auto rows = board.take(arguments.owner_filter.has_value(), force || view);
    force = false;
    if (rows) {
      if (session.json) {
        session.out << usage_json(*rows).dump() << '\n' << std::flush;
      } else if (view) {
        terminal->draw(usage_text(session, limit, *rows, shown_now(), if_empty) + "\n" +
                       session.paint("q or Ctrl-C to leave", Colour::bold) + "\n");
      } else {
        if (!first) session.out << '\n';
        session.out << usage_text(session, limit, *rows, shown_now(), if_empty) << std::flush;
      }
      first = false;
    }

    // On a terminal the view is redrawn each second too, for its countdowns.
    int timeout = view ? 1000 : -1;
    if (duration) {
      const std::int64_t left = ends_at - steady_ms();
      if (left <= 0) break;
      timeout =
          timeout < 0 ? static_cast<int>(left) : std::min<int>(timeout, static_cast<int>(left));
    }
    pollfd fds[2] = {{wake.read_end(), POLLIN, 0}, {0, POLLIN, 0}};
    const int ready = poll(fds, keys ? 2 : 1, timeout);
    if (stop_signal) break;
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0 && (fds[0].revents & POLLIN)) wake.drain();
    if (keys && ready > 0 && (fds[1].revents & POLLIN)) {
      char key = 0;
      bool quit = false;
      while (read(0, &key, 1) == 1) quit = quit || key == 'q' || key == 'Q';
      if (quit) break;
    }
    if (!watch.active()) {
      // Its limit was removed (the only failure with no callback of ours to throw).
      terminal.reset();
      std::rethrow_exception(watch.failure());
    }
  }
  return 0;
}

}  // namespace quotactl
