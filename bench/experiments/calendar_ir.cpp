// What a fixed_window consume costs with and without a calendar period, in instructions
// (docs/performance-notes.md, 2026-11-26). Not part of the build: compile it by hand against a
// Release build and run it under valgrind's callgrind, with 3,000 and 6,000 consumes:
//
//   ./calendar_ir N                     a fixed_window limit of 31 days
//   ./calendar_ir N calendar [STEP_MS]  a calendar month at +09:00, anchored on the 30th
//
// N consumes on 1,000 owners of an in-memory database, one millisecond apart (or STEP_MS:
// 2678400000 makes every consume begin a window), with group commit off; (instructions of
// 6,000 - of 3,000) / 3,000 is the cost of one consume.
#include <quota/engine.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int n = std::atoi(argv[1]);
  const bool calendar = argc > 2;
  const std::int64_t step = argc > 3 ? std::atoll(argv[3]) : 1;
  quota::Options options;
  options.group_commit = false;
  std::int64_t now = 1'764'547'200'000;  // 2025-12-01T00:00:00Z
  options.clock = [&] { return now; };
  quota::Engine engine = quota::Engine::open(":memory:", options);
  if (calendar) {
    engine.define(quota::calendar_limit("w", 1'000'000, quota::Calendar::month,
                                        std::chrono::minutes(9 * 60), now + 30LL * 86'400'000));
  } else {
    engine.define({"w", quota::Algorithm::fixed_window, 1'000'000, std::chrono::hours(24 * 31),
                   std::nullopt});
  }
  for (int i = 0; i < n; ++i) {
    now += step;
    engine.consume("w", "owner" + std::to_string(i % 1000));
  }
  return 0;
}
