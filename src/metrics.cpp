// Engine::metrics()'s counters (src/metrics.h, include/quota/metrics.h).
#include "metrics.h"

#include <algorithm>
#include <string>

namespace quota::detail {
namespace {

std::string_view outcome_of(const Result& result) {
  if (result.shadow_denied) return "shadow_denied";
  if (result.reason == Reason::ok) return "allowed";
  return to_string(result.reason);
}

}  // namespace

void Counters::measure(std::chrono::nanoseconds took) {
  const double seconds = std::chrono::duration<double>(took).count();
  DurationHistogram& histogram = metrics_.operation_duration;
  const auto bound = std::lower_bound(DurationHistogram::kBounds.begin(),
                                      DurationHistogram::kBounds.end(), seconds);
  ++histogram.counts[static_cast<std::size_t>(bound - DurationHistogram::kBounds.begin())];
  ++histogram.count;
  histogram.sum_seconds += seconds;
}

void Counters::decided(std::string_view limit, const Result& result,
                       std::chrono::nanoseconds took) {
  const std::string_view outcome = outcome_of(result);
  std::lock_guard lock(mutex_);
  measure(took);
  if (result.reason == Reason::store_unavailable) ++metrics_.fail_open;
  auto found = metrics_.decisions.find(limit);
  if (found == metrics_.decisions.end()) {
    found = metrics_.decisions.emplace(std::string(limit), std::map<std::string, std::uint64_t,
                                                                    std::less<>>{}).first;
  }
  auto count = found->second.find(outcome);
  if (count == found->second.end()) count = found->second.emplace(std::string(outcome), 0).first;
  ++count->second;
}

void Counters::failed(ErrorCode code, std::chrono::nanoseconds took) {
  std::lock_guard lock(mutex_);
  measure(took);
  ++metrics_.errors[std::string(to_string(code))];
}

void Counters::grouped(std::size_t requests) {
  if (requests < 2) return;
  std::lock_guard lock(mutex_);
  ++metrics_.group_commits;
  metrics_.group_commit_requests += requests;
}

void Counters::collected(std::int64_t deleted) {
  std::lock_guard lock(mutex_);
  metrics_.gc_deleted += static_cast<std::uint64_t>(deleted);
}

void Counters::expiry_ran(bool failed) {
  std::lock_guard lock(mutex_);
  ++(failed ? metrics_.expiry_failures : metrics_.expiry_runs);
}

Metrics Counters::snapshot() const {
  std::lock_guard lock(mutex_);
  return metrics_;
}

}  // namespace quota::detail
