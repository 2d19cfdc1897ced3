// quota::prometheus (include/quota/prometheus.h): Engine::metrics() as prometheus-cpp's
// MetricFamily values, which prometheus-cpp serializes; no exposition text is written here.
#include "quota/prometheus.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "quota/error.h"

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

ClientMetric gauge(double value, std::vector<ClientMetric::Label> labels) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

ClientMetric histogram(const DurationHistogram& durations,
                       std::vector<ClientMetric::Label> labels) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = durations.count;
  metric.histogram.sample_sum = durations.sum_seconds;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < durations.bounds.size(); ++i) {
    cumulative += durations.counts[i];
    metric.histogram.bucket.push_back({cumulative, durations.bounds[i]});
  }
  metric.histogram.bucket.push_back({durations.count, std::numeric_limits<double>::infinity()});
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
    for (const auto& [limit, operations] : metrics.decisions) {
      for (const auto& [operation, reasons] : operations) {
        for (const auto& [reason, count] : reasons) {
          decisions.push_back(counter(static_cast<double>(count), {{"limit", limit},
                                                                   {"operation", operation},
                                                                   {"reason", reason}}));
        }
      }
    }
    std::vector<ClientMetric> errors;
    for (const auto& [code, count] : metrics.errors) {
      errors.push_back(counter(static_cast<double>(count), {{"code", code}}));
    }
    std::vector<ClientMetric> durations;
    for (const auto& [operation, measured] : metrics.operation_duration) {
      durations.push_back(histogram(measured, {{"operation", operation}}));
    }
    const auto total = [](std::uint64_t value) {
      return std::vector{counter(static_cast<double>(value))};
    };
    std::vector<MetricFamily> families{
        family("quota_decisions_total", "Decisions, by limit, operation and the answer's reason",
               MetricType::Counter, std::move(decisions)),
        family("quota_fail_open_total", "Answers given by the fail-open policy, undecided",
               MetricType::Counter, total(metrics.fail_open)),
        family("quota_errors_total", "Errors of the counted operations, by code",
               MetricType::Counter, std::move(errors)),
        family("quota_operation_duration_seconds",
               "How long operations took, by operation, up to the busy timeout",
               MetricType::Histogram, std::move(durations)),
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
    // The gauges are read from the database at each scrape: every process's leases. When the
    // database cannot answer, the scrape still serves the counters, without the gauges.
    try {
      std::vector<ClientMetric> leases;
      std::vector<ClientMetric> units;
      for (const auto& [limit, held] : engine_.leases_held()) {
        leases.push_back(gauge(static_cast<double>(held.leases), {{"limit", limit}}));
        units.push_back(gauge(static_cast<double>(held.units), {{"limit", limit}}));
      }
      families.push_back(family("quota_leases_held",
                                "Unexpired leases of each concurrency limit, every process's",
                                MetricType::Gauge, std::move(leases)));
      families.push_back(family("quota_lease_units_held",
                                "Units held by the unexpired leases of each concurrency limit",
                                MetricType::Gauge, std::move(units)));
    } catch (const Error&) {
    }
    return families;
  }

 private:
  const Engine& engine_;
};

}  // namespace

std::shared_ptr<::prometheus::Collectable> collector(const Engine& engine) {
  return std::make_shared<Collector>(engine);
}

}  // namespace quota::prometheus
