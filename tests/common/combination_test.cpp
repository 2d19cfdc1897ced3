// Where features meet, across processes, on every backend: 8 forked processes at once run a
// seeded random mix of consume, consume_all (with and without a concurrency limit, with and
// without idempotency keys, with per-limit costs), check_all, record, refund, acquire, renew,
// release, reset and override changes. Each logs what its answers mean (a file per process);
// the parent then checks the invariants of SPEC §8, §13 and §14:
//   - every allowed answer charged every limit it names: the final usage of each limit and
//     owner is the sum of the charges the answers tell (minus refunds, from the last reset);
//   - an allowed consume_all with the concurrency limit answers its lease, a denial none;
//   - at no instant do more holders hold a lease than the limit's capacity, and no lease is
//     left once every holder released its own;
//   - each idempotency key is decided once, its retries replayed;
//   - no busy error comes before the busy timeout has passed, and no other error comes.
// A consume_all names its limits in either order, as callers do.
// The limits are built so that this is exact: the rate limits have maxima no run can reach
// (only the concurrency limit denies), the clock stands still (no window ends, no lease
// expires), and the owners a process resets or refunds are its own.
//
// QUOTA_COMBINATION_SEED=N runs the mix of seed N again (the seed is printed on failure).
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "quota/quota.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr int kProcesses = 8;
constexpr int kIterations = 60;
constexpr std::int64_t kNow = 1'700'000'000'000;   // every process's clock, standing still
constexpr std::int64_t kBig = 1'000'000'000;        // the rate limits' maximum: never reached
constexpr std::int64_t kHolders = 2;                // the concurrency limit's capacity
constexpr int kSharedKeys = 16;
constexpr std::chrono::milliseconds kBusyTimeout{5000};

// CLOCK_MONOTONIC in ns: one clock for every process of the machine.
std::int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::uint64_t seed_of_run() {
  if (const char* given = std::getenv("QUOTA_COMBINATION_SEED"); given && *given) {
    return std::strtoull(given, nullptr, 10);
  }
  return std::random_device{}();
}

Options fixed_clock() {
  Options options;
  options.clock = [] { return kNow; };
  options.busy_timeout = kBusyTimeout;
  return options;
}

// One process's part: `iterations` random operations, each answer logged as what it means.
// Log lines (space-separated):
//   charge LIMIT OWNER N      an answer charged N units
//   refund LIMIT OWNER N      a refund gave N units back (never more than charged)
//   reset LIMIT OWNER         the owner's state on LIMIT was forgotten
//   held START END            a lease of the shared owner was held in [START, END] (ns)
//   key KEY fresh|replayed    an answer to a shared key
//   busy MS / error TEXT / fail TEXT   what must not happen
class Worker {
 public:
  Worker(Engine& engine, int index, std::uint64_t seed)
      : engine_(engine), random_(seed), me_("p" + std::to_string(index)) {}

  std::string run(int iterations) {
    for (int i = 0; i < iterations; ++i) {
      const int pick = between(0, 99);
      const std::int64_t started = monotonic_ns();
      try {
        step(pick, i);
      } catch (const Error& error) {
        const std::int64_t waited = (monotonic_ns() - started) / 1'000'000;
        if (error.code() == ErrorCode::busy) {
          log_ << "busy " << waited << " in " << doing_ << ": " << one_line(error.what()) << '\n';
        } else {
          log_ << "error in " << doing_ << ": " << to_string(error.code()) << ' '
               << one_line(error.what()) << '\n';
        }
      }
    }
    return log_.str();
  }

 private:
  static std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
  }
  int between(int low, int high) { return std::uniform_int_distribution<int>(low, high)(random_); }
  void fail(const std::string& what) { log_ << "fail " << me_ << ' ' << what << '\n'; }
  void charge(const std::string& limit, const std::string& owner, std::int64_t units) {
    log_ << "charge " << limit << ' ' << owner << ' ' << units << '\n';
  }

  // Holds a lease of the shared owner a moment, perhaps renews it, and releases it.
  void hold(const std::string& lease) {
    doing_ += ", then renew or release";
    const std::int64_t start = monotonic_ns();
    if (between(0, 3) == 0) {
      const LeaseResult renewed = engine_.renew_lease(lease);
      if (!renewed.allowed) fail("renew of a held lease refused");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(between(0, 300)));
    const std::int64_t end = monotonic_ns();
    log_ << "held " << start << ' ' << end << '\n';
    if (!engine_.release_lease(lease)) fail("release of a held lease: it was not held");
  }

  // A consume_all's answer over `charges` (cost `cost`): allowed, it charged every rate limit
  // and took exactly one lease of each concurrency limit named; denied, only `ac` may deny.
  void answered(const Decision& decision, const std::vector<Charge>& charges, std::int64_t cost,
                bool charged, const char* call) {
    const bool with_ac = std::any_of(charges.begin(), charges.end(),
                                     [](const Charge& c) { return c.limit == "ac"; });
    if (!decision.result.allowed) {
      if (!decision.leases.empty()) fail(std::string(call) + " denied with a lease");
      if (decision.limit != "ac") fail(std::string(call) + " denied by " + decision.limit);
      return;
    }
    const std::size_t expected = with_ac ? 1 : 0;
    if (decision.leases.size() != expected) {
      fail(fmt::format("{} allowed with {} leases ({} expected), decided by {}", call,
                       decision.leases.size(), expected, decision.limit));
    }
    if (charged) {
      for (const Charge& c : charges) {
        if (c.limit != "ac") charge(std::string(c.limit), std::string(c.owner), c.cost.value_or(cost));
      }
    }
    for (const LeaseGrant& grant : decision.leases) {
      if (grant.limit != "ac") fail("a lease of " + grant.limit);
    }
  }

  void step(int pick, int iteration) {
    const std::string shared = "shared";
    if (pick < 25) {
      // consume_all of a rate limit and the concurrency limit, the rate limit at its own cost
      // or the call's.
      const std::int64_t cost = between(1, 3);
      std::vector<Charge> charges{{"ar", shared}, {"ac", shared, 1}};
      if (between(0, 1)) charges[0].cost = between(1, 50);
      if (between(0, 1)) std::swap(charges[0], charges[1]);
      doing_ = charges[0].limit == "ar" ? "consume_all ar,ac" : "consume_all ac,ar";
      const Decision decision = engine_.consume_all(charges, cost);
      answered(decision, charges, cost, true, "consume_all ar,ac");
      for (const LeaseGrant& grant : decision.leases) hold(grant.lease);
    } else if (pick < 45) {
      // consume_all of two rate limits, with or without costs of their own.
      const std::int64_t cost = between(1, 3);
      std::vector<Charge> charges{{"ar", shared}, {"ar2", shared}};
      for (Charge& c : charges) {
        if (between(0, 2) == 0) c.cost = between(1, 40);
      }
      doing_ = "consume_all ar,ar2";
      answered(engine_.consume_all(charges, cost), charges, cost, true, "consume_all ar,ar2");
    } else if (pick < 55) {
      // A key of a pool every process draws from: each key always asks the same.
      const int key = between(0, kSharedKeys - 1);
      const std::vector<Charge> charges{{"ar", shared, 1 + key % 3}, {"ar2", shared}};
      const std::int64_t cost = 1 + key % 2;
      doing_ = "keyed consume_all ar,ar2";
      const Decision decision =
          engine_.consume_all(charges, cost, "shared-" + std::to_string(key));
      log_ << "key " << key << ' ' << (decision.result.replayed ? "replayed" : "fresh") << ' '
           << decision.result.remaining << '\n';
      answered(decision, charges, cost, !decision.result.replayed, "keyed consume_all ar,ar2");
    } else if (pick < 60) {
      // A key of this process's own with the concurrency limit, and its retry at once.
      const std::string key = me_ + "-" + std::to_string(iteration);
      const std::vector<Charge> charges{{"ac", shared}, {"ar", shared, 7}};
      doing_ = "keyed consume_all ac,ar";
      const Decision first = engine_.consume_all(charges, 1, key);
      if (first.result.replayed) fail("a new key answered as replayed");
      answered(first, charges, 1, true, "keyed consume_all ac,ar");
      const Decision retry = engine_.consume_all(charges, 1, key);
      if (!retry.result.replayed || retry.result.allowed != first.result.allowed ||
          retry.leases != first.leases) {
        fail("the retry of a key is not the first answer replayed");
      }
      for (const LeaseGrant& grant : first.leases) hold(grant.lease);
    } else if (pick < 65) {
      const std::int64_t cost = between(1, 20);
      doing_ = "consume ar2";
      if (!engine_.consume("ar2", shared, cost).allowed) fail("consume ar2 denied");
      charge("ar2", shared, cost);
    } else if (pick < 70) {
      const std::int64_t cost = between(1, 20);
      doing_ = "record ar";
      engine_.record("ar", me_, cost);
      charge("ar", me_, cost);
      own_ += cost;
    } else if (pick < 75) {
      if (own_ > 0) {
        const std::int64_t cost = between(1, static_cast<int>(std::min<std::int64_t>(own_, 20)));
        doing_ = "refund ar";
        engine_.refund("ar", me_, cost);
        log_ << "refund ar " << me_ << ' ' << cost << '\n';
        own_ -= cost;
      }
    } else if (pick < 83) {
      // acquire alone, or acquire_all with a rate limit, not waiting.
      if (between(0, 1)) {
        doing_ = "acquire_lease ac";
        const LeaseResult lease = engine_.acquire_lease("ac", shared);
        if (lease.allowed == lease.lease.empty()) fail("acquire's answer and its lease disagree");
        if (lease.allowed) hold(lease.lease);
      } else {
        const std::vector<Charge> charges{{"ar", shared, 2}, {"ac", shared}};
        doing_ = "acquire_all ar,ac";
        const Decision decision = engine_.acquire_all(charges, 1, std::chrono::milliseconds(0));
        answered(decision, charges, 1, true, "acquire_all ar,ac");
        for (const LeaseGrant& grant : decision.leases) hold(grant.lease);
      }
    } else if (pick < 86) {
      doing_ = "reset ar";
      engine_.reset("ar", me_);
      log_ << "reset ar " << me_ << '\n';
      own_ = 0;
    } else if (pick < 89) {
      // A lease of this process's own owner, forgotten by a reset: its release frees nothing.
      doing_ = "acquire_lease, reset, release ac (own owner)";
      const LeaseResult lease = engine_.acquire_lease("ac", me_);
      if (!lease.allowed) fail("acquire of an owner of its own denied");
      engine_.reset("ac", me_);
      if (engine_.release_lease(lease.lease)) fail("a lease released by reset was still held");
    } else if (pick < 95) {
      // Override changes on the shared owner of the rate limit, never below what any run uses.
      doing_ = "override change ar";
      if (between(0, 2) == 0) {
        engine_.remove_override("ar", shared);
      } else {
        engine_.set_override({"ar", shared, Policy::maximum, kBig / 2 + between(0, 1000)});
      }
    } else {
      doing_ = "check_all";
      const Decision rates = engine_.check_all({{"ar", shared, 5}, {"ar2", shared}}, 2);
      if (!rates.result.allowed) fail("check_all of the rate limits denied");
      engine_.check_all({{"ar", shared}, {"ac", shared}});
    }
  }

  Engine& engine_;
  std::mt19937_64 random_;
  std::string me_;
  std::int64_t own_ = 0;  // this process's usage of ar, net
  std::string doing_;     // the operation running, for the log of an error
  std::ostringstream log_;
};

// Forks a worker; it opens its engine, waits for `go` to close, runs, and writes its log.
pid_t spawn(const std::string& location, int index, std::uint64_t seed, const int go[2],
            const std::string& log_path) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  close(go[1]);  // so that the parent's close is the start
  int status = 0;
  std::string log;
  try {
    Engine engine = Engine::open(location, fixed_clock());
    char byte = 0;
    while (read(go[0], &byte, 1) > 0) {
    }
    log = Worker(engine, index, seed).run(kIterations);
  } catch (const std::exception& error) {
    log += std::string("error ") + error.what() + "\n";
    status = 1;
  }
  std::ofstream(log_path) << log << "end\n";
  _exit(status);
}

}  // namespace

TEST_CASE("8 processes mixing every operation keep every invariant",
          "[combination][processes]") {
  const Backend backend = each_backend();
  const std::uint64_t seed = seed_of_run();
  CAPTURE(to_string(backend), seed);
  INFO("run again with QUOTA_COMBINATION_SEED=" << seed);
  TestDatabase database(backend);
  TempDir logs;
  {
    Engine setup = Engine::open(database.location(), fixed_clock());
    setup.define(make_limit("ar", Algorithm::fixed_window, kBig, 3'600'000));
    setup.define(make_limit("ar2", Algorithm::fixed_window, kBig, 3'600'000));
    setup.define(make_limit("ac", Algorithm::concurrency, kHolders, 30'000));
  }

  int go[2];
  REQUIRE(pipe(go) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(spawn(database.location(), p, seed * 1000 + static_cast<std::uint64_t>(p),
                             go, logs.file("p" + std::to_string(p) + ".log")));
  }
  close(go[0]);
  // Every child has its engine open (or nearly): let them start at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  close(go[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int failed_children = 0;
  for (pid_t child : children) {
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_children;
  }
  CHECK(failed_children == 0);

  // The answers, as the logs tell them.
  std::map<std::pair<std::string, std::string>, std::int64_t> expected;
  std::vector<std::pair<std::int64_t, int>> moments;  // (instant, 0 start / 1 end)
  std::map<int, int> fresh_keys;
  std::set<int> used_keys;
  std::vector<std::string> failures;  // broken invariants ("fail") and errors
  std::vector<std::string> busy_early;
  int busy = 0, early_busy = 0, holds = 0, lines = 0;
  for (int p = 0; p < kProcesses; ++p) {
    std::ifstream in(logs.file("p" + std::to_string(p) + ".log"));
    std::string line;
    bool ended = false;
    while (std::getline(in, line)) {
      ++lines;
      std::istringstream words(line);
      std::string word;
      words >> word;
      if (word == "charge" || word == "refund") {
        std::string limit, owner;
        std::int64_t units = 0;
        words >> limit >> owner >> units;
        expected[{limit, owner}] += word == "charge" ? units : -units;
      } else if (word == "reset") {
        std::string limit, owner;
        words >> limit >> owner;
        expected[{limit, owner}] = 0;
      } else if (word == "held") {
        std::int64_t start = 0, end = 0;
        words >> start >> end;
        moments.emplace_back(start, 0);
        moments.emplace_back(end, 1);
        ++holds;
      } else if (word == "key") {
        int key = 0;
        std::string how;
        words >> key >> how;
        used_keys.insert(key);
        if (how == "fresh") ++fresh_keys[key];
      } else if (word == "busy") {
        std::int64_t waited = 0;
        words >> waited;
        ++busy;
        if (waited < kBusyTimeout.count()) {
          ++early_busy;
          busy_early.push_back(fmt::format("p{}: {}", p, line));
        }
      } else if (word == "end") {
        ended = true;
      } else if (word == "fail") {
        failures.insert(failures.begin(), fmt::format("p{}: {}", p, line));  // first shown
      } else {
        failures.push_back(fmt::format("p{}: {}", p, line));
      }
    }
    if (!ended) failures.push_back(fmt::format("p{}: its log did not end", p));
  }

  // What the database holds.
  Engine engine = Engine::open(database.location(), fixed_clock());
  std::vector<std::string> mismatches;
  for (const auto& [place, units] : expected) {
    const std::int64_t used = engine.owner_usage(place.first, place.second).used;
    if (used != units) {
      mismatches.push_back(fmt::format("{} {}: used {}, the answers charged {}", place.first,
                                       place.second, used, units));
    }
  }
  const std::size_t left = engine.leases("ac").size();

  // Holders at once: a start before an end at the same instant (touching counts as overlap).
  std::sort(moments.begin(), moments.end());
  std::int64_t at_once = 0, most_at_once = 0;
  for (const auto& [when, is_end] : moments) {
    at_once += is_end ? -1 : 1;
    most_at_once = std::max(most_at_once, at_once);
  }
  std::vector<int> keys_not_once;
  for (int key : used_keys) {
    if (fresh_keys[key] != 1) keys_not_once.push_back(key);
  }

  // Up to 8 of each kind of failure (each cut to 300 characters), then how many there were.
  const auto shown = [](const std::vector<std::string>& all) {
    std::string text;
    for (std::size_t i = 0; i < all.size() && i < 8; ++i) text += "\n  " + all[i].substr(0, 300);
    if (all.size() > 8) text += fmt::format("\n  ... {} in all", all.size());
    return text;
  };
  INFO("lines " << lines << ", holds " << holds << ", busy " << busy << " (" << early_busy
                << " before the timeout)");
  INFO("broken invariants and errors:" << shown(failures));
  INFO("busy before the timeout:" << shown(busy_early));
  INFO("usage against the answers:" << shown(mismatches));
  CHECK(failures.empty());
  CHECK(mismatches.empty());
  CHECK(early_busy == 0);
  CHECK(holds > 0);
  CHECK(most_at_once <= kHolders);
  CHECK(left == 0);
  CHECK(keys_not_once.empty());
}

}  // namespace quota::test
