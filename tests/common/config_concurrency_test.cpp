// Concurrency limits in configuration files (quotactl apply, quota::Config): `ttl` declares a
// concurrency limit (with or beside algorithm = "concurrency"), with `block` and `shadow`;
// `ttl` on another algorithm and `per`, `burst` or a calendar on a concurrency limit are
// refused at their line and column, and nothing is applied; apply on every backend.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "backend.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

constexpr const char* kFile = R"([[limit]]
name = "uploads"
algorithm = "concurrency"
max = 3
ttl = "30s"

[[limit]]
name = "exports"
max = 1
ttl = "10m"
block = "1h"
shadow = true

[[limit]]
name = "send"
max = 10
per = "1m"

[[override]]
limit = "uploads"
owner = "big"
max = 8
)";

Limit concurrency_limit(const std::string& name, std::int64_t maximum, std::int64_t ttl_ms) {
  Limit limit;
  limit.name = name;
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = milliseconds(ttl_ms);
  return limit;
}

std::string refusal(const std::string& text) {
  try {
    Config::parse(text, "limits.toml");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::invalid_argument);
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("ttl declares a concurrency limit, with block and shadow", "[config][lease]") {
  const Config config = Config::parse(kFile);
  REQUIRE(config.limits.size() == 3);
  CHECK(config.limits[0] == concurrency_limit("uploads", 3, 30'000));
  // ttl alone implies the algorithm, as quotactl limit set --ttl does.
  Limit exports = concurrency_limit("exports", 1, 600'000);
  exports.block = milliseconds(3'600'000);
  exports.shadow = true;
  CHECK(config.limits[1] == exports);
  CHECK(config.limits[2] == make_limit("send", Algorithm::sliding_log, 10, 60'000));
  CHECK(config.overrides[0] == Override{"uploads", "big", Policy::maximum, 8});
}

TEST_CASE("ttl on a rate limit, and per, burst or a calendar on a concurrency limit, are refused "
          "at their line and column",
          "[config][lease]") {
  const std::string head = "[[limit]]\nname = \"jobs\"\nalgorithm = \"concurrency\"\nmax = 2\n";
  struct Case {
    std::string text;
    std::string starts;
    std::string mentions;
  };
  const std::vector<Case> cases{
      {"[[limit]]\nname = \"send\"\nalgorithm = \"fixed_window\"\nmax = 2\nper = \"1m\"\n"
       "ttl = \"30s\"\n",
       "limits.toml:6:7:",
       "'ttl' is only for concurrency limits; [[limit]] 'send' is fixed_window: give it a "
       "period with 'per', or algorithm = \"concurrency\""},
      {head + "ttl = \"30s\"\nper = \"1m\"\n", "limits.toml:6:7:",
       "a concurrency limit takes no 'per'"},
      {"[[limit]]\nname = \"jobs\"\nmax = 2\nper = \"1m\"\nttl = \"30s\"\n", "limits.toml:4:7:",
       "a concurrency limit takes no 'per'"},
      {head + "ttl = \"30s\"\nburst = 4\n", "limits.toml:6:9:",
       "a concurrency limit takes no 'burst'"},
      {head + "ttl = \"30s\"\nutc_offset = \"+01:00\"\n", "limits.toml:6:14:",
       "a concurrency limit takes no 'utc_offset'"},
      {head + "ttl = \"30s\"\nanchor = 2026-03-17T09:30:00+09:00\n", "limits.toml:6:10:",
       "a concurrency limit takes no 'anchor'"},
      {head, "limits.toml:1:", "[[limit]] 'jobs' is a concurrency limit and lacks 'ttl'"},
      {head + "ttl = 30\n", "limits.toml:5:7:", "'ttl' is an integer: give a string"},
      {head + "ttl = \"3x\"\n", "limits.toml:5:7:", "invalid duration '3x' for 'ttl'"},
      {head + "ttl = \"500ms\"\n", "limits.toml:5:7:", "use 1 s to 1 day"},
      {head + "ttl = \"2d\"\n", "limits.toml:5:7:", "use 1 s to 1 day"},
      {head + "ttl = \"30s\"\nblock = \"0s\"\n", "limits.toml:6:9:", "'block'"},
      {"[[limit]]\nname = \"jobs\"\nalgorithm = \"concurency\"\nmax = 2\nttl = \"30s\"\n",
       "limits.toml:3:13:", "did you mean 'concurrency'?"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = refusal(c.text);
    CHECK(message.rfind(c.starts, 0) == 0);
    CHECK_THAT(message, Catch::Contains(c.mentions));
  }
}

TEST_CASE("quotactl apply creates concurrency limits; a refused file changes nothing",
          "[config][apply][lease][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  TempDir dir;
  const std::string file = dir.file("limits.toml");
  const auto quotactl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", db.location()});
    return run_quotactl(args);
  };
  REQUIRE(quotactl({"migrate"}).status == 0);

  std::ofstream(file) << kFile;
  const QuotactlRun applied = quotactl({"apply", file});
  INFO(applied.err);
  REQUIRE(applied.status == 0);
  CHECK_THAT(applied.out, Catch::Contains("uploads") && Catch::Contains("3 at once"));
  Engine engine = Engine::open(db.location());
  CHECK(engine.get("uploads") == concurrency_limit("uploads", 3, 30'000));
  CHECK(engine.get("exports")->block == milliseconds(3'600'000));
  CHECK(engine.get("exports")->algorithm == Algorithm::concurrency);
  // Applying the same file again changes nothing.
  CHECK_THAT(quotactl({"apply", file}).out, Catch::Contains("nothing to change"));

  // A file with one bad limit is refused whole, at its place.
  const std::string before = db.dump();
  std::ofstream(file) << std::string(kFile) +
                             "\n[[limit]]\nname = \"bad\"\nalgorithm = \"token_bucket\"\nmax = 1\n"
                             "per = \"1m\"\nttl = \"30s\"\n";
  const QuotactlRun refused = quotactl({"apply", file});
  CHECK(refused.status == 2);
  CHECK_THAT(refused.err, Catch::Contains(file + ":29:7: 'ttl' is only for concurrency limits"));
  CHECK(db.dump() == before);
}

}  // namespace quota::test
