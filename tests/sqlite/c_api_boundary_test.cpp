// The C API's boundary, from C++: its numbers and names mirror the C++ enums, and no exception
// crosses it, whatever a callback throws. (Its behaviour from C is tests/c_api_test.c.)
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "quota/engine.h"
#include "quota/quota.h"
#include "support.h"

using quota::ErrorCode;

TEST_CASE("c_api: status numbers and names mirror quota::ErrorCode", "[c_api]") {
  const ErrorCode codes[] = {ErrorCode::invalid_argument,
                             ErrorCode::unknown_limit,
                             ErrorCode::busy,
                             ErrorCode::schema_too_new,
                             ErrorCode::not_migrated,
                             ErrorCode::checksum_mismatch,
                             ErrorCode::not_a_database,
                             ErrorCode::io};
  int status = QUOTA_ERROR_INVALID_ARGUMENT;
  for (const ErrorCode code : codes) {
    CAPTURE(status);
    CHECK(quota_status_name(status) == quota::to_string(code));
    ++status;
  }
  CHECK(status == QUOTA_ERROR_OUT_OF_MEMORY);
  // The code added after the C API's own two.
  CHECK(quota_status_name(QUOTA_ERROR_PERMISSION_DENIED) ==
        quota::to_string(ErrorCode::permission_denied));
}

TEST_CASE("c_api: reason and algorithm names mirror the C++ names", "[c_api]") {
  for (int reason = QUOTA_REASON_OK; reason <= QUOTA_REASON_STORE_UNAVAILABLE; ++reason) {
    const auto parsed = quota::parse_reason(quota_reason_name(reason));
    REQUIRE(parsed);
    CHECK(static_cast<int>(*parsed) == reason);
  }
  for (int algorithm = QUOTA_SLIDING_LOG; algorithm <= QUOTA_TOKEN_BUCKET; ++algorithm) {
    const auto parsed = quota::parse_algorithm(quota_algorithm_name(algorithm));
    REQUIRE(parsed);
    CHECK(static_cast<int>(*parsed) == algorithm);
  }
}

namespace {

// What the clock callback throws once armed (the clock also runs while opening).
enum class Throw { nothing, bad_alloc, runtime_error, integer };

std::int64_t throwing_clock(void* context) {
  switch (*static_cast<Throw*>(context)) {
    case Throw::nothing:
      return 1'700'000'000'000;
    case Throw::bad_alloc:
      throw std::bad_alloc();
    case Throw::runtime_error:
      throw std::runtime_error("the clock broke");
    case Throw::integer:
      throw 42;
  }
  return 0;
}

}  // namespace

TEST_CASE("c_api: no exception crosses the boundary", "[c_api]") {
  Throw mode = Throw::nothing;
  quota_options options;
  quota_options_init(&options);
  options.clock = throwing_clock;
  options.clock_context = &mode;
  quota_engine* engine = nullptr;
  REQUIRE(quota_open(":memory:", 8, &options, &engine) == QUOTA_OK);
  REQUIRE(quota_define(engine, "send", 4, QUOTA_SLIDING_LOG, 5, 1000, QUOTA_NO_BURST) == QUOTA_OK);
  quota_result result{};

  mode = Throw::bad_alloc;
  CHECK(quota_consume(engine, "send", 4, "u", 1, 1, &result) == QUOTA_ERROR_OUT_OF_MEMORY);
  CHECK(std::string(quota_last_error()).find("out of memory") != std::string::npos);

  mode = Throw::runtime_error;
  CHECK(quota_check(engine, "send", 4, "u", 1, 1, &result) == QUOTA_ERROR_INTERNAL);
  CHECK(std::string(quota_last_error()).find("the clock broke") != std::string::npos);

  mode = Throw::integer;
  CHECK(quota_record(engine, "send", 4, "u", 1, 1, &result) == QUOTA_ERROR_INTERNAL);
  CHECK(std::string(quota_last_error()).find("unknown exception") != std::string::npos);

  // The engine is still usable, and nothing was recorded by the failed calls.
  mode = Throw::nothing;
  REQUIRE(quota_check(engine, "send", 4, "u", 1, 1, &result) == QUOTA_OK);
  CHECK(result.remaining == 5);
  quota_close(engine);

  mode = Throw::bad_alloc;  // while migrating a new database
  engine = reinterpret_cast<quota_engine*>(&mode);
  CHECK(quota_open(":memory:", 8, &options, &engine) == QUOTA_ERROR_OUT_OF_MEMORY);
  CHECK(engine == nullptr);
}

namespace {

struct Reported {
  int calls = 0;
  int status = QUOTA_OK;
  std::string message;
};

void report_error(void* context, int status, const char* message) {
  auto* reported = static_cast<Reported*>(context);
  ++reported->calls;
  reported->status = status;
  reported->message = message;
}

}  // namespace

TEST_CASE("c_api: fail_open answers allowed, store_unavailable, and reports the error",
          "[c_api][policy]") {
  quota::test::TempDir dir;
  const std::string path = dir.file("quota.db");
  Reported reported;
  for (const int fail_open : {0, 1}) {
    CAPTURE(fail_open);
    quota_options options;
    quota_options_init(&options);
    CHECK(options.fail_open == 0);
    CHECK(options.on_error == nullptr);
    options.fail_open = fail_open;
    options.on_error = report_error;
    options.on_error_context = &reported;
    options.busy_timeout_ms = 20;
    quota_engine* engine = nullptr;
    REQUIRE(quota_open(path.data(), path.size(), &options, &engine) == QUOTA_OK);
    if (fail_open == 0) {
      REQUIRE(quota_define(engine, "send", 4, QUOTA_FIXED_WINDOW, 5, 1000, QUOTA_NO_BURST) ==
              QUOTA_OK);
    }
    quota::test::RawDb holder(path);
    holder.exec("BEGIN IMMEDIATE");
    quota_result result{};
    const int status = quota_consume(engine, "send", 4, "u", 1, 1, &result);
    if (fail_open == 0) {
      CHECK(status == QUOTA_ERROR_BUSY);
      CHECK(reported.calls == 0);
    } else {
      CHECK(status == QUOTA_OK);
      CHECK(result.allowed == 1);
      CHECK(result.reason == QUOTA_REASON_STORE_UNAVAILABLE);
      CHECK(std::string(quota_reason_name(result.reason)) == "store_unavailable");
      CHECK(reported.calls == 1);
      CHECK(reported.status == QUOTA_ERROR_BUSY);
      CHECK(reported.message.find("locked by another connection") != std::string::npos);
      // Bad input is an error under either policy.
      CHECK(quota_consume(engine, "send", 4, "u", 1, 0, &result) == QUOTA_ERROR_INVALID_ARGUMENT);
    }
    holder.exec("ROLLBACK");
    quota_close(engine);
  }
}

TEST_CASE("c_api: quota_options_init writes no byte past the caller's struct", "[c_api]") {
  // A caller built against an older quota_options that ended after busy_timeout_ms, placed
  // right before bytes that it owns.
  constexpr std::size_t older = offsetof(quota_options, busy_timeout_ms) + sizeof(int64_t);
  static_assert(older < sizeof(quota_options));
  alignas(quota_options) unsigned char memory[sizeof(quota_options)];
  std::memset(memory, 0xAB, sizeof memory);
  auto* options = reinterpret_cast<quota_options*>(memory);
  quota_options_init_sized(options, older);
  CHECK(options->size == older);
  CHECK(options->create == 1);
  CHECK(options->busy_timeout_ms == 5000);
  for (std::size_t i = older; i < sizeof memory; ++i) {
    CAPTURE(i);
    REQUIRE(memory[i] == 0xAB);
  }
  // quota_open reads only those bytes, and the defaults for the fields the caller lacks.
  quota_engine* engine = nullptr;
  REQUIRE(quota_open(":memory:", 8, options, &engine) == QUOTA_OK);
  CHECK(quota_define(engine, "send", 4, QUOTA_SLIDING_LOG, 1, 1000, QUOTA_NO_BURST) == QUOTA_OK);
  quota_close(engine);

  // The macro passes the size this caller was compiled with.
  quota_options current;
  quota_options_init(&current);
  CHECK(current.size == sizeof(quota_options));
  // Too small to hold even the size: nothing is written.
  std::memset(memory, 0xAB, sizeof memory);
  quota_options_init_sized(options, sizeof(options->size) - 1);
  CHECK(memory[0] == 0xAB);
}
