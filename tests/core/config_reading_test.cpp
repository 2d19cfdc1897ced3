// How a configuration is read (quota::Config::load and Config::read, docs/operating.md): whole
// or not at all. A read error, a device, more than 16 MiB or a named pipe that no writer opens
// is refused, never taken for a shorter or an empty file (which `apply --prune` would make
// the database's limits); two limit names that differ only in case are refused.
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "quota/config.h"
#include "quota/error.h"
#include "support.h"
#include "support/failing_read.h"

namespace quota::test {
namespace {

using namespace std::chrono_literals;

// The code and message of the Error that `call` throws; FAIL when it throws none.
template <typename Call>
std::pair<ErrorCode, std::string> refusal_of(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return {error.code(), error.what()};
  }
  FAIL("no error");
  return {};
}

// The [[limit]] table of limit `name`.
std::string limit_table(const std::string& name) {
  return "[[limit]]\nname = \"" + name + "\"\nmax = 10\nper = \"1m\"\n\n";
}

// A pipe whose write end a thread fills with `text`, then closes; SIGPIPE is blocked in that
// thread, so that a reader that stops early ends its writing with EPIPE rather than the
// test runner.
class FilledPipe {
 public:
  explicit FilledPipe(std::string text) {
    int ends[2];
    REQUIRE(::pipe(ends) == 0);
    read_end_ = ends[0];
    writer_ = std::thread([text = std::move(text), fd = ends[1]] {
      sigset_t pipe_signal;
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      for (std::size_t at = 0; at < text.size();) {
        const ssize_t wrote = ::write(fd, text.data() + at, text.size() - at);
        if (wrote <= 0) break;
        at += static_cast<std::size_t>(wrote);
      }
      ::close(fd);
    });
  }
  FilledPipe(const FilledPipe&) = delete;
  FilledPipe& operator=(const FilledPipe&) = delete;
  ~FilledPipe() {
    close_reading();
    writer_.join();
  }
  int fd() const { return read_end_; }
  void close_reading() {
    if (read_end_ >= 0) ::close(read_end_);
    read_end_ = -1;
  }

 private:
  int read_end_ = -1;
  std::thread writer_;
};

}  // namespace

TEST_CASE("a configuration whose reading fails is refused, never taken for a shorter file",
          "[config]") {
  // Nothing is mapped at offset 0 of /proc/self/mem: its first read fails (EIO). It was read
  // as an empty file, which `apply --prune` made an empty database.
  auto [code, message] = refusal_of([] { Config::load("/proc/self/mem"); });
  CHECK(code == ErrorCode::io);
  CHECK(message ==
        "cannot read configuration file '/proc/self/mem' (after 0 bytes): Input/output error; "
        "nothing was changed");

  // A read that fails after a page of whole limits, which alone would be a valid file.
  TempDir dir;
  std::string page;
  std::size_t declared = 0;
  while (page.size() + limit_table("l" + std::to_string(declared)).size() < 4000) {
    page += limit_table("l" + std::to_string(declared++));
  }
  const FailingRead failing(dir, page);
  REQUIRE(Config::parse(page).limits.size() == declared);
  std::tie(code, message) = refusal_of([&] { Config::read(failing.fd(), "fleet.toml"); });
  CHECK(code == ErrorCode::io);
  CHECK(message == "cannot read configuration file 'fleet.toml' (after " +
                       std::to_string(failing.readable_bytes()) +
                       " bytes): Input/output error; nothing was changed");
}

TEST_CASE("a configuration that is a device, or larger than 16 MiB, is refused", "[config]") {
  // /dev/null read as an empty file, /dev/zero grew without bound.
  for (const char* device : {"/dev/null", "/dev/zero"}) {
    CAPTURE(device);
    const auto [code, message] = refusal_of([&] { Config::load(device); });
    CHECK(code == ErrorCode::invalid_argument);
    CHECK(message == std::string("configuration file '") + device +
                         "' is a character device: give the path of a TOML file (a regular "
                         "file), or pipe it to standard input ('-')");
  }
  TempDir dir;
  const auto [code, message] = refusal_of([&] { Config::load(dir.path().string()); });
  CHECK(code == ErrorCode::invalid_argument);
  CHECK_THAT(message, Catch::Contains("is a directory"));

  // 16 MiB exactly is read; one byte more is refused. A comment fills the file.
  const std::string path = dir.file("large.toml");
  std::string text = limit_table("send") + "#";
  text.resize(kConfigurationBound - 1, 'x');
  text += '\n';
  std::ofstream(path, std::ios::binary) << text;
  CHECK(Config::load(path).limits.size() == 1);
  std::ofstream(path, std::ios::binary | std::ios::app) << "\n";
  const std::string refused = "configuration file '" + path +
                              "' is larger than 16 MiB: a configuration of limits is far "
                              "smaller; check that it is the right file";
  CHECK(refusal_of([&] { Config::load(path); }).second == refused);

  // A pipe has no size to look at: the reading stops one byte beyond the bound.
  text += std::string(kConfigurationBound, '\n');
  FilledPipe pipe(text);
  const auto piped = refusal_of([&] { Config::read(pipe.fd(), "standard input"); });
  CHECK(piped.first == ErrorCode::invalid_argument);
  CHECK_THAT(piped.second, Catch::StartsWith("configuration file 'standard input' is larger "
                                             "than 16 MiB"));
}

TEST_CASE("a named pipe is read whole from its writer, and refused when no writer comes",
          "[config]") {
  TempDir dir;
  const std::string fifo = dir.file("limits.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);

  // No writer: refused after the wait, rather than blocking for ever or read as empty.
  const auto started = std::chrono::steady_clock::now();
  const auto [code, message] = refusal_of([&] { Config::load(fifo, 200ms); });
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(code == ErrorCode::io);
  CHECK(message == "configuration file '" + fifo +
                       "' is a named pipe that no writer opened within 200 ms: start the "
                       "program that writes it first, or give a regular file; nothing was "
                       "changed");
  CHECK(waited >= 200ms);
  CHECK(waited < 3s);

  // A writer that comes in time and pauses between its parts: every part is read.
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    std::ofstream out(fifo);
    out << limit_table("first") << std::flush;
    std::this_thread::sleep_for(100ms);
    out << limit_table("second");
  });
  const Config config = Config::load(fifo, 5s);
  writer.join();
  REQUIRE(config.limits.size() == 2);
  CHECK(config.limits[1].name == "second");

  // A writer that opens the pipe and closes it without a word: an empty file, as `: > FIFO`
  // means (apply --prune then refuses it without --allow-empty).
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    std::ofstream out(fifo);
  });
  CHECK(Config::load(fifo, 5s).limits.empty());
  closer.join();
}

TEST_CASE("standard input is read as a file is: whole, and only a file or a pipe", "[config]") {
  FilledPipe pipe(limit_table("send") + limit_table("upload"));
  const Config config = Config::read(pipe.fd(), "standard input");
  CHECK(config.limits.size() == 2);
  // Its messages name it as `source`.
  FilledPipe bad("[[limit]]\nname = \"send\"\nmax = -1\nper = \"1m\"\n");
  CHECK_THAT(refusal_of([&] { Config::read(bad.fd(), "standard input"); }).second,
             Catch::StartsWith("standard input:3:7: 'max' is -1"));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(null >= 0);
  CHECK_THAT(refusal_of([&] { Config::read(null, "standard input"); }).second,
             Catch::Contains("'standard input' is a character device"));
  ::close(null);
}

TEST_CASE("limit names that differ only in case are refused, naming both", "[config]") {
  const std::string text = limit_table("api") + limit_table("Send") + limit_table("API");
  const auto [code, message] = refusal_of([&] { Config::parse(text, "limits.toml"); });
  CHECK(code == ErrorCode::invalid_argument);
  CHECK(message ==
        "limits.toml:12:8: limit 'API' differs from limit 'api' (line 2) only in case: names "
        "that differ only in case are taken for one another; rename one");
  CHECK(Config::parse(limit_table("api") + limit_table("api_v2")).limits.size() == 2);
}

}  // namespace quota::test
