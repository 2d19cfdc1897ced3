#include "support/expiry_pass.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace quota::test {

void await_expiry_pass(const Engine& engine) {
  const std::uint64_t before = engine.metrics().expiry_runs;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (engine.metrics().expiry_runs < before + 2) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace quota::test
