// Batches on every backend: the batch calls (consume_many, check_many, record_many) answer as
// the lone calls would, in one transaction, all or nothing; group commit (Options::group_commit)
// keeps threads sharing one Engine exact, undoes only the request whose hook throws, and fails
// every request of a batch whose commit fails.
#include <SQLiteCpp/Database.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "backend.h"
#include "quota/sqlite.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;
constexpr std::int64_t kDay = 86'400'000;

std::string describe(const Result& result) {
  return std::to_string(result.allowed) + " " + std::string(to_string(result.reason)) + " " +
         std::to_string(result.remaining) + " " + std::to_string(result.retry_after_ms) + " " +
         std::to_string(result.reset_at_ms) + " " + std::to_string(result.denied);
}

std::string limit_of(Algorithm algorithm) { return std::string(to_string(algorithm)); }

void define_every_algorithm(Engine& engine, std::int64_t maximum) {
  for (const Algorithm algorithm : kAllAlgorithms) {
    engine.define(make_limit(limit_of(algorithm), algorithm, maximum, kDay));
  }
}

// A mixed batch over every algorithm, some owners several times, costs 1 to 3.
std::vector<BatchRequest> mixed_batch() {
  static const std::vector<std::string> owners = {"a", "b", "a", "c", "a", "b"};
  std::vector<BatchRequest> requests;
  for (int round = 0; round < 3; ++round) {
    for (const Algorithm algorithm : kAllAlgorithms) {
      for (std::size_t i = 0; i < owners.size(); ++i) {
        requests.push_back(
            {to_string(algorithm), owners[i], static_cast<std::int64_t>(1 + (i + round) % 3)});
      }
    }
  }
  return requests;
}

// A fresh database of `backend` and an Engine on it, group commit on or off, its clock
// standing still at T.
Options grouped_options(const ManualClock& clock, bool group_commit) {
  Options options = options_with(clock);
  options.group_commit = group_commit;
  return options;
}

struct Grouped {
  Grouped(Backend backend, bool group_commit)
      : database(backend),
        engine(Engine::open(database.location(), grouped_options(clock, group_commit))) {}
  TestDatabase database;
  ManualClock clock;  // at T from the start
  Engine engine;
};

// The state of `database`: its dump with the answer columns that the general statements of
// fixed_window, sliding_window and token_bucket write for their RETURNING to read cleared
// first. A plain limit's statements compute their answer from the row instead and leave those
// columns as they were (src/statements.h), so a batch, which runs the general statements,
// and the lone calls differ there only.
std::string state_dump(const TestDatabase& database) {
  for (const char* table : {"quota_windows", "quota_buckets"}) {
    database.exec(std::string("UPDATE ") + table +
                  " SET last_reason = NULL, last_remaining = NULL, last_retry_after_ms = NULL,"
                  " last_reset_at_ms = NULL");
  }
  return database.dump();
}

using Many = std::vector<Result> (Engine::*)(const std::vector<BatchRequest>&);
using One = Result (Engine::*)(std::string_view, std::string_view, std::int64_t);

TEST_CASE("consume_many, check_many and record_many answer as the lone calls, in order",
          "[batch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  const auto [many, one, name] =
      GENERATE(std::make_tuple(Many(&Engine::consume_many), One(&Engine::consume), "consume"),
               std::make_tuple(Many(&Engine::check_many), One(&Engine::check), "check"),
               std::make_tuple(Many(&Engine::record_many), One(&Engine::record), "record"));
  CAPTURE(name);
  EngineOn batched(backend);
  EngineOn alone(backend);
  batched.clock.set(T);
  alone.clock.set(T);
  define_every_algorithm(batched.engine, 10);
  define_every_algorithm(alone.engine, 10);
  // Some usage first, so that check_many has something to see.
  for (Engine* engine : {&batched.engine, &alone.engine}) {
    for (const Algorithm algorithm : kAllAlgorithms) engine->consume(limit_of(algorithm), "a", 4);
  }
  const std::vector<BatchRequest> requests = mixed_batch();
  const std::vector<Result> answers = (batched.engine.*many)(requests);
  REQUIRE(answers.size() == requests.size());
  bool some_denied = false;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    const Result expected =
        (alone.engine.*one)(requests[i].limit, requests[i].owner, requests[i].cost);
    CHECK(describe(answers[i]) == describe(expected));
    some_denied = some_denied || !answers[i].allowed;
  }
  if (std::string(name) != "check") CHECK(some_denied);
  CHECK(state_dump(batched.database) == state_dump(alone.database));
}

TEST_CASE("a long consume_many (PostgreSQL: several pipeline chunks) answers every request",
          "[batch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  on.engine.define(make_limit("win", Algorithm::fixed_window, 3, kDay));
  std::vector<std::string> owners;
  for (int i = 0; i < 200; ++i) owners.push_back("o" + std::to_string(i));
  std::vector<BatchRequest> requests;
  for (int round = 0; round < 4; ++round) {
    for (const std::string& owner : owners) requests.push_back({"win", owner, 1});
  }
  const std::vector<Result> answers = on.engine.consume_many(requests);
  REQUIRE(answers.size() == 800);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    CAPTURE(i);
    const std::int64_t round = static_cast<std::int64_t>(i / owners.size());
    CHECK(answers[i].allowed == (round < 3));
    CHECK(answers[i].remaining == std::max<std::int64_t>(0, 2 - round));
  }
  for (const std::string& owner : owners) CHECK(on.engine.owner_usage("win", owner).used == 3);
}

TEST_CASE("a batch call's bad request is refused before any runs, naming its index",
          "[batch][validation]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  on.engine.define(make_limit("win", Algorithm::fixed_window, 5, kDay));
  on.engine.consume("win", "a");
  const std::string before = on.database.dump();
  const std::string too_long(kOwnerBound + 1, 'o');
  const auto [requests, message] = GENERATE_COPY(
      std::make_pair(
          std::vector<BatchRequest>{{"win", "a", 1}, {"win", "b", 1}, {"bad name", "c", 1}},
          std::string("request 2 of the batch")),
      std::make_pair(std::vector<BatchRequest>{{"win", "a", 1}, {"win", "", 1}},
                     std::string("request 1 of the batch")),
      std::make_pair(std::vector<BatchRequest>{{"win", "a", 0}}, std::string("request 0 of")),
      std::make_pair(std::vector<BatchRequest>{{"win", "a", 1}, {"win", "b", -3}},
                     std::string("request 1 of")),
      std::make_pair(std::vector<BatchRequest>{{"win", "a", 1}, {"win", too_long, 1}},
                     std::string("request 1 of")));
  for (const Many many :
       {Many(&Engine::consume_many), Many(&Engine::check_many), Many(&Engine::record_many)}) {
    try {
      (on.engine.*many)(requests);
      FAIL("no error");
    } catch (const Error& error) {
      CHECK(error.code() == ErrorCode::invalid_argument);
      CHECK_THAT(error.what(), Catch::Contains(message) && Catch::Contains("nothing was run"));
    }
  }
  CHECK(on.database.dump() == before);
  CHECK(on.engine.consume_many({}).empty());
  CHECK(on.database.dump() == before);
}

TEST_CASE("a batch call with an unknown limit or a throwing hook changes nothing", "[batch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  on.engine.define(make_limit("win", Algorithm::fixed_window, 5, kDay));
  on.engine.define(make_limit("hooked", Algorithm::token_bucket, 5, kDay));
  on.engine.consume("win", "a");
  const std::string before = on.database.dump();
  try {
    on.engine.consume_many({{"win", "a", 1}, {"win", "b", 1}, {"nowhere", "a", 1}});
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::unknown_limit);
    CHECK_THAT(error.what(), Catch::Contains("nowhere"));
  }
  CHECK(on.database.dump() == before);

  // The hooks of every request run, in the order of (limit, owner); one that throws undoes
  // the whole call.
  std::vector<std::string> seen;
  Hooks hooks;
  hooks.after_consume = [&](const Request& request, const Result&) {
    seen.push_back(std::string(request.owner));
    if (request.owner == "zboom") throw std::runtime_error("after_consume refused");
  };
  on.engine.set_hooks("hooked", hooks);
  try {
    on.engine.consume_many(
        {{"win", "a", 1}, {"hooked", "zboom", 1}, {"hooked", "y", 1}, {"hooked", "x", 1}});
    FAIL("no error");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) == "after_consume refused");
  }
  CHECK(seen == std::vector<std::string>{"x", "y", "zboom"});
  CHECK(on.database.dump() == before);
  // Without the throwing request, it all holds.
  const std::vector<Result> answers =
      on.engine.consume_many({{"hooked", "x", 1}, {"win", "a", 1}, {"hooked", "y", 2}});
  CHECK(answers.at(0).remaining == 4);
  CHECK(answers.at(1).remaining == 3);
  CHECK(answers.at(2).remaining == 3);
  CHECK(on.engine.owner_usage("hooked", "y").used == 2);
}

TEST_CASE("a limit redefined with another algorithm by another engine: a batch notices",
          "[batch]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  on.engine.define(make_limit("x", Algorithm::fixed_window, 5, kDay));
  on.engine.consume_many({{"x", "a", 1}});  // the engine now knows x as a fixed window
  {
    Engine other = Engine::open(on.database.location(), options_with(on.clock));
    other.define(make_bucket("x", 2, kDay));
  }
  const std::vector<Result> answers =
      on.engine.consume_many({{"x", "a", 1}, {"x", "a", 1}, {"x", "a", 1}});
  CHECK(answers.at(0).allowed);
  CHECK(answers.at(1).allowed);
  CHECK_FALSE(answers.at(2).allowed);
  CHECK(on.engine.owner_usage("x", "a").used == 2);
}

// 16 threads on one Engine, each consuming on every algorithm (lone consumes, or batches of
// consume_many): exactly the maximum is admitted per owner.
TEST_CASE("16 threads on one Engine admit exactly the maximum, group commit on and off",
          "[batch][concurrency]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  const bool group_commit = GENERATE(true, false);
  const bool batches = GENERATE(false, true);
  CAPTURE(to_string(backend), group_commit, batches);
  Grouped on(backend, group_commit);
  Engine& engine = on.engine;
  constexpr std::int64_t kMaximum = 40;
  constexpr int kThreads = 16;
  constexpr int kAttempts = 8;  // per thread, algorithm and owner: 128 asked for 40
  define_every_algorithm(engine, kMaximum);
  const std::vector<std::string> owners = {"o1", "o2"};
  std::array<std::atomic<std::int64_t>, 4> allowed{};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int attempt = 0; attempt < kAttempts; ++attempt) {
        try {
          if (batches) {
            std::vector<BatchRequest> requests;
            for (const Algorithm algorithm : kAllAlgorithms) {
              for (const std::string& owner : owners)
                requests.push_back({to_string(algorithm), owner, 1});
            }
            const std::vector<Result> answers = engine.consume_many(requests);
            for (std::size_t i = 0; i < answers.size(); ++i)
              allowed[i / owners.size()] += answers[i].allowed;
          } else {
            for (std::size_t a = 0; a < std::size(kAllAlgorithms); ++a) {
              for (const std::string& owner : owners) {
                allowed[a] += engine.consume(limit_of(kAllAlgorithms[a]), owner).allowed;
              }
            }
          }
        } catch (const Error&) {
          ++errors;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(errors == 0);
  for (std::size_t a = 0; a < std::size(kAllAlgorithms); ++a) {
    CAPTURE(limit_of(kAllAlgorithms[a]));
    CHECK(allowed[a] == kMaximum * static_cast<std::int64_t>(owners.size()));
    for (const std::string& owner : owners) {
      CHECK(engine.owner_usage(limit_of(kAllAlgorithms[a]), owner).used == kMaximum);
    }
  }
}

// Four processes of four threads, the threads of each sharing one Engine with group commit:
// exactly the maximum is admitted.
TEST_CASE("4 processes of 4 threads sharing an Engine each admit exactly the maximum",
          "[batch][concurrency]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  clock.set(T);
  constexpr std::int64_t kMaximum = 30;
  {
    Engine engine = Engine::open(database.location(), options_with(clock));
    define_every_algorithm(engine, kMaximum);
  }
  std::vector<int> pids;
  std::vector<int> reports;
  for (int p = 0; p < 4; ++p) {
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    pids.push_back(fork_child([&, write_end = ends[1]]() -> int {
      Engine engine = Engine::open(database.location(), options_with(clock));
      std::array<std::atomic<std::int64_t>, 4> allowed{};
      std::atomic<int> errors{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
          for (int attempt = 0; attempt < 12; ++attempt) {
            for (std::size_t a = 0; a < std::size(kAllAlgorithms); ++a) {
              try {
                allowed[a] += engine.consume(limit_of(kAllAlgorithms[a]), "one").allowed;
              } catch (const Error&) {
                ++errors;
              }
            }
          }
        });
      }
      for (std::thread& thread : threads) thread.join();
      std::array<std::int64_t, 5> counts{allowed[0], allowed[1], allowed[2], allowed[3], errors};
      return write(write_end, counts.data(), sizeof counts) == sizeof counts ? 0 : 1;
    }));
    close(ends[1]);
    reports.push_back(ends[0]);
  }
  std::array<std::int64_t, 5> total{};
  for (std::size_t p = 0; p < pids.size(); ++p) {
    std::array<std::int64_t, 5> counts{};
    CHECK(read(reports[p], counts.data(), sizeof counts) == sizeof counts);
    close(reports[p]);
    CHECK(wait_child(pids[p]) == 0);
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += counts[i];
  }
  CHECK(total[4] == 0);
  for (std::size_t a = 0; a < std::size(kAllAlgorithms); ++a) {
    CAPTURE(limit_of(kAllAlgorithms[a]));
    CHECK(total[a] == kMaximum);
  }
}

TEST_CASE("group commit: a hook that throws inside a batch undoes only its own request",
          "[batch][group]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  const bool group_commit = GENERATE(true, false);
  CAPTURE(to_string(backend), group_commit);
  Grouped on(backend, group_commit);
  Engine& engine = on.engine;
  engine.define(make_limit("slow", Algorithm::fixed_window, 100, kDay));
  engine.define(make_limit("win", Algorithm::fixed_window, 100, kDay));
  engine.define(make_limit("hooked", Algorithm::sliding_log, 100, kDay));
  Hooks hooks;
  hooks.after_consume = [](const Request& request, const Result&) {
    if (request.owner == "boom") throw std::runtime_error("after_consume refused");
  };
  engine.set_hooks("hooked", hooks);
  const std::vector<BatchRequest> requests = {{"win", "a", 1},     {"hooked", "h1", 1},
                                              {"win", "b", 2},     {"hooked", "boom", 1},
                                              {"hooked", "h2", 1}, {"win", "a", 1}};
  const std::vector<Outcome> outcomes =
      queue_behind_a_slow_request(engine, requests, std::chrono::milliseconds(600));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    if (requests[i].owner == "boom") {
      CHECK(outcomes[i].error == "after_consume refused");
    } else {
      CHECK(outcomes[i].error.empty());
      CHECK((outcomes[i].result && outcomes[i].result->allowed));
    }
  }
  CHECK(engine.owner_usage("win", "a").used == 2);
  CHECK(engine.owner_usage("win", "b").used == 2);
  CHECK(engine.owner_usage("hooked", "h1").used == 1);
  CHECK(engine.owner_usage("hooked", "h2").used == 1);
  CHECK(engine.owner_usage("hooked", "boom").used == 0);
}

// Six requests on limit "hooked" queue behind a slow one; how many of their hooks ran on
// another thread than their caller's.
int hooks_run_elsewhere(Engine& engine) {
  engine.define(make_limit("slow", Algorithm::fixed_window, 100, kDay));
  engine.define(make_limit("hooked", Algorithm::token_bucket, 100, kDay));
  std::mutex mutex;
  std::map<std::string, std::thread::id> ran_on;
  Hooks hooks;
  hooks.before_consume = [&](const Request& request) {
    std::lock_guard lock(mutex);
    ran_on[std::string(request.owner)] = std::this_thread::get_id();
    return true;
  };
  engine.set_hooks("hooked", hooks);
  std::vector<BatchRequest> requests;
  const std::vector<std::string> owners = {"t0", "t1", "t2", "t3", "t4", "t5"};
  for (const std::string& owner : owners) requests.push_back({"hooked", owner, 1});
  const std::vector<Outcome> outcomes =
      queue_behind_a_slow_request(engine, requests, std::chrono::milliseconds(500));
  REQUIRE(ran_on.size() == owners.size());
  int elsewhere = 0;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    CHECK((outcomes[i].result && outcomes[i].result->allowed));
    elsewhere += ran_on.at(owners[i]) != outcomes[i].caller ? 1 : 0;
  }
  return elsewhere;
}

TEST_CASE("group commit: the hooks of queued requests run on the thread that leads the batch",
          "[batch][group]") {
  const Backend backend = GENERATE(from_range(std::begin(kAllBackends), std::end(kAllBackends)));
  const bool group_commit = GENERATE(true, false);
  CAPTURE(to_string(backend), group_commit);
  Grouped on(backend, group_commit);
  Engine& engine = on.engine;
  const int elsewhere = hooks_run_elsewhere(engine);
  if (group_commit) {
    CHECK(elsewhere > 0);  // at least one queued request ran in another thread's batch
  } else {
    CHECK(elsewhere == 0);
  }
}

TEST_CASE("group commit is off for an Engine on the application's connection", "[batch][group]") {
  TempDir dir;
  SQLite::Database db(dir.file("app.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  ManualClock clock;
  clock.set(T);
  Engine engine = quota::sqlite::attach(db, options_with(clock));  // group_commit ignored here
  CHECK(hooks_run_elsewhere(engine) == 0);
}

}  // namespace
}  // namespace quota::test
