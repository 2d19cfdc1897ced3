// Regression: quotactl --server-clock evaluated operations at the server's time but counted its
// countdowns ("resets in …") from the local clock, so a host whose clock runs behind was shown
// hours too long. quotactl runs here under libfaketime (Debian's faketime), its clock two hours
// behind the server's; the server's clock is the machine's.
#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend.h"
#include "test_paths.h"  // QUOTA_SOURCE_DIR, QUOTACTL_PATH

namespace quota::test {
namespace {

// Runs quotactl with its clock `offset` (faketime's spelling: "-2h") from the machine's; its
// stdout and stderr, and its status.
std::pair<int, std::string> quotactl_at(const std::string& offset,
                                        const std::vector<std::string>& args) {
  // libfaketime is preloaded into quotactl; a quotactl built with AddressSanitizer refuses to
  // start when its runtime is not the first library loaded unless told the order is intended.
  std::string command =
      "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\" faketime -f '" +
      offset + "' " QUOTACTL_PATH;
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  for (std::size_t read; (read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    output.append(buffer.data(), read);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// The countdown after "resets in " in `line`, up to the next ',' or the end of the line.
std::string countdown(const std::string& line) {
  const std::size_t start = line.find("resets in ");
  if (start == std::string::npos) return "";
  const std::size_t from = start + 10;
  const std::size_t end = line.find_first_of(",\n", from);
  return line.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

TEST_CASE("quotactl --server-clock counts its countdowns from the server's time",
          "[quotactl][postgresql][clock]") {
  REQUIRE(std::system("command -v faketime >/dev/null 2>&1") == 0);  // tools/install-deps.sh
  TestDatabase db(Backend::postgresql);
  Engine::open(db.location()).define(
      {"hourly", Algorithm::fixed_window, 5, std::chrono::hours(1), std::nullopt});

  // Two hours behind: an hourly window of the server's ends within the hour of the server's
  // clock, and two to three hours later by this host's.
  const auto [status, line] =
      quotactl_at("-2h", {"--db", db.location(), "--server-clock", "consume", "hourly", "u1"});
  CAPTURE(line);
  REQUIRE(status == 0);
  const std::string shown = countdown(line);
  REQUIRE_FALSE(shown.empty());
  CHECK(shown.find('h') == std::string::npos);  // at most 59m 59.999s, never "2h …"

  // Without --server-clock the host's own clock decides and counts: consistent, within an hour.
  const auto [local_status, local_line] =
      quotactl_at("-2h", {"--db", db.location(), "consume", "hourly", "u2"});
  CAPTURE(local_line);
  REQUIRE(local_status == 0);
  CHECK(countdown(local_line).find('h') == std::string::npos);
}

}  // namespace
}  // namespace quota::test
