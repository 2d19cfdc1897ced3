// Engine::metrics()'s counters (src/metrics.h, include/quota/metrics.h).
#include "metrics.h"

#include <algorithm>
#include <array>
#include <string>

namespace quota::detail {
namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(Counted::count)> kOperationNames{
    "consume", "check", "record", "acquire", "renew", "wait"};

// The conventional latency bounds (seconds); those below the busy timeout are kept.
constexpr std::array<double, 22> kLatencyBounds{
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,    0.5,    1.0,     2.5,    5.0,   10.0,   25.0,  50.0, 100.0, 250.0, 500.0};

constexpr std::size_t kShadowDenied = static_cast<std::size_t>(Reason::lease_expired) + 1;

std::size_t outcome_of(const Result& result) {
  return result.shadow_denied ? kShadowDenied : static_cast<std::size_t>(result.reason);
}

std::string_view outcome_name(std::size_t outcome) {
  return outcome == kShadowDenied ? "shadow_denied" : to_string(static_cast<Reason>(outcome));
}

}  // namespace

Counters::Counters(std::chrono::milliseconds busy_timeout) {
  const double timeout = std::chrono::duration<double>(busy_timeout).count();
  for (const double bound : kLatencyBounds) {
    if (bound < timeout) bounds_.push_back(bound);
  }
  // A busy timeout of 0 (never wait for a lock) still measures what an operation costs.
  if (timeout > 0) {
    bounds_.push_back(timeout);
  } else {
    bounds_.assign(kLatencyBounds.begin(), kLatencyBounds.begin() + 14);  // up to 1 s
  }
  for (Durations& durations : durations_) durations.counts.resize(bounds_.size() + 1);
}

void Counters::measure(Counted operation, std::chrono::nanoseconds took) {
  const double seconds = std::chrono::duration<double>(took).count();
  Durations& durations = durations_[static_cast<std::size_t>(operation)];
  const auto bound = std::lower_bound(bounds_.begin(), bounds_.end(), seconds);
  ++durations.counts[static_cast<std::size_t>(bound - bounds_.begin())];
  ++durations.count;
  durations.sum_seconds += seconds;
}

void Counters::count(Counted operation, std::string_view limit, const Result& result) {
  if (result.reason == Reason::store_unavailable) ++fail_open_;
  auto found = decisions_.find(limit);
  if (found == decisions_.end()) {
    found = decisions_.emplace(std::string(limit), ByOperation{}).first;
  }
  ++found->second[static_cast<std::size_t>(operation)][outcome_of(result)];
}

void Counters::decided(Counted operation, std::string_view limit, const Result& result,
                       std::chrono::nanoseconds took) {
  std::lock_guard lock(mutex_);
  measure(operation, took);
  count(operation, limit, result);
}

void Counters::failed(Counted operation, ErrorCode code, std::chrono::nanoseconds took) {
  const std::string_view name = to_string(code);
  std::lock_guard lock(mutex_);
  measure(operation, took);
  auto found = errors_.find(name);
  if (found == errors_.end()) found = errors_.emplace(std::string(name), 0).first;
  ++found->second;
}

void Counters::grouped(std::size_t requests) {
  if (requests < 2) return;
  std::lock_guard lock(mutex_);
  ++group_commits_;
  group_commit_requests_ += requests;
}

void Counters::collected(std::int64_t deleted) {
  std::lock_guard lock(mutex_);
  gc_deleted_ += static_cast<std::uint64_t>(deleted);
}

void Counters::expiry_ran(bool failed) {
  std::lock_guard lock(mutex_);
  ++(failed ? expiry_failures_ : expiry_runs_);
}

Metrics Counters::snapshot() const {
  Metrics metrics;
  std::lock_guard lock(mutex_);
  for (const auto& [limit, by_operation] : decisions_) {
    auto& of_limit = metrics.decisions[limit];
    for (std::size_t operation = 0; operation < kOperations; ++operation) {
      for (std::size_t outcome = 0; outcome < kOutcomes; ++outcome) {
        const std::uint64_t count = by_operation[operation][outcome];
        if (count == 0) continue;
        of_limit[std::string(kOperationNames[operation])][std::string(outcome_name(outcome))] =
            count;
      }
    }
  }
  for (std::size_t operation = 0; operation < kOperations; ++operation) {
    const Durations& durations = durations_[operation];
    if (durations.count == 0) continue;
    metrics.operation_duration[std::string(kOperationNames[operation])] =
        DurationHistogram{bounds_, durations.counts, durations.count, durations.sum_seconds};
  }
  metrics.fail_open = fail_open_;
  metrics.errors = errors_;
  metrics.group_commits = group_commits_;
  metrics.group_commit_requests = group_commit_requests_;
  metrics.gc_deleted = gc_deleted_;
  metrics.expiry_runs = expiry_runs_;
  metrics.expiry_failures = expiry_failures_;
  return metrics;
}

}  // namespace quota::detail
