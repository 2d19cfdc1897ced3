// Idempotency keys (SPEC §14; docs/concepts.md, "Retries"), on every backend: the first
// request with a key is decided and its answer stored with the key; a retry with the key
// within its lifetime is answered with that answer, replayed, charging nothing; the key used
// for anything else is idempotency_conflict, changing nothing; gc deletes expired keys.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "quota/quota.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t kMinute = 60'000;
constexpr std::int64_t kDay = 86'400'000;

// The error code that `action` throws (nullopt when it throws none).
template <typename Action>
std::optional<ErrorCode> code_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.code();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a retry with the same key is answered as the first request, and charged once",
          "[idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("send", Algorithm::fixed_window, 2, kMinute));
  int after_hooks = 0;
  Hooks hooks;
  hooks.after_consume = [&](const Request&, const Result&) { ++after_hooks; };
  engine.set_hooks("send", hooks);

  const Result first = engine.consume("send", "u", 1, "order-1");
  CHECK(first.allowed);
  CHECK_FALSE(first.replayed);
  CHECK(first.remaining == 1);
  clock.advance(500);
  const Result retry = engine.consume("send", "u", 1, "order-1");
  CHECK(retry.replayed);
  Result expected = first;
  expected.replayed = true;
  CHECK(retry == expected);  // the first answer's figures, as stored
  CHECK(engine.owner_usage("send", "u").used == 1);
  CHECK(after_hooks == 1);  // a replay calls no hook

  // Another key is another request; a denial is stored and replayed as a denial.
  CHECK(engine.consume("send", "u", 1, "order-2").allowed);
  const Result denied = engine.consume("send", "u", 1, "order-3");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.denied == 1);
  const Result denied_again = engine.consume("send", "u", 1, "order-3");
  CHECK(denied_again.replayed);
  CHECK_FALSE(denied_again.allowed);
  CHECK(denied_again.denied == 1);
  CHECK(engine.owner_usage("send", "u").denied == 1);  // the replay counted no denial

  // A record with a key is kept the same way.
  const Result recorded = engine.record("send", "v", 5, "import-7");
  CHECK_FALSE(recorded.allowed);  // over the limit, recorded all the same
  CHECK(engine.record("send", "v", 5, "import-7").replayed);
  CHECK(engine.owner_usage("send", "v").used == 5);
}

TEST_CASE("a key is kept per limit and owner, for Options::idempotency_ttl", "[idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Options options = options_with(clock);
  options.idempotency_ttl = std::chrono::minutes(5);
  Engine engine = Engine::open(database.location(), options);
  engine.define(make_limit("send", Algorithm::token_bucket, 100, kDay));
  engine.define(make_limit("mail", Algorithm::sliding_log, 100, kDay));

  CHECK_FALSE(engine.consume("send", "u", 1, "k").replayed);
  CHECK_FALSE(engine.consume("send", "w", 1, "k").replayed);  // another owner
  CHECK_FALSE(engine.consume("mail", "u", 1, "k").replayed);  // another limit
  clock.advance(5 * kMinute - 1);
  CHECK(engine.consume("send", "u", 1, "k").replayed);
  clock.advance(1);  // the key's lifetime has ended: a new request
  const Result again = engine.consume("send", "u", 1, "k");
  CHECK_FALSE(again.replayed);
  CHECK(engine.owner_usage("send", "u").used == 2);
  // Even another request may use the key now.
  clock.advance(5 * kMinute);
  CHECK_FALSE(engine.consume("send", "u", 3, "k").replayed);
}

TEST_CASE("the same key for another request is idempotency_conflict and changes nothing",
          "[idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("send", Algorithm::sliding_window, 10, kMinute));
  engine.define(make_limit("mail", Algorithm::fixed_window, 10, kMinute));
  engine.consume("send", "u", 2, "k");
  const std::string before = database.dump();

  SECTION("another cost") {
    CHECK(code_of([&] { engine.consume("send", "u", 3, "k"); }) == ErrorCode::idempotency_conflict);
  }
  SECTION("another operation") {
    CHECK(code_of([&] { engine.record("send", "u", 2, "k"); }) == ErrorCode::idempotency_conflict);
  }
  SECTION("a consume_all that includes the limit") {
    CHECK(code_of([&] { engine.consume_all({"send", "mail"}, "u", 2, "k"); }) ==
          ErrorCode::idempotency_conflict);
  }
  CHECK(database.dump() == before);
  try {
    engine.consume("send", "u", 3, "k");
  } catch (const Error& error) {
    CHECK_THAT(error.what(), Catch::Contains("use a new key for a new request"));
  }
}

TEST_CASE("consume_all with a key stores the decision for every limit of the call",
          "[idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("minute", Algorithm::fixed_window, 10, kMinute));
  engine.define(make_limit("day", Algorithm::fixed_window, 1, kDay));

  const Decision first = engine.consume_all({"minute", "day"}, "u", 1, "job-1");
  CHECK(first.result.allowed);
  const Decision denied = engine.consume_all({"minute", "day"}, "u", 1, "job-2");
  CHECK_FALSE(denied.result.allowed);
  CHECK(denied.limit == "day");
  clock.advance(1000);
  const Decision retry = engine.consume_all({"day", "minute"}, "u", 1, "job-2");  // any order
  CHECK(retry.result.replayed);
  CHECK(retry.limit == "day");
  CHECK_FALSE(retry.result.allowed);
  CHECK(retry.result.retry_after_ms == denied.result.retry_after_ms);
  CHECK(engine.owner_usage("minute", "u").used == 1);
  CHECK(engine.owner_usage("day", "u").denied == 1);
  // The key is the call's for each limit: a lone consume of one of them conflicts.
  CHECK(code_of([&] { engine.consume("minute", "u", 1, "job-1"); }) ==
        ErrorCode::idempotency_conflict);
  CHECK(code_of([&] { engine.consume_all({"minute"}, "u", 1, "job-1"); }) ==
        ErrorCode::idempotency_conflict);
}

TEST_CASE("bad idempotency keys and lifetimes are refused before anything changes",
          "[idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(make_limit("send", Algorithm::fixed_window, 10, kMinute));
  const std::string before = database.dump();
  for (const std::string& key : {std::string(), std::string(256, 'k')}) {
    CAPTURE(key.size());
    CHECK(code_of([&] { engine.consume("send", "u", 1, key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { engine.record("send", "u", 1, key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { engine.consume_all({"send"}, "u", 1, key); }) ==
          ErrorCode::invalid_argument);
  }
  CHECK(database.dump() == before);
  CHECK_FALSE(engine.consume("send", "u", 1, std::string(255, 'k')).replayed);  // the longest
  CHECK(engine.consume("send", "u", 1, std::string(255, 'k')).replayed);

  for (const auto ttl : {std::chrono::milliseconds(999), std::chrono::milliseconds(0),
                         std::chrono::milliseconds(30LL * kDay + 1)}) {
    Options options = options_with(clock);
    options.idempotency_ttl = ttl;
    CHECK(code_of([&] { Engine::open(database.location(), options); }) ==
          ErrorCode::invalid_argument);
  }
}

TEST_CASE("gc deletes expired keys and keeps live ones; removing a limit removes its keys",
          "[idempotency][gc]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  Options options = options_with(clock);
  options.idempotency_ttl = std::chrono::minutes(1);
  Engine engine = Engine::open(database.location(), options);
  engine.define(make_limit("send", Algorithm::fixed_window, 100, kDay));
  engine.define(make_limit("mail", Algorithm::fixed_window, 100, kDay));
  engine.consume("send", "u", 1, "old");
  clock.advance(30'000);
  engine.consume("send", "u", 1, "new");
  engine.consume("mail", "u", 1, "new");
  clock.advance(30'000);  // "old" has just expired
  engine.gc();
  CHECK(database.integer("SELECT count(*) FROM quota_idempotency WHERE key = 'old'") == 0);
  CHECK(database.integer("SELECT count(*) FROM quota_idempotency WHERE key = 'new'") == 2);
  CHECK(engine.consume("send", "u", 1, "new").replayed);  // gc kept its answer
  CHECK(engine.remove("mail"));
  CHECK(database.integer("SELECT count(*) FROM quota_idempotency WHERE limit_name = 'mail'") == 0);
}

TEST_CASE("one key used by many threads and engines at once is charged exactly once",
          "[idempotency][concurrency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  {
    Engine engine = Engine::open(database.location(), options_with(clock));
    engine.define(make_limit("send", Algorithm::fixed_window, 1000, kDay));
  }
  constexpr int kEngines = 4;
  constexpr int kThreadsPerEngine = 2;
  constexpr int kKeys = 20;
  std::vector<std::unique_ptr<Engine>> engines;
  for (int e = 0; e < kEngines; ++e) {
    engines.push_back(std::make_unique<Engine>(Engine::open(database.location(), options_with(clock))));
  }
  std::atomic<int> first_answers{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int e = 0; e < kEngines; ++e) {
    for (int t = 0; t < kThreadsPerEngine; ++t) {
      threads.emplace_back([&, e] {
        for (int k = 0; k < kKeys; ++k) {
          try {
            const Result result = engines[e]->consume("send", "u", 1, "key-" + std::to_string(k));
            if (!result.replayed) ++first_answers;
          } catch (const Error&) {
            ++failures;
          }
        }
      });
    }
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(first_answers == kKeys);  // each key decided once, every other call replayed
  CHECK(engines.front()->owner_usage("send", "u").used == kKeys);
}

TEST_CASE("quota_consume_keyed and quota_record_keyed: the C API's keyed requests",
          "[idempotency][c_api]") {
  TestDatabase database(Backend::sqlite);
  {
    Engine engine = Engine::open(database.location());
    engine.define(make_limit("send", Algorithm::fixed_window, 5, kDay));
  }
  quota_options options;
  quota_options_init(&options);
  CHECK(options.idempotency_ttl_ms == kDay);
  quota_engine* engine = nullptr;
  const std::string& path = database.location();
  REQUIRE(quota_open(path.data(), path.size(), &options, &engine) == QUOTA_OK);
  quota_result result{};
  int replayed = -1;
  CHECK(quota_consume_keyed(engine, "send", 4, "u", 1, 2, "k", 1, &result, &replayed) == QUOTA_OK);
  CHECK(replayed == 0);
  CHECK(result.remaining == 3);
  CHECK(quota_consume_keyed(engine, "send", 4, "u", 1, 2, "k", 1, &result, &replayed) == QUOTA_OK);
  CHECK(replayed == 1);
  CHECK(result.remaining == 3);
  CHECK(quota_consume_keyed(engine, "send", 4, "u", 1, 2, "k", 1, &result, nullptr) == QUOTA_OK);
  CHECK(quota_record_keyed(engine, "send", 4, "u", 1, 2, "k", 1, &result, &replayed) ==
        QUOTA_ERROR_IDEMPOTENCY_CONFLICT);
  CHECK(std::string(quota_status_name(QUOTA_ERROR_IDEMPOTENCY_CONFLICT)) == "idempotency_conflict");
  CHECK(quota_consume_keyed(engine, "send", 4, "u", 1, 1, "", 0, &result, &replayed) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_record_keyed(engine, "send", 4, "u", 1, 1, "r", 1, &result, &replayed) == QUOTA_OK);
  CHECK(replayed == 0);
  quota_close(engine);
  options.idempotency_ttl_ms = 10;
  CHECK(quota_open(path.data(), path.size(), &options, &engine) == QUOTA_ERROR_INVALID_ARGUMENT);
  Engine check = Engine::open(database.location());
  CHECK(check.owner_usage("send", "u").used == 3);
}

}  // namespace quota::test
