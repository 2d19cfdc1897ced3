// quota_ensure (the C API of Engine::ensure): defines a limit only when none of that name
// exists, and returns the stored definition in a quota_limit.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "quota/engine.h"
#include "quota/quota.h"
#include "support.h"

namespace quota::test {
namespace {

int ensure(quota_engine* engine, const std::string& name, int algorithm, int64_t maximum,
           int64_t period_ms, int64_t burst, quota_limit* stored) {
  return quota_ensure(engine, name.data(), name.size(), algorithm, maximum, period_ms, burst,
                      stored);
}

TEST_CASE("c_api: quota_ensure creates a missing limit and returns a stored one unchanged",
          "[c_api][ensure]") {
  TempDir dir;
  const std::string path = dir.file("quota.db");
  quota_engine* engine = nullptr;
  REQUIRE(quota_open(path.data(), path.size(), nullptr, &engine) == QUOTA_OK);

  quota_limit stored{};
  REQUIRE(ensure(engine, "upload", QUOTA_TOKEN_BUCKET, 5, 60'000, 8, &stored) == QUOTA_OK);
  CHECK(stored.algorithm == QUOTA_TOKEN_BUCKET);
  CHECK(stored.maximum == 5);
  CHECK(stored.period_ms == 60'000);
  CHECK(stored.burst == 8);
  CHECK(stored.shadow == 0);
  CHECK(stored.block_ms == 0);
  CHECK(stored.calendar == QUOTA_NO_CALENDAR);
  CHECK(stored.utc_offset_minutes == 0);
  CHECK(stored.anchor_ms == QUOTA_NO_ANCHOR);

  // An operator's calendar limit of that name, with a lockout: ensure leaves it and says so.
  const std::string name = "upload";
  REQUIRE(quota_define_calendar(engine, name.data(), name.size(), 100, QUOTA_MONTH, 540,
                                1'700'000'000'000) == QUOTA_OK);
  REQUIRE(quota_set_block(engine, name.data(), name.size(), 30'000) == QUOTA_OK);
  REQUIRE(ensure(engine, "upload", QUOTA_SLIDING_LOG, 1, 1000, QUOTA_NO_BURST, &stored) ==
          QUOTA_OK);
  CHECK(stored.algorithm == QUOTA_FIXED_WINDOW);
  CHECK(stored.maximum == 100);
  CHECK(stored.burst == QUOTA_NO_BURST);
  CHECK(stored.block_ms == 30'000);
  CHECK(stored.calendar == QUOTA_MONTH);
  CHECK(stored.utc_offset_minutes == 540);
  CHECK(stored.anchor_ms == 1'700'000'000'000);
  // NULL for the answer is allowed.
  CHECK(ensure(engine, "send", QUOTA_SLIDING_LOG, 10, 60'000, QUOTA_NO_BURST, nullptr) == QUOTA_OK);

  // Bad input: an error that says what to do, *stored untouched, nothing defined.
  quota_limit untouched{};
  untouched.maximum = 12345;
  CHECK(ensure(engine, "bad", 9, 10, 1000, QUOTA_NO_BURST, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(quota_last_error()).find("QUOTA_SLIDING_LOG") != std::string::npos);
  CHECK(ensure(engine, "bad", QUOTA_SLIDING_LOG, 0, 1000, QUOTA_NO_BURST, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(ensure(engine, "bad name", QUOTA_SLIDING_LOG, 1, 1000, QUOTA_NO_BURST, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(untouched.maximum == 12345);
  CHECK(quota_ensure(nullptr, "x", 1, QUOTA_SLIDING_LOG, 1, 1000, QUOTA_NO_BURST, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  quota_close(engine);

  Engine reopened = Engine::open(path);
  CHECK_FALSE(reopened.get("bad").has_value());
  CHECK(reopened.get("send")->maximum == 10);
}

}  // namespace
}  // namespace quota::test
