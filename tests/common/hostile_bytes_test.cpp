// Hostile bytes in idempotency keys and lease ids (SPEC §13, §14), on every backend: one rule
// on both. A key is 1 to 255 bytes of UTF-8 text without NUL, as an owner is (PostgreSQL's
// text ends at a NUL, so "a\0b", "a\0c" and "a" would be one key there and three on SQLite);
// a lease id is of the form the engine issues (32 hex digits in lower case), anything else is
// invalid input (exit 2), never lease_expired; quotactl echoes no control character of one.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "quota/lease.h"
#include "quota/quota.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;

using namespace std::string_literals;

template <typename Action>
std::optional<ErrorCode> code_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.code();
  }
  return std::nullopt;
}

Limit slots() {
  Limit limit;
  limit.name = "slots";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = 100;
  limit.period = std::chrono::milliseconds(60'000);
  return limit;
}

}  // namespace

TEST_CASE("a key with a NUL byte or invalid UTF-8 is refused on every backend, changing nothing",
          "[idempotency][hostile]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(make_limit("send", Algorithm::fixed_window, 100, 60'000));
  f.engine.define(slots());
  const std::string before = f.database.dump();
  for (const std::string& key : {"a\0b"s, "a\0c"s, "\0"s, "a\xff"s, "\xc0\xaf"s, "\xed\xa0\x80"s}) {
    CAPTURE(key);
    CHECK(code_of([&] { f.engine.consume("send", "u", 1, key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { f.engine.record("send", "u", 1, key); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { f.engine.consume_all({"send"}, "u", 1, key); }) ==
          ErrorCode::invalid_argument);
    CHECK(code_of([&] { f.engine.acquire_lease("slots", "u", 1, key); }) ==
          ErrorCode::invalid_argument);
    CHECK(code_of([&] { validate_idempotency_key(key); }) == ErrorCode::invalid_argument);
  }
  CHECK(f.database.dump() == before);
  // UTF-8 keys are keys, each its own.
  CHECK_FALSE(f.engine.consume("send", "u", 1, "a").replayed);
  CHECK_FALSE(f.engine.consume("send", "u", 1, "ключ-é").replayed);
  CHECK(f.engine.consume("send", "u", 1, "ключ-é").replayed);
  CHECK(f.engine.owner_usage("send", "u").used == 2);

  // quotactl: exit 2, the database untouched.
  std::ostringstream out;
  std::ostringstream err;
  const int status = quotactl::run({"--db", f.database.location(), "--now", std::to_string(T),
                                    "consume", "send", "u", "--key", "k\xff"},
                                   out, err);
  CHECK(status == 2);
  CHECK_THAT(err.str(), Catch::Contains("not valid UTF-8"));
  CHECK(f.engine.owner_usage("send", "u").used == 2);
}

TEST_CASE("a lease id not of the form the engine issues is invalid input on every backend",
          "[lease][hostile]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(slots());
  const LeaseResult held = f.engine.acquire_lease("slots", "u");
  REQUIRE(held.allowed);
  const std::string before = f.database.dump();
  const std::vector<std::string> malformed = {"nothex",
                                              "",
                                              std::string(31, 'a'),
                                              std::string(33, 'a'),
                                              std::string(32, '\xff'),
                                              "0123456789ABCDEF0123456789ABCDEF",
                                              held.lease + "\0"s,
                                              "\x1b]0;pwned\a",
                                              std::string(64, 'a')};
  for (const std::string& id : malformed) {
    CAPTURE(id);
    CHECK(code_of([&] { f.engine.renew_lease(id); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { f.engine.release_lease(id); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { validate_lease_id(id); }) == ErrorCode::invalid_argument);
  }
  CHECK(f.database.dump() == before);
  // Well-formed but unknown: not held.
  const std::string unknown(32, '0');
  CHECK(f.engine.renew_lease(unknown).reason == Reason::lease_expired);
  CHECK_FALSE(f.engine.release_lease(unknown));
  CHECK(f.engine.renew_lease(held.lease).allowed);
  const std::string renewed = f.database.dump();

  // The C API answers the same.
  quota_engine* engine = nullptr;
  quota_options options;
  quota_options_init(&options);
  const std::string& location = f.database.location();
  REQUIRE(quota_open(location.data(), location.size(), &options, &engine) == QUOTA_OK);
  quota_lease_result result{};
  CHECK(quota_renew_lease(engine, "nothex", 6, 0, &result) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_release_lease(engine, "nothex", 6, nullptr) == QUOTA_ERROR_INVALID_ARGUMENT);
  int was_held = -1;
  CHECK(quota_release_lease(engine, unknown.data(), unknown.size(), &was_held) == QUOTA_OK);
  CHECK(was_held == 0);
  quota_close(engine);

  // quotactl: exit 2 (invalid_argument), and no control character of the id on the terminal.
  for (const char* command : {"renew", "release"}) {
    for (const std::string& id : {"nothex"s, "\x1b]0;pwned\a"s}) {
      CAPTURE(command, id);
      for (const bool json : {false, true}) {
        std::vector<std::string> args = {
            "--db", f.database.location(), "--now", std::to_string(T), "lease", command, id};
        if (json) args.push_back("--json");
        std::ostringstream out;
        std::ostringstream err;
        CHECK(quotactl::run(args, out, err) == 2);
        CHECK_THAT(err.str(), Catch::Contains("invalid lease ID"));
        CHECK(err.str().find('\x1b') == std::string::npos);
        CHECK(out.str().find('\x1b') == std::string::npos);
        CHECK(err.str().find('\a') == std::string::npos);
        if (json) {
          CHECK(nlohmann::json::parse(out.str())["error"]["code"] == "invalid_argument");
        }
      }
    }
  }
  CHECK(f.database.dump() == renewed);
}

}  // namespace quota::test
