// quota::Config and Engine::apply (docs/operating.md, "Limits as configuration"): a TOML file
// declares limits and overrides; a bad file is refused whole at the line and column of its
// first error; apply creates, changes and (with prune) removes, in one transaction; a prune
// to no limit is refused unless allowed; two applies at once end in one file's state.
#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr const char* kFile = R"([[limit]]
name = "send"
max = 10
per = "1m"

[[limit]]
name = "upload"
algorithm = "token_bucket"
max = 5
per = "1m"
burst = 8
block = "30s"

[[limit]]
name = "export"
max = 100
per = "month"
utc_offset = "+09:00"
anchor = 2026-03-17T09:30:00+09:00

[[override]]
limit = "send"
owner = "u42"
max = 20

[[override]]
limit = "*"
owner = "admin"
policy = "exempt"
)";

// The message of the Error that parsing `text` throws ("" when it parses).
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

TEST_CASE("a configuration reads limits and overrides as the engine stores them", "[config]") {
  const Config config = Config::parse(kFile);
  REQUIRE(config.limits.size() == 3);
  CHECK(config.limits[0] == make_limit("send", Algorithm::sliding_log, 10, 60'000));
  Limit upload = make_bucket("upload", 5, 60'000, 8);
  upload.block = std::chrono::milliseconds(30'000);
  CHECK(config.limits[1] == upload);
  // 2026-03-17T00:30:00Z
  CHECK(config.limits[2] == calendar_limit("export", 100, Calendar::month,
                                           std::chrono::minutes(9 * 60), 1'773'707'400'000));
  REQUIRE(config.overrides.size() == 2);
  CHECK(config.overrides[0] == Override{"send", "u42", Policy::maximum, 20});
  CHECK(config.overrides[1] == Override{"*", "admin", Policy::exempt});
  // A token bucket without a burst holds its maximum as its capacity, as the database does.
  CHECK(Config::parse("[[limit]]\nname = \"b\"\nalgorithm = \"token_bucket\"\nmax = 3\nper = "
                      "\"1s\"\n")
            .limits[0]
            .burst == 3);
}

TEST_CASE("a bad configuration is refused at the line and column of its first error",
          "[config]") {
  const std::string limit = "[[limit]]\nname = \"send\"\nmax = 10\nper = \"1m\"\n";
  struct Case {
    std::string text;
    std::string starts;    // the place
    std::string mentions;  // what the message says
  };
  const std::vector<Case> cases{
      {"[[limit]\nname = 1\n", "limits.toml:1:", "invalid TOML"},
      {"name = \"x\" = 2\n", "limits.toml:1:", "invalid TOML"},
      {limit + "maxx = 3\n", "limits.toml:5:1:", "unknown key 'maxx' in a [[limit]] (did you "
                                                 "mean 'max'?)"},
      {"[limits]\n", "limits.toml:1:", "unknown key 'limits' at the top level (did you mean "
                                       "'limit'?)"},
      {"[limit]\nname = \"x\"\n", "limits.toml:1:", "a list of tables"},
      {"[[limit]]\nname = \"send\"\nmax = \"10\"\nper = \"1m\"\n", "limits.toml:3:7:",
       "'max' is a string: give a whole number"},
      {"[[limit]]\nname = \"send\"\nmax = 1.5\nper = \"1m\"\n", "limits.toml:3:7:",
       "'max' is a floating-point number"},
      {"[[limit]]\nname = \"send\"\nmax = -3\nper = \"1m\"\n", "limits.toml:3:7:",
       "'max' is -3: give a whole number from 1"},
      {"[[limit]]\nname = \"send\"\nmax = 0\nper = \"1m\"\n", "limits.toml:3:7:", "'max' is 0"},
      {"[[limit]]\nname = \"send\"\nalgorithm = \"sliding_logg\"\nmax = 1\nper = \"1m\"\n",
       "limits.toml:3:13:", "unknown algorithm 'sliding_logg' (did you mean 'sliding_log'?)"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"1x\"\n", "limits.toml:4:7:",
       "invalid duration '1x' for 'per'"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"0s\"\n", "limits.toml:4:7:",
       "at least 1ms"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"400d\"\n", "limits.toml:4:7:",
       "the longest duration is 366d"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"1m\"\nblock = 5\n", "limits.toml:5:9:",
       "'block' is an integer: give a string"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"1m\"\nburst = 3\n", "limits.toml:5:9:",
       "'burst' is only for a token_bucket"},
      {"[[limit]]\nname = \"bad name!\"\nmax = 1\nper = \"1m\"\n", "limits.toml:2:8:",
       "limit name"},
      {"[[limit]]\nmax = 1\nper = \"1m\"\n", "limits.toml:1:", "a [[limit]] lacks 'name'"},
      {"[[limit]]\nname = \"send\"\nper = \"1m\"\n", "limits.toml:1:",
       "[[limit]] 'send' lacks 'max'"},
      {limit + limit, "limits.toml:6:8:", "limit 'send' is declared twice (first at line 2)"},
      {"[[limit]]\nname = \"w\"\nalgorithm = \"sliding_window\"\nmax = 1000000000000\nper = "
       "\"366d\"\n",
       "limits.toml:4:7:", "64-bit"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"1m\"\nutc_offset = \"+01:00\"\n",
       "limits.toml:5:14:", "'utc_offset' needs a calendar period"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"day\"\nutc_offset = \"+15:00\"\n",
       "limits.toml:5:14:", "invalid utc_offset '+15:00'"},
      {"[[limit]]\nname = \"send\"\nmax = 1\nper = \"day\"\nanchor = 2026-03-17T09:30:00\n",
       "limits.toml:5:10:", "a date-time without an offset"},
      {"[[limit]]\nname = \"send\"\nalgorithm = \"token_bucket\"\nmax = 1\nper = \"day\"\n",
       "limits.toml:5:7:", "calendar periods count only with fixed_window"},
      {limit + "[[override]]\nlimit = \"sned\"\nowner = \"u\"\nmax = 3\n", "limits.toml:6:9:",
       "the override names limit 'sned', which this file does not declare (did you mean "
       "'send'?)"},
      {limit + "[[override]]\nlimit = \"send\"\nowner = \"u\"\n", "limits.toml:5:",
       "lacks 'max'"},
      {limit + "[[override]]\nlimit = \"send\"\nowner = \"u\"\npolicy = \"exempt\"\nmax = 2\n",
       "limits.toml:9:7:", "policy \"exempt\" takes no 'max'"},
      {limit + "[[override]]\nlimit = \"send\"\nowner = \"u\"\npolicy = \"allow\"\n",
       "limits.toml:8:10:", "unknown policy 'allow'"},
      {limit + "[[override]]\nlimit = \"send\"\nowner = \"\"\npolicy = \"deny\"\n",
       "limits.toml:7:9:", "owner"},
      {limit + "[[override]]\nlimit = \"send\"\nowner = \"u\"\npolicy = \"deny\"\n"
               "[[override]]\nlimit = \"send\"\nowner = \"u\"\npolicy = \"exempt\"\n",
       "limits.toml:11:9:", "declared twice (first at line 7)"},
      {limit + "[[override]]\nlimit = \"send\"\nowner = \"u\"\nmax = 3\nburst = 4\n",
       "limits.toml:8:7:", "does not fit limit 'send'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string message = refusal(c.text);
    CHECK(message.rfind(c.starts, 0) == 0);
    CHECK_THAT(message, Catch::Contains(c.mentions));
  }
}

TEST_CASE("a configuration file that does not exist or cannot be read is refused", "[config]") {
  TempDir dir;
  try {
    Config::load(dir.file("missing.toml"));
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::invalid_argument);
    CHECK_THAT(error.what(), Catch::Contains("does not exist"));
  }
  try {
    Config::load(dir.path());
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::invalid_argument);
    CHECK_THAT(error.what(), Catch::Contains("is a directory"));
  }
  const std::string path = dir.file("limits.toml");
  std::ofstream(path) << "[[limit]]\nname = \"send\"\nmax = 10\nper = \"1x\"\n";
  try {
    Config::load(path);
    FAIL("no error");
  } catch (const Error& error) {
    CHECK_THAT(error.what(), Catch::StartsWith(path + ":4:7: invalid duration"));
  }
}

TEST_CASE("apply creates, changes and with prune removes, and a dry run changes nothing",
          "[config][apply][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  const Config config = Config::parse(kFile);
  f.engine.define(make_limit("send", Algorithm::sliding_log, 5, 60'000));  // changes
  f.engine.define(make_limit("old", Algorithm::fixed_window, 3, 1000));    // stays or goes
  f.engine.set_override({"old", "u1", Policy::deny});
  f.engine.set_override({"send", "u7", Policy::deny});  // not in the file
  REQUIRE(f.engine.consume("send", "u").allowed);

  const std::string before = f.database.dump();
  std::vector<Change> plan = f.engine.apply(config, {.dry_run = true});
  CHECK(f.database.dump() == before);
  REQUIRE(plan.size() == 5);
  CHECK(plan[0].kind == ChangeKind::change);
  CHECK(plan[0].limit_before == make_limit("send", Algorithm::sliding_log, 5, 60'000));
  CHECK(plan[0].limit_after == config.limits[0]);
  CHECK(plan[1].kind == ChangeKind::create);
  CHECK(plan[1].limit_after == config.limits[1]);
  CHECK(plan[2].limit_after == config.limits[2]);
  CHECK(plan[3].override_after == config.overrides[0]);
  CHECK(plan[4].override_after == config.overrides[1]);

  CHECK(f.engine.apply(config).size() == 5);
  CHECK(f.engine.get("send") == config.limits[0]);
  CHECK(f.engine.get("export") == config.limits[2]);
  CHECK(f.engine.overrides("send").size() == 2);  // u42 and u7
  // The state of a limit whose numbers changed stays: u used 1 of now 10.
  CHECK(f.engine.consume("send", "u").remaining == 8);
  CHECK(f.engine.consume("send", "admin").remaining == 10);
  CHECK(f.engine.consume("send", "u42").remaining == 19);
  // Applied again: nothing to do.
  CHECK(f.engine.apply(config).empty());

  plan = f.engine.apply(config, {.prune = true, .dry_run = true});
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].kind == ChangeKind::remove);
  CHECK(plan[0].override_before == Override{"send", "u7", Policy::deny});
  CHECK(plan[1].kind == ChangeKind::remove);
  CHECK(plan[1].limit_before == make_limit("old", Algorithm::fixed_window, 3, 1000));
  CHECK(f.engine.apply(config, {.prune = true}).size() == 2);
  CHECK_FALSE(f.engine.get("old"));
  CHECK(f.engine.overrides().size() == 2);
  CHECK(f.engine.apply(config, {.prune = true}).empty());
}


TEST_CASE("apply with prune refuses a configuration that declares no limit, unless allow_empty",
          "[config][apply][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  f.engine.define(make_limit("send", Algorithm::sliding_log, 5, 60'000));
  f.engine.set_override({"send", "u7", Policy::deny});
  REQUIRE(f.engine.consume("send", "u").allowed);
  const std::string before = f.database.dump();
  // An empty file, or overrides alone: a broken deploy rather than the wish to remove all.
  for (const Config& config : {Config{}, Config::parse("[[override]]\nlimit = \"*\"\nowner = "
                                                       "\"admin\"\npolicy = \"exempt\"\n")}) {
    for (const bool dry_run : {false, true}) {
      try {
        f.engine.apply(config, {.prune = true, .dry_run = dry_run});
        FAIL("no error");
      } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::invalid_argument);
        CHECK_THAT(error.what(), Catch::StartsWith("the configuration declares no limit, so "
                                                   "pruning would remove every limit"));
      }
      CHECK(f.database.dump() == before);
    }
    // Without prune it changes no limit.
    CHECK(f.engine.apply(config, {.dry_run = true}).size() == config.overrides.size());
  }
  const std::vector<Change> plan = f.engine.apply({}, {.prune = true, .allow_empty = true});
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].limit_before->name == "send");
  CHECK(f.engine.list().empty());
  CHECK(f.engine.overrides().empty());
}

TEST_CASE("two applies at once both succeed and end in the state of one file, never a mix",
          "[config][apply][backends]") {
  EngineOn f(each_backend());
  CAPTURE(f.database.backend());
  // Each file: limits of its own names and one of both, with its own numbers; a mix shows as
  // limits of both files, or the shared one with the other's numbers.
  const auto file = [](const std::string& prefix, int maximum) {
    std::string text;
    for (const std::string& name : {prefix + "1", prefix + "2", prefix + "3", prefix + "4",
                                    prefix + "5", prefix + "6", std::string("shared")}) {
      text += "[[limit]]\nname = \"" + name + "\"\nmax = " + std::to_string(maximum) +
              "\nper = \"1m\"\n[[override]]\nlimit = \"" + name + "\"\nowner = \"" +
              prefix + "\"\npolicy = \"deny\"\n";
    }
    return Config::parse(text);
  };
  const std::vector<Config> files{file("a", 10), file("b", 20)};
  constexpr int kAppliers = 4;
  constexpr int kRounds = 6;
  std::vector<Engine> engines;
  for (int i = 0; i < kAppliers; ++i) engines.push_back(Engine::open(f.database.location()));
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    // Round 0 starts empty, each later one from the file the previous round ended in.
    std::atomic<int> ready{0};
    std::vector<std::string> failures(kAppliers);
    std::vector<std::thread> appliers;
    for (int i = 0; i < kAppliers; ++i) {
      appliers.emplace_back([&, i] {
        ++ready;
        while (ready < kAppliers) std::this_thread::yield();
        try {
          engines[i].apply(files[(i + round) % 2], {.prune = true});
        } catch (const std::exception& error) {
          failures[i] = error.what();
        }
      });
    }
    for (std::thread& applier : appliers) applier.join();
    for (const std::string& failure : failures) CHECK(failure.empty());
    const std::vector<Limit> limits = f.engine.list();
    const std::vector<Override> overrides = f.engine.overrides();
    const auto is = [&](const Config& config) {
      std::vector<Limit> declared = config.limits;
      std::sort(declared.begin(), declared.end(),
                [](const Limit& a, const Limit& b) { return a.name < b.name; });
      return limits == declared && overrides.size() == config.overrides.size() &&
             std::is_permutation(overrides.begin(), overrides.end(), config.overrides.begin());
    };
    CHECK((is(files[0]) || is(files[1])));
  }
}

}  // namespace quota::test
