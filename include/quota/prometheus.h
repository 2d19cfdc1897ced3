// quota::prometheus: Engine::metrics() for Prometheus, through prometheus-cpp (Debian's
// prometheus-cpp-dev). An optional component: the CMake target quota::prometheus, built when
// prometheus-cpp is found (QUOTA_PROMETHEUS: AUTO, ON or OFF); of quota's own build
// (add_subdirectory), or installed: find_package(quota REQUIRED COMPONENTS prometheus). It
// links prometheus-cpp's core and pull, so that the lines below link as they are
// (docs/embedding.md has the whole program):
//
//   #include <prometheus/exposer.h>
//   const auto collector = quota::prometheus::collector(engine);  // keep it alive
//   prometheus::Exposer exposer{"127.0.0.1:9464"};                // the exporter port
//   exposer.RegisterCollectable(collector);                        // scraped at /metrics
//
// Or serialize it yourself, as examples/gateway does on its own HTTP server:
//   prometheus::TextSerializer().Serialize(out, collector->Collect());
//
// The families, read from engine.metrics() (and the gauges from engine.leases_held()) at each
// scrape:
//   quota_decisions_total{limit,operation,reason}
//                                           counter: operation consume, check, record,
//                                           acquire, renew or wait (quota/metrics.h); reason
//                                           the answer's own ("ok", "rate_limited", ...),
//                                           "shadow_denied" or "store_unavailable"
//   quota_fail_open_total                   counter: answers of FailurePolicy::fail_open
//   quota_errors_total{code}                counter: errors by quota::ErrorCode name
//   quota_operation_duration_seconds{operation}
//                                           histogram: bounds up to Options::busy_timeout
//   quota_leases_held{limit}, quota_lease_units_held{limit}
//                                           gauge: every concurrency limit's unexpired leases
//                                           (left out of a scrape the database fails)
//   quota_group_commits_total, quota_group_commit_requests_total
//   quota_gc_deleted_rows_total, quota_expiry_runs_total, quota_expiry_failures_total
#pragma once

#include <memory>
#include <prometheus/collectable.h>

#include "quota/engine.h"

namespace quota::prometheus {

// A prometheus-cpp Collectable over `engine`, which must outlive it (or the registration:
// Exposer holds a weak pointer, so destroy the Engine only after the shared pointer).
std::shared_ptr<::prometheus::Collectable> collector(const Engine& engine);

}  // namespace quota::prometheus
