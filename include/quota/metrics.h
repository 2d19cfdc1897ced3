// Engine::metrics(): counters since the Engine opened, for dashboards and alerts
// (docs/operating.md). quota/prometheus.h registers them with a prometheus-cpp registry.
//
//   const quota::Metrics m = engine.metrics();
//   std::uint64_t denied = m.decisions["send"]["rate_limited"];
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace quota {

// How long operations took: counts[i] operations took at most kBounds[i] seconds (and more
// than kBounds[i - 1]); counts.back() those that took longer than the last bound.
struct DurationHistogram {
  static constexpr std::array<double, 12> kBounds{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                  0.005,   0.01,   0.025,   0.05,   0.1,   1.0};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};
  std::uint64_t count = 0;   // every operation measured
  double sum_seconds = 0.0;  // their durations added up
};

struct Metrics {
  // consume, check and record (alone, in batches, and consume_all's deciding limit) by limit
  // name, then by outcome: "allowed", a denial's reason ("rate_limited",
  // "cost_exceeds_capacity", "owner_denied", "hook_denied", "blocked"), "shadow_denied" (a
  // shadow-mode limit's would-be denial, allowed) or "store_unavailable" (a fail-open
  // answer). Only outcomes that happened are present.
  std::map<std::string, std::map<std::string, std::uint64_t, std::less<>>, std::less<>> decisions;
  // Answers that FailurePolicy::fail_open gave instead of an error (reason store_unavailable).
  std::uint64_t fail_open = 0;
  // Errors thrown by consume, check and record, by ErrorCode name ("busy", "io", ...).
  std::map<std::string, std::uint64_t, std::less<>> errors;
  // How long consume, check and record took, from the call to the answer (waiting for the
  // lock and for a group commit included).
  DurationHistogram operation_duration;
  // Group commit (Options::group_commit): the transactions that decided several requests at
  // once, and the requests they decided.
  std::uint64_t group_commits = 0;
  std::uint64_t group_commit_requests = 0;
  // Rows deleted by gc: Engine::gc and the background expiry (Options::expire_interval).
  std::uint64_t gc_deleted = 0;
  // The background expiry's passes that ended, and those that failed (the database busy or
  // unreachable; the next pass tries again).
  std::uint64_t expiry_runs = 0;
  std::uint64_t expiry_failures = 0;
};

}  // namespace quota
