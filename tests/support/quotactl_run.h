// quotactl run in the test's own process (quotactl::run, tools/quotactl/cli.h): what every
// test that drives quotactl without its binary calls.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "cli.h"

namespace quota::test {

// What a quotactl run answered.
struct QuotactlRun {
  int status = -1;  // the exit status
  std::string out;  // stdout
  std::string err;  // stderr

  // stdout as exactly one JSON document (throws on anything more or less).
  nlohmann::json document() const;
  // stderr is exactly one error line.
  bool one_error_line() const;
};

// `quotactl ARGS...`.
QuotactlRun run_quotactl(const std::vector<std::string>& args,
                         const quotactl::Context& context = {});

// `quotactl --db DB --now NOW ARGS...`.
QuotactlRun run_quotactl_at(const std::string& db, std::int64_t now, std::vector<std::string> args,
                            const quotactl::Context& context = {});

}  // namespace quota::test
