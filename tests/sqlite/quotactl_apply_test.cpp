// quotactl apply FILE (docs/quotactl.md): the plan, --dry-run, --prune, --check's exit 1 on
// drift, --json, a bad file refused at its line and column with nothing changed, and one
// transaction (a change the database refuses undoes the others), in-process; a file that
// cannot be read whole, and a --prune of a file without limits, refused; `apply -`.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "support.h"
#include "support/failing_read.h"
#include "support/quotactl_run.h"

namespace {

using quota::test::dump;
using quota::test::FailingRead;
using quota::test::QuotactlRun;
using quota::test::RawDb;
using quota::test::run_quotactl_at;
using quota::test::TempDir;

QuotactlRun quotactl_in(const std::string& db, std::vector<std::string> args,
                        const quotactl::Context& context = {}) {
  return run_quotactl_at(db, 1'700'000'000'000, std::move(args), context);
}

// The context of a quotactl whose standard input is `fd`.
quotactl::Context reading(int fd) {
  quotactl::Context context;
  context.input = fd;
  return context;
}

// A pipe that holds `text` and is closed for writing: standard input fed from a file.
// `text` fits the pipe's buffer.
class InputPipe {
 public:
  explicit InputPipe(const std::string& text) {
    int ends[2];
    REQUIRE(::pipe(ends) == 0);
    REQUIRE(::write(ends[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(ends[1]);
    fd_ = ends[0];
  }
  InputPipe(const InputPipe&) = delete;
  InputPipe& operator=(const InputPipe&) = delete;
  ~InputPipe() { ::close(fd_); }
  quotactl::Context context() const { return reading(fd_); }

 private:
  int fd_ = -1;
};

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

TEST_CASE("quotactl apply refuses a file it cannot read whole, changing nothing",
          "[quotactl][apply]") {
  Fixture f;
  REQUIRE(quotactl_in(f.db, {"apply", f.file}).status == 0);
  const std::string before = dump(f.db);
  // Its first read fails: it was applied as an empty file, removing every limit.
  QuotactlRun outcome = quotactl_in(f.db, {"apply", "/proc/self/mem", "--prune"});
  CHECK(outcome.status == 3);
  CHECK(outcome.err ==
        "quotactl: error: cannot read configuration file '/proc/self/mem' (after 0 bytes): "
        "Input/output error; nothing was changed\n");
  // A character device never ends (or ends at once): refused before a byte is read.
  outcome = quotactl_in(f.db, {"apply", "/dev/zero", "--prune"});
  CHECK(outcome.status == 2);
  CHECK_THAT(outcome.err, Catch::Contains("'/dev/zero' is a character device"));
  // A named pipe without a writer: refused at the busy timeout, not read as empty.
  const std::string fifo = f.dir.file("limits.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto started = std::chrono::steady_clock::now();
  outcome = quotactl_in(f.db, {"--busy-timeout", "100ms", "apply", fifo, "--prune"});
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(3));
  CHECK(outcome.status == 3);
  CHECK_THAT(outcome.err, Catch::Contains("a named pipe that no writer opened within 100 ms"));
  CHECK(dump(f.db) == before);
}

TEST_CASE("quotactl apply - reads standard input, by the same rules as a file",
          "[quotactl][apply]") {
  Fixture f;
  const InputPipe input(kFile);
  QuotactlRun outcome = quotactl_in(f.db, {"apply", "-"}, input.context());
  CHECK(outcome.status == 0);
  CHECK_THAT(outcome.out, Catch::EndsWith("applied 3 changes\n"));
  const InputPipe again(kFile);
  outcome = quotactl_in(f.db, {"apply", "-", "--check"}, again.context());
  CHECK(outcome.status == 0);
  CHECK(outcome.out == "no drift: the database matches standard input\n");

  const std::string before = dump(f.db);
  const InputPipe bad(std::string(kFile) + "[[limit]]\nname = \"bad\"\nmax = -1\nper = \"1m\"\n");
  outcome = quotactl_in(f.db, {"apply", "-", "--prune"}, bad.context());
  CHECK(outcome.status == 2);
  CHECK_THAT(outcome.err, Catch::StartsWith("quotactl: error: standard input:19:7: 'max' is -1"));
  // Standard input whose reading fails after a page: refused, not applied as the page.
  const FailingRead failing(f.dir, "[[limit]]\nname = \"send\"\nmax = 10\nper = \"1m\"\n");
  outcome = quotactl_in(f.db, {"apply", "-", "--prune"}, reading(failing.fd()));
  CHECK(outcome.status == 3);
  CHECK_THAT(outcome.err, Catch::Contains("cannot read configuration file 'standard input' "
                                          "(after " +
                                          std::to_string(failing.readable_bytes()) + " bytes)"));
  CHECK(dump(f.db) == before);
}

TEST_CASE("quotactl apply --prune of a file that declares no limit is refused unless "
          "--allow-empty",
          "[quotactl][apply]") {
  Fixture f;
  REQUIRE(quotactl_in(f.db, {"apply", f.file}).status == 0);
  const std::string before = dump(f.db);
  const std::string empty = f.dir.file("empty.toml");
  // An empty file, comments only, or overrides of every limit and no limit: each would
  // remove every limit and its state.
  for (const std::string text : {"", "# limits moved to fleet.toml\n",
                                 "[[override]]\nlimit = \"*\"\nowner = \"admin\"\npolicy = "
                                 "\"exempt\"\n"}) {
    CAPTURE(text);
    std::ofstream(empty) << text;
    for (const std::vector<std::string>& mode :
         {std::vector<std::string>{}, {"--dry-run"}, {"--check"}}) {
      std::vector<std::string> args{"apply", empty, "--prune"};
      args.insert(args.end(), mode.begin(), mode.end());
      const QuotactlRun outcome = quotactl_in(f.db, args);
      CHECK(outcome.status == 2);
      CHECK(outcome.err == "quotactl: error: " + empty +
                               " declares no limit, so --prune would remove every limit and its "
                               "state: check the file (an empty file is likelier a mistake), or "
                               "give --allow-empty to remove them on purpose; nothing was "
                               "changed\n");
    }
    // Without --prune it removes nothing: such a file may only add overrides.
    const QuotactlRun unpruned = quotactl_in(f.db, {"apply", empty, "--dry-run"});
    CHECK(unpruned.status == 0);
    CHECK_THAT(unpruned.out, !Catch::Contains("remove"));
    CHECK(dump(f.db) == before);
  }
  std::ofstream(empty) << "";
  QuotactlRun outcome = quotactl_in(f.db, {"apply", empty, "--prune", "--allow-empty", "--check"});
  CHECK(outcome.status == 1);
  CHECK_THAT(outcome.out, Catch::Contains("(run quotactl apply " + empty +
                                          " --prune --allow-empty)"));
  outcome = quotactl_in(f.db, {"apply", empty, "--prune", "--allow-empty"});
  CHECK(outcome.status == 0);
  // old, send and upload (send's override goes with it).
  CHECK_THAT(outcome.out, Catch::EndsWith("applied 3 changes\n"));
  CHECK(quotactl_in(f.db, {"--json", "limit", "list"}).document().empty());
}

TEST_CASE("quotactl apply refuses a file with limit names that differ only in case",
          "[quotactl][apply]") {
  Fixture f;
  const std::string before = dump(f.db);
  std::ofstream(f.file) << std::string(kFile) + "\n[[limit]]\nname = \"SEND\"\nmax = 1\nper = \"1s\"\n";
  const QuotactlRun outcome = quotactl_in(f.db, {"apply", f.file});
  CHECK(outcome.status == 2);
  CHECK(outcome.err == "quotactl: error: " + f.file +
                           ":19:8: limit 'SEND' differs from limit 'send' (line 2) only in "
                           "case: names that differ only in case are taken for one another; "
                           "rename one\n");
  CHECK(dump(f.db) == before);
}
