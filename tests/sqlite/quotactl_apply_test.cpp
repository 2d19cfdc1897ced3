// quotactl apply FILE (docs/quotactl.md): the plan, --dry-run, --prune, --check's exit 1 on
// drift, --json, a bad file refused at its line and column with nothing changed, and one
// transaction (a change the database refuses undoes the others), in-process.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "support.h"
#include "support/quotactl_run.h"

namespace {

using quota::test::dump;
using quota::test::QuotactlRun;
using quota::test::RawDb;
using quota::test::run_quotactl_at;
using quota::test::TempDir;

QuotactlRun quotactl_in(const std::string& db, std::vector<std::string> args) {
  return run_quotactl_at(db, 1'700'000'000'000, std::move(args));
}

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

[[override]]
limit = "send"
owner = "u42"
max = 20
)";

struct Fixture {
  TempDir dir;
  std::string db = dir.file("quota.db");
  std::string file = dir.file("limits.toml");
  Fixture() {
    REQUIRE(quotactl_in(db, {"migrate"}).status == 0);
    REQUIRE(quotactl_in(db, {"limit", "set", "old", "--max", "3", "--per", "1s"}).status == 0);
    std::ofstream(file) << kFile;
  }
};

}  // namespace

TEST_CASE("quotactl apply prints its plan, applies it, and --prune removes what is not declared",
          "[quotactl][apply]") {
  Fixture f;
  const std::string before = dump(f.db);
  QuotactlRun dry = quotactl_in(f.db, {"apply", f.file, "--dry-run"});
  CHECK(dry.status == 0);
  CHECK(dry.out ==
        "+ create limit send: 10 per 1m (sliding_log)\n"
        "+ create limit upload: 5 per 1m (token_bucket, burst 8)\n"
        "+ create override send u42: maximum 20\n"
        "dry run: 3 changes, nothing changed\n");
  CHECK(dump(f.db) == before);

  QuotactlRun check = quotactl_in(f.db, {"apply", f.file, "--check"});
  CHECK(check.status == 1);
  CHECK_THAT(check.out, Catch::Contains("drift: 3 changes"));
  CHECK(dump(f.db) == before);

  QuotactlRun applied = quotactl_in(f.db, {"apply", f.file});
  CHECK(applied.status == 0);
  CHECK_THAT(applied.out, Catch::EndsWith("applied 3 changes\n"));
  CHECK(quotactl_in(f.db, {"apply", f.file, "--check"}).status == 0);
  CHECK(quotactl_in(f.db, {"limit", "get", "old"}).status == 0);

  // A change to the file shows as "~ change"; --prune's removal as "- remove".
  std::ofstream(f.file) << std::string(kFile).replace(std::string(kFile).find("max = 10"), 8,
                                                        "max = 12");
  QuotactlRun prune = quotactl_in(f.db, {"apply", f.file, "--prune", "--check"});
  CHECK(prune.status == 1);
  CHECK(prune.out ==
        "~ change limit send: 10 per 1m (sliding_log) -> 12 per 1m (sliding_log)\n"
        "- remove limit old: 3 per 1s (sliding_log)\n"
        "drift: 2 changes to make the database match " +
            f.file + " (run quotactl apply " + f.file + " --prune)\n");
  CHECK(quotactl_in(f.db, {"apply", f.file, "--prune"}).status == 0);
  CHECK(quotactl_in(f.db, {"limit", "get", "old"}).status == 2);
  QuotactlRun clean = quotactl_in(f.db, {"apply", f.file, "--prune", "--check"});
  CHECK(clean.status == 0);
  CHECK(clean.out == "no drift: the database matches " + f.file + "\n");
}

TEST_CASE("quotactl apply --json prints one document of changes", "[quotactl][apply][json]") {
  Fixture f;
  QuotactlRun outcome = quotactl_in(f.db, {"--json", "apply", f.file, "--prune", "--check"});
  CHECK(outcome.status == 1);
  const nlohmann::json document = nlohmann::json::parse(outcome.out);
  CHECK(document["applied"] == false);
  CHECK(document["drift"] == true);
  REQUIRE(document["changes"].size() == 4);
  CHECK(document["changes"][0]["action"] == "create");
  CHECK(document["changes"][0]["kind"] == "limit");
  CHECK(document["changes"][0]["after"]["maximum"] == 10);
  CHECK(document["changes"][2]["kind"] == "override");
  CHECK(document["changes"][2]["owner"] == "u42");
  CHECK(document["changes"][3]["action"] == "remove");
  CHECK(document["changes"][3]["before"]["name"] == "old");
  CHECK(document["changes"][3]["after"].is_null());
  outcome = quotactl_in(f.db, {"--json", "apply", f.file});
  CHECK(outcome.status == 0);
  CHECK(nlohmann::json::parse(outcome.out)["applied"] == true);
}

TEST_CASE("quotactl apply refuses a bad file whole, at its line and column, changing nothing",
          "[quotactl][apply]") {
  Fixture f;
  const std::string before = dump(f.db);
  // A good limit first: nothing of the file is applied all the same.
  std::ofstream(f.file) << std::string(kFile) + "\n[[limit]]\nname = \"bad\"\nmax = -1\nper = \"1m\"\n";
  QuotactlRun outcome = quotactl_in(f.db, {"apply", f.file});
  CHECK(outcome.status == 2);
  CHECK(outcome.err == "quotactl: error: " + f.file +
                           ":20:7: 'max' is -1: give a whole number from 1 to 1000000000000\n");
  CHECK(dump(f.db) == before);
  outcome = quotactl_in(f.db, {"--json", "apply", f.dir.file("missing.toml")});
  CHECK(outcome.status == 2);
  CHECK(nlohmann::json::parse(outcome.out)["error"]["code"] == "invalid_argument");
  CHECK(quotactl_in(f.db, {"apply", f.file, "--check", "--dry-run"}).status == 2);
  CHECK(quotactl_in(f.db, {"apply"}).status == 2);
  CHECK(dump(f.db) == before);
}

TEST_CASE("quotactl apply is one transaction: a change the database refuses undoes the others",
          "[quotactl][apply]") {
  Fixture f;
  {
    RawDb raw(f.db);
    raw.exec(
        "CREATE TRIGGER refuse_upload BEFORE INSERT ON quota_limits WHEN NEW.name = 'upload' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
  }
  const std::string before = dump(f.db);
  QuotactlRun outcome = quotactl_in(f.db, {"apply", f.file, "--prune"});
  CHECK(outcome.status != 0);
  CHECK_THAT(outcome.err, Catch::Contains("refused by the test"));
  CHECK(dump(f.db) == before);
  CHECK(quotactl_in(f.db, {"limit", "get", "send"}).status == 2);
  CHECK(quotactl_in(f.db, {"limit", "get", "old"}).status == 0);
}
