// quota::prometheus (include/quota/prometheus.h): Engine::metrics() as prometheus-cpp's
// MetricFamily values, which prometheus-cpp serializes; no exposition text is written here.
#include "quota/prometheus.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace quota::prometheus {
namespace {

using ::prometheus::ClientMetric;
using ::prometheus::MetricFamily;
using ::prometheus::MetricType;

ClientMetric counter(double value, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  return metric;
}

MetricFamily family(std::string name, std::string help, MetricType type,
                    std::vector<ClientMetric> metrics) {
  return {std::move(name), std::move(help), type, std::move(metrics)};
}

class Collector final : public ::prometheus::Collectable {
 public:
  explicit Collector(const Engine& engine) : engine_(engine) {}

  std::vector<MetricFamily> Collect() const override {
    const Metrics metrics = engine_.metrics();
    std::vector<ClientMetric> decisions;
    for (const auto& [limit, outcomes] : metrics.decisions) {
      for (const auto& [reason, count] : outcomes) {
        decisions.push_back(
            counter(static_cast<double>(count), {{"limit", limit}, {"reason", reason}}));
      }
    }
    std::vector<ClientMetric> errors;
    for (const auto& [code, count] : metrics.errors) {
      errors.push_back(counter(static_cast<double>(count), {{"code", code}}));
    }
    ClientMetric duration;
    const DurationHistogram& histogram = metrics.operation_duration;
    duration.histogram.sample_count = histogram.count;
    duration.histogram.sample_sum = histogram.sum_seconds;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < DurationHistogram::kBounds.size(); ++i) {
      cumulative += histogram.counts[i];
      duration.histogram.bucket.push_back({cumulative, DurationHistogram::kBounds[i]});
    }
    duration.histogram.bucket.push_back(
        {histogram.count, std::numeric_limits<double>::infinity()});
    const auto total = [](std::uint64_t value) { return std::vector{counter(static_cast<double>(value))}; };
    return {
        family("quota_decisions_total",
               "Answers of consume, check and record, by limit and reason", MetricType::Counter,
               std::move(decisions)),
        family("quota_fail_open_total", "Answers given by the fail-open policy, undecided",
               MetricType::Counter, total(metrics.fail_open)),
        family("quota_errors_total", "Errors of consume, check and record, by code",
               MetricType::Counter, std::move(errors)),
        family("quota_operation_duration_seconds", "How long consume, check and record took",
               MetricType::Histogram, {duration}),
        family("quota_group_commits_total", "Transactions that decided several requests",
               MetricType::Counter, total(metrics.group_commits)),
        family("quota_group_commit_requests_total", "Requests decided by group commits",
               MetricType::Counter, total(metrics.group_commit_requests)),
        family("quota_gc_deleted_rows_total", "Rows of expired state deleted by gc and expiry",
               MetricType::Counter, total(metrics.gc_deleted)),
        family("quota_expiry_runs_total", "Passes of the background expiry",
               MetricType::Counter, total(metrics.expiry_runs)),
        family("quota_expiry_failures_total", "Passes of the background expiry that failed",
               MetricType::Counter, total(metrics.expiry_failures)),
    };
  }

 private:
  const Engine& engine_;
};

}  // namespace

std::shared_ptr<::prometheus::Collectable> collector(const Engine& engine) {
  return std::make_shared<Collector>(engine);
}

}  // namespace quota::prometheus
