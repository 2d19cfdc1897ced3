// quotactl as a library function: tests run it in-process, main() is one line.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace quotactl {

// Runs quotactl with `args` (without the program name), writing to `out` and `err`.
// Returns the exit status: 0 success or allowed, 1 not allowed, 2 invalid input,
// 3 database or environment error. `environment` supplies QUOTA_DB and NO_COLOR; `terminal`
// says whether `out` is a terminal (colour and progress bars only then).
struct Context {
  std::string quota_db;       // $QUOTA_DB, empty when unset
  bool no_color = false;      // $NO_COLOR is set
  bool terminal = false;      // stdout is a terminal
  int input = 0;              // standard input's descriptor, which `apply -` reads
};

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        const Context& context = {});

}  // namespace quotactl
