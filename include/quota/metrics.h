// Engine::metrics(): counters since the Engine opened, for dashboards and alerts
// (docs/operating.md). quota/prometheus.h registers them with a prometheus-cpp registry.
//
//   const quota::Metrics m = engine.metrics();
//   std::uint64_t admitted = m.decisions["send"]["consume"]["ok"];
//   std::uint64_t denied = m.decisions["send"]["consume"]["rate_limited"];
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace quota {

// How long operations took: counts[i] operations took at most bounds[i] seconds (and more
// than bounds[i - 1]); counts.back() those that took longer than the last bound. The bounds
// run from 50 us up to Options::busy_timeout (the last bound), so that an operation that
// waited out the busy timeout stands apart from one that merely waited.
struct DurationHistogram {
  std::vector<double> bounds;         // seconds, increasing
  std::vector<std::uint64_t> counts;  // bounds.size() + 1 entries
  std::uint64_t count = 0;            // every operation measured
  double sum_seconds = 0.0;           // their durations added up
};

// Engine::leases_held(): a concurrency limit's unexpired leases, and the units they hold.
struct LeasesHeld {
  std::uint64_t leases = 0;
  std::uint64_t units = 0;
};

struct Metrics {
  // Decisions by limit name, then operation, then reason. The operations:
  //   "consume"  consume, consume_many, consume_all (its deciding limit), a consume on a
  //              concurrency limit
  //   "check"    check, check_many: asks, admits nothing
  //   "record"   record, record_many
  //   "acquire"  acquire_lease
  //   "renew"    renew_lease ("ok" or "lease_expired"; an unknown or expired lease names no
  //              limit: its limit is "")
  //   "wait"     acquire, acquire_all: a consume that waits for its turn, counted once, by
  //              its final answer
  // The reasons are the answer's own (to_string(Reason)): "ok", "rate_limited",
  // "cost_exceeds_capacity", "owner_denied", "hook_denied", "blocked", "lease_expired",
  // "store_unavailable" (a fail-open answer), plus "shadow_denied" (a shadow-mode limit's
  // would-be denial, allowed). A replayed answer (idempotency key) is counted again under its
  // reason. Only what happened is present.
  std::map<std::string,
           std::map<std::string, std::map<std::string, std::uint64_t, std::less<>>, std::less<>>,
           std::less<>>
      decisions;
  // Answers that FailurePolicy::fail_open gave instead of an error (reason store_unavailable).
  std::uint64_t fail_open = 0;
  // Errors thrown by the operations above, by ErrorCode name ("busy", "io", ...).
  std::map<std::string, std::uint64_t, std::less<>> errors;
  // How long each operation took (the names of `decisions`), from the call to the answer
  // (waiting for the lock and for a group commit included; "wait" includes its sleeps).
  // Errors are measured too. Only operations that ran are present.
  std::map<std::string, DurationHistogram, std::less<>> operation_duration;
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
