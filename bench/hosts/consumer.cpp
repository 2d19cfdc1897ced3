// quota-hosts-consumer: one host's consumers for bench/scripts/multi-host.sh. Each of --threads
// threads opens its own Engine on --db and consumes --limit for --owner as fast as it is
// answered, until the limit has refused --stop-after-denials requests in a row on that thread
// (the limit is full) or --requests requests were made. Prints one JSON object: what was
// allowed, denied and failed, and the latency of the answered requests (p50, p99, in ms).
//
// --lease: the limit is a concurrency limit, and each request is an acquire_lease. Without
// --hold-ms a lease taken is kept (the limit fills as a rate limit does); with it, the thread
// holds each lease for that long, then releases it and asks again, and the JSON also lists
// each lease's holding interval on CLOCK_MONOTONIC (which every process of the machine shares,
// whatever its skewed wall clock), from just after the acquire was answered to just before the
// release was sent: inside the time the lease was really held, so that no more than the
// maximum of them may overlap.
//
//   quota-hosts-consumer --db LOCATION --limit NAME --owner OWNER [--threads N]
//                        [--requests N] [--stop-after-denials N] [--server-clock] [--host NAME]
//                        [--lease [--hold-ms MS]]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "quota/engine.h"
#include "quota/error.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Arguments {
  std::string db, limit, owner, host = "host";
  int threads = 2;
  std::int64_t requests = 100'000;
  int stop_after_denials = 20;
  bool server_clock = false;
  bool lease = false;
  std::int64_t hold_ms = 0;  // 0: keep every lease taken
};

// CLOCK_MONOTONIC in microseconds: the same clock in every process of the machine.
std::int64_t monotonic_us() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1'000'000 + now.tv_nsec / 1'000;
}

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "quota-hosts-consumer: " << problem
            << "\nusage: quota-hosts-consumer --db LOCATION --limit NAME --owner OWNER "
               "[--threads N] [--requests N] [--stop-after-denials N] [--server-clock] "
               "[--host NAME] [--lease [--hold-ms MS]]\n";
  std::exit(2);
}

std::int64_t positive(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || value < 1) usage(option + " takes a whole number ≥ 1, not '" +
                                              quota::bounded(text) + "'");
  return value;
}

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(option + " takes a value");
      return argv[++i];
    };
    if (option == "--db") {
      arguments.db = value();
    } else if (option == "--limit") {
      arguments.limit = value();
    } else if (option == "--owner") {
      arguments.owner = value();
    } else if (option == "--host") {
      arguments.host = value();
    } else if (option == "--threads") {
      arguments.threads = static_cast<int>(std::min<std::int64_t>(positive(option, value()), 64));
    } else if (option == "--requests") {
      arguments.requests = positive(option, value());
    } else if (option == "--stop-after-denials") {
      arguments.stop_after_denials =
          static_cast<int>(std::min<std::int64_t>(positive(option, value()), 1'000'000));
    } else if (option == "--server-clock") {
      arguments.server_clock = true;
    } else if (option == "--lease") {
      arguments.lease = true;
    } else if (option == "--hold-ms") {
      arguments.hold_ms = positive(option, value());
    } else {
      usage("unknown option '" + quota::bounded(option) + "'");
    }
  }
  if (arguments.db.empty() || arguments.limit.empty() || arguments.owner.empty()) {
    usage("--db, --limit and --owner are required");
  }
  if (arguments.hold_ms > 0 && !arguments.lease) usage("--hold-ms goes with --lease");
  return arguments;
}

double percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse(argc, argv);
  std::atomic<std::int64_t> allowed{0}, denied{0}, failed{0};
  std::mutex latencies_mutex;
  std::vector<double> latencies;
  std::vector<std::pair<std::int64_t, std::int64_t>> intervals;  // held leases, monotonic µs
  std::string first_error;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < arguments.threads; ++t) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      try {
        quota::Options options;
        options.migrate = false;
        options.server_clock = arguments.server_clock;
        quota::Engine engine = quota::Engine::open(arguments.db, options);
        int denials_in_a_row = 0;
        for (std::int64_t i = 0; i < arguments.requests / arguments.threads; ++i) {
          const Clock::time_point before = Clock::now();
          try {
            quota::LeaseResult result;
            if (arguments.lease) {
              result = engine.acquire_lease(arguments.limit, arguments.owner);
            } else {
              static_cast<quota::Result&>(result) = engine.consume(arguments.limit, arguments.owner);
            }
            mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - before)
                               .count());
            if (result.allowed) {
              ++allowed;
              denials_in_a_row = 0;
              if (arguments.hold_ms > 0) {
                const std::int64_t from = monotonic_us();
                std::this_thread::sleep_for(std::chrono::milliseconds(arguments.hold_ms));
                const std::int64_t to = monotonic_us();
                engine.release_lease(result.lease);
                const std::lock_guard lock(latencies_mutex);
                intervals.emplace_back(from, to);
              }
            } else {
              ++denied;
              if (arguments.hold_ms > 0) {
                // Others hold the leases: ask again soon, until --requests were made.
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              } else if (++denials_in_a_row >= arguments.stop_after_denials) {
                break;
              }
            }
          } catch (const quota::Error& error) {
            ++failed;
            const std::lock_guard lock(latencies_mutex);
            if (first_error.empty()) first_error = error.what();
          }
        }
      } catch (const quota::Error& error) {
        ++failed;
        const std::lock_guard lock(latencies_mutex);
        if (first_error.empty()) first_error = error.what();
      }
      const std::lock_guard lock(latencies_mutex);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  std::string escaped;
  for (const char c : first_error) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  std::cout << "{\"host\":\"" << arguments.host << "\",\"limit\":\"" << arguments.limit
            << "\",\"allowed\":" << allowed << ",\"denied\":" << denied
            << ",\"failed\":" << failed << ",\"seconds\":" << seconds
            << ",\"answered_per_second\":"
            << (seconds > 0 ? static_cast<double>(latencies.size()) / seconds : 0.0)
            << ",\"p50_ms\":" << percentile(latencies, 0.50)
            << ",\"p99_ms\":" << percentile(latencies, 0.99) << ",\"intervals\":[";
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    std::cout << (i ? "," : "") << '[' << intervals[i].first << ',' << intervals[i].second << ']';
  }
  std::cout << "],\"first_error\":\"" << escaped << "\"}\n";
  return failed > 0 ? 1 : 0;
}
