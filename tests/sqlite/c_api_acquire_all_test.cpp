// quota_acquire_all (the C API of Engine::acquire_all): waits for the slowest of several
// limits, all or nothing; only the final denial counts, on the deciding limit.
#include <catch2/catch.hpp>
#include <string>

#include "quota/engine.h"
#include "quota/quota.h"
#include "support.h"

namespace quota::test {
namespace {

TEST_CASE("c_api: quota_acquire_all waits for the slowest limit and counts one denial",
          "[c_api][acquire]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  {
    Engine engine = Engine::open(path);
    // Periods long enough that a loaded machine (the sanitizer build) never lets a bucket
    // refill between the two calls below, which read the real clock.
    engine.define(make_bucket("fast", 1, 2000, 1));
    engine.define(make_bucket("slow", 1, 4000, 1));
  }
  quota_engine* engine = nullptr;
  REQUIRE(quota_open(path.data(), path.size(), nullptr, &engine) == QUOTA_OK);
  const char* limits[] = {"fast", "slow"};
  const size_t lengths[] = {4, 4};
  const std::string owner = "app";
  quota_result result{};
  size_t deciding = 99;
  REQUIRE(quota_consume_all(engine, limits, lengths, 2, owner.data(), owner.size(), 1, &result,
                            &deciding) == QUOTA_OK);
  REQUIRE(result.allowed == 1);

  // No time to wait: the slower limit decides and counts the denial.
  REQUIRE(quota_acquire_all(engine, limits, lengths, 2, owner.data(), owner.size(), 1, 0, nullptr,
                            &result, &deciding) == QUOTA_OK);
  CHECK(result.allowed == 0);
  CHECK(deciding == 1);
  CHECK(result.denied == 1);
  // Time enough: allowed, no further denial anywhere.
  REQUIRE(quota_acquire_all(engine, limits, lengths, 2, owner.data(), owner.size(), 1, 5000,
                            nullptr, &result, &deciding) == QUOTA_OK);
  CHECK(result.allowed == 1);

  // Bad input: an error, *result untouched.
  quota_result untouched{};
  untouched.remaining = 777;
  CHECK(quota_acquire_all(engine, nullptr, nullptr, 2, owner.data(), owner.size(), 1, 10, nullptr,
                          &untouched, nullptr) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_acquire_all(engine, limits, lengths, 2, owner.data(), owner.size(), 1, -1, nullptr,
                          &untouched, nullptr) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(quota_last_error()).find("max_wait") != std::string::npos);
  CHECK(quota_acquire_all(engine, limits, lengths, 0, owner.data(), owner.size(), 1, 10, nullptr,
                          &untouched, nullptr) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(untouched.remaining == 777);
  quota_close(engine);

  Engine reopened = Engine::open(path);
  CHECK(reopened.owner_usage("slow", "app").denied == 1);
  CHECK(reopened.owner_usage("fast", "app").denied == 0);
}

}  // namespace
}  // namespace quota::test
