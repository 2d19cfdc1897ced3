// Fuzz target: quotactl's command line and its value parsers.
//
// The input is a command line, one argument per line (at most 16). It runs through
// quotactl::run() in a scratch folder holding a migrated database with a limit of each
// algorithm, and must end with exit status 0-3, nothing or exactly one "quotactl: error: "
// line on stderr, and with --json exactly one JSON document on stdout: the answer (status 0 or
// 1), or the error (2 or 3) as {"error":{"code":...,"message":...}} with the stderr line's
// message; without --json an error prints nothing on stdout.
// Arguments holding a '/' are dropped, so that every file quotactl may create or change stays
// in the scratch folder.
//
// The whole input is also given, as one string, to the parsers of DURATION and of numbers:
// each accepts a value in its range or throws quota::Error, and a parsed period printed back
// (format_period) parses to the same period. printable() leaves no control byte.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "quota/error.h"
#include "quota/limit.h"
#include "text.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

void check_values(const std::string& text) {
  try {
    const auto period = quotactl::parse_duration(text, "--per");
    require(period.count() >= 1 && period <= quota::kPeriodBound);
    require(quotactl::parse_duration(quotactl::format_period(period), "--per") == period);
    require(!quotactl::format_duration(period.count()).empty());
  } catch (const quota::Error& error) {
    require(error.code() == quota::ErrorCode::invalid_argument);
  }
  try {
    const std::int64_t value = quotactl::parse_whole(text, "--cost", -1000, 1'000'000'000'000);
    require(value >= -1000 && value <= 1'000'000'000'000);
  } catch (const quota::Error& error) {
    require(error.code() == quota::ErrorCode::invalid_argument);
  }
  const std::string shown = quotactl::printable(text, 64);
  for (const char c : shown) require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F);
  require(quotactl::display_width(text) <= text.size());
}

int run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  // `apply -` reads standard input: never the fuzzer's own, which may be a pipe that never
  // ends. /dev/null is refused (a device), as a terminal would be.
  static const int no_input = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  quotactl::Context context;
  context.input = no_input;
  const int status = quotactl::run(args, out, err, context);
  require(status >= 0 && status <= 3);
  const std::string error = err.str();
  require(error.empty() ||
          (error.rfind("quotactl: error: ", 0) == 0 && error.find('\n') == error.size() - 1));
  const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
  if (json && status <= 1) {
    // Throws (and so fails the run) on anything but exactly one JSON document.
    (void)nlohmann::json::parse(out.str());
  }
  if (status >= 2) {
    require(!error.empty());
    if (json) {
      // The error is also exactly one document, {"error":{"code":...,"message":...}}, its
      // message the stderr line's, its code one of the library's ErrorCode names.
      const nlohmann::json document = nlohmann::json::parse(out.str());
      require(document.size() == 1 && document.at("error").size() == 2);
      const std::string code = document.at("error").at("code").get<std::string>();
      bool known = false;
      for (int c = 0; c <= static_cast<int>(quota::ErrorCode::permission_denied); ++c) {
        known = known || code == quota::to_string(static_cast<quota::ErrorCode>(c));
      }
      require(known);
      require((code == "invalid_argument" || code == "unknown_limit") == (status == 2));
      const std::string line = error.substr(17, error.size() - 18);
      const std::string shown =
          nlohmann::json(line).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      require(document.at("error").at("message") == nlohmann::json::parse(shown));
    } else {
      require(out.str().empty());
    }
  }
  return status;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static char folder[] = "/tmp/quota-fuzz-XXXXXX";
  require(mkdtemp(folder) != nullptr);
  require(chdir(folder) == 0);
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(folder, ignored);
  });
  setenv("QUOTA_DB", "quota.db", 1);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"migrate"},
        {"limit", "set", "log", "--max", "3", "--per", "1m"},
        {"limit", "set", "win", "--max", "3", "--per", "1m", "--algo", "fixed_window"},
        {"limit", "set", "sw", "--max", "3", "--per", "1m", "--algo", "sliding_window"},
        {"limit", "set", "tb", "--max", "3", "--per", "1m", "--algo", "token_bucket"}}) {
    require(run(args) == 0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check_values(input);
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start <= input.size() && args.size() < 16) {
    std::size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    std::string arg = input.substr(start, end - start);
    if (arg.find('/') == std::string::npos) args.push_back(std::move(arg));
    start = end + 1;
  }
  run(args);
  return 0;
}
