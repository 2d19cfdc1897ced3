#include "support/quotactl_run.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace quota::test {

nlohmann::json QuotactlRun::document() const { return nlohmann::json::parse(out); }

bool QuotactlRun::one_error_line() const {
  return err.rfind("quotactl: error: ", 0) == 0 && err.find('\n') == err.size() - 1;
}

QuotactlRun run_quotactl(const std::vector<std::string>& args, const quotactl::Context& context) {
  std::ostringstream out;
  std::ostringstream err;
  QuotactlRun run;
  run.status = quotactl::run(args, out, err, context);
  run.out = out.str();
  run.err = err.str();
  return run;
}

QuotactlRun run_quotactl_at(const std::string& db, std::int64_t now, std::vector<std::string> args,
                            const quotactl::Context& context) {
  args.insert(args.begin(), {"--db", db, "--now", std::to_string(now)});
  return run_quotactl(args, context);
}

}  // namespace quota::test
