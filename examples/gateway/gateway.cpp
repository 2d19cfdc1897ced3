// An HTTP gateway that rate-limits every request per client address and per API key, and
// bounds the requests each API key has in flight at once.
//
//   gateway --db PATH [--host 127.0.0.1] [--port 0] [--per-ip N] [--per-key N] [--window S]
//           [--inflight N] [--inflight-ttl S]
//
// Each client address may make --per-ip requests (default 10) and each API key (the
// X-API-Key header; requests without one are limited per address only) --per-key requests
// (default 5) in any --window seconds (default 60), exactly: both limits are sliding logs.
// Both limits are decided at once (Engine::consume_all with an owner per limit): a request
// within both is served and uses its route's cost on each; one over either is answered 429
// Too Many Requests with Retry-After and uses nothing, so a client whose key is exhausted does
// not also eat into its address's allowance. The routes: GET / answers a small JSON document
// (cost 1); GET /work?ms=N works for N ms (0 to 10000) before it answers (cost 2).
//
// In flight: each request holds a lease of the concurrency limit "inflight" (at most
// --inflight, default 4, at once per API key, or per address without one) from before its
// rate limits are charged until its handler has built the response, however the handler
// ends (quota::Lease releases in its destructor); a lease whose gateway died is freed after
// --inflight-ttl seconds (default 30; longer than the slowest request). A request over the
// bound is answered 429 with Retry-After (the wait until a held lease expires: an upper bound,
// as a slot frees as soon as a request ends) and is charged nothing.
//
// Retries: a request with an Idempotency-Key header (1 to 255 bytes) is charged with that key
// (consume_all with an idempotency key), so a client that retries a request whose answer it
// never got is not charged twice: the retry is decided as the first request was, served again
// when that was allowed, and answered with "Idempotent-Replayed: true". The same key on a
// request of another cost (another route) or another set of limits is answered 422 with the
// engine's message, a key that is empty or longer than 255 bytes 400; neither charges
// anything. A refusal is kept under its key as an allowance is: retry it with a new key.
//
// The keys themselves are never stored: each key's owner is "key:" and the first 16 hex
// digits of its SHA-256 (sha256.h), so quota_usage, `quotactl usage` and the file show
// digests, not secrets. An operator finds a key's row with the same digest, e.g.
// `printf %s "$KEY" | sha256sum | cut -c1-16`. Every answer carries the header
// fields of the IETF HTTP API working group's draft "RateLimit header fields for HTTP"
// (draft-ietf-httpapi-ratelimit-headers, the structured-field syntax of revisions 08 and
// later, checked against -10):
//
//   RateLimit-Policy: "per-ip";q=10;w=60, "per-key";q=5;w=60,
//                     "inflight";q=4;qu="concurrent-requests"
//   RateLimit: "per-ip";r=9;t=60, "per-key";r=4;t=60, "inflight";r=3
//
// q is the quota and w the window in seconds (qu the quota unit: the in-flight bound counts
// requests at once, not per window); r the units remaining and t the seconds until the quota
// is fully restored (quota's reset_at_ms, rounded up). A request refused by the in-flight
// bound carries its item alone (the rate limits were not consulted). Retry-After is quota's
// exact retry_after_ms rounded up to whole seconds. --port 0 picks a free port; the gateway
// prints "listening on http://HOST:PORT" once it accepts connections, and stops cleanly on
// SIGINT or SIGTERM. A client that sends its request slowly holds one of 64 threads for at
// most 2 s per read (main: read timeouts), so a few slow clients stall nobody. GET /metrics
// (never limited) serves the engine's counters in Prometheus's text format
// (Engine::metrics() through quota::prometheus and prometheus-cpp's serializer; built when
// prometheus-cpp-dev is installed), decisions per limit, operation and reason. The
// per-address state of clients that stop coming is deleted in the background
// (Options::expire_interval, every minute by default), so a stream of new addresses keeps
// the file bounded without a cron job. The state lives in the --db file, so a restart (or
// several gateways on one file) keeps counting. So do the limits: --per-ip, --per-key,
// --window, --inflight and --inflight-ttl define them in a new file (Engine::ensure); once
// they exist the file's numbers win, so that what an operator set with
// `quotactl limit set per-ip --max N --per 1m` is not undone by a restart.
#include <httplib.h>
#include <quota/engine.h>
#if QUOTA_GATEWAY_METRICS
#include <prometheus/text_serializer.h>
#include <quota/prometheus.h>
#endif
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sha256.h"

namespace {

struct Settings {
  std::string db;
  std::string host = "127.0.0.1";
  int port = 0;
  std::int64_t per_ip = 10;
  std::int64_t per_key = 5;
  std::int64_t window_seconds = 60;
  std::int64_t inflight = 4;
  std::int64_t inflight_ttl_seconds = 30;
};

constexpr const char* kPerIp = "per-ip";
constexpr const char* kPerKey = "per-key";
constexpr const char* kInflight = "inflight";
constexpr std::int64_t kMaxWorkMs = 10'000;
// The server's threads: connections served at once, slow ones included.
constexpr std::size_t kServerThreads = 64;

std::int64_t seconds_rounded_up(std::int64_t ms) { return ms <= 0 ? 0 : (ms + 999) / 1000; }

// One limit's answer for this request, as the draft's fields describe it.
struct Verdict {
  std::string policy;         // the limit's name, which is also the policy's name in the fields
  const quota::Limit* limit;  // as the file held it at start-up
  quota::Result result;
  bool deciding;  // the limit whose answer is the request's
};

class Gateway {
 public:
  explicit Gateway(const Settings& settings)
      : engine_(quota::Engine::open(settings.db)),
        per_ip_(engine_.ensure({kPerIp, quota::Algorithm::sliding_log, settings.per_ip,
                                std::chrono::seconds(settings.window_seconds), std::nullopt})),
        per_key_(engine_.ensure({kPerKey, quota::Algorithm::sliding_log, settings.per_key,
                                 std::chrono::seconds(settings.window_seconds), std::nullopt})),
        inflight_(
            engine_.ensure({kInflight, quota::Algorithm::concurrency, settings.inflight,
                            std::chrono::seconds(settings.inflight_ttl_seconds), std::nullopt})) {}

  // Admits the request or answers it. First its in-flight slot: a lease of `inflight` for its
  // key (its address without one), kept in `lease` until the caller is done with the request.
  // Then its rate limits: charges `cost` to its address and, with a key, to the key's digest,
  // in one atomic decision (with its Idempotency-Key, if any): allowed only if both limits
  // allow; if one denies, neither is charged and only the denying limit counts the denial.
  // consume_all answers for the deciding limit; the other's figures for the header fields come
  // from a check just after (informational: a concurrent request may move them by a unit).
  // Returns whether the request may be served; if not, `response` is the answer. Throws
  // quota::Error: a bad Idempotency-Key (invalid_argument), one used for another request
  // (idempotency_conflict), the database's failures.
  bool admit(const httplib::Request& request, std::int64_t cost, quota::Lease& lease,
             httplib::Response& response) {
    const bool keyed = request.has_header("Idempotency-Key");
    const std::string idempotency_key = request.get_header_value("Idempotency-Key");
    if (keyed) quota::validate_idempotency_key(idempotency_key);  // before anything is taken

    const std::string key = request.get_header_value("X-API-Key");
    const std::string key_owner = key.empty() ? std::string() : gateway::key_owner(key);
    lease = quota::Lease(engine_, kInflight, key.empty() ? request.remote_addr : key_owner);
    const Verdict slot{kInflight, &inflight_, lease.result(), !lease.result().allowed};
    if (!lease.result().allowed) return answer({slot}, response);

    std::vector<quota::Charge> charges{{kPerIp, request.remote_addr}};
    std::vector<const quota::Limit*> limits{&per_ip_};
    if (!key.empty()) {
      charges.push_back({kPerKey, key_owner});
      limits.push_back(&per_key_);
    }
    const quota::Decision decision = keyed ? engine_.consume_all(charges, cost, idempotency_key)
                                           : engine_.consume_all(charges, cost);
    std::vector<Verdict> verdicts;
    for (std::size_t i = 0; i < charges.size(); ++i) {
      const std::string policy(charges[i].limit);
      const bool deciding = policy == decision.limit;
      verdicts.push_back(
          {policy, limits[i],
           deciding ? decision.result : engine_.check(charges[i].limit, charges[i].owner, cost),
           deciding});
    }
    verdicts.push_back(slot);
    if (decision.result.replayed) response.set_header("Idempotent-Replayed", "true");
    return answer(verdicts, response);
  }

#if QUOTA_GATEWAY_METRICS
  // The engine's counters in Prometheus's text format, as prometheus-cpp writes them.
  std::string metrics_text() const {
    return prometheus::TextSerializer().Serialize(collector_->Collect());
  }
#endif

 private:
  // RateLimit-Policy, RateLimit and, when refused, Retry-After. Returns whether allowed.
  static bool answer(const std::vector<Verdict>& verdicts, httplib::Response& response) {
    const std::int64_t now = quota::system_clock_ms();
    std::string policies;
    std::string limits;
    const Verdict* refusal = nullptr;
    for (const Verdict& verdict : verdicts) {
      if (!policies.empty()) {
        policies += ", ";
        limits += ", ";
      }
      policies += "\"" + verdict.policy + "\";q=" + std::to_string(verdict.limit->maximum);
      limits += "\"" + verdict.policy + "\";r=" + std::to_string(verdict.result.remaining);
      if (verdict.limit->algorithm == quota::Algorithm::concurrency) {
        policies += ";qu=\"concurrent-requests\"";
      } else {
        policies += ";w=" + std::to_string(seconds_rounded_up(verdict.limit->period.count()));
        limits += ";t=" + std::to_string(seconds_rounded_up(verdict.result.reset_at_ms - now));
      }
      if (verdict.deciding && !verdict.result.allowed) refusal = &verdict;
    }
    response.set_header("RateLimit-Policy", policies);
    response.set_header("RateLimit", limits);
    if (refusal == nullptr) return true;

    response.status = 429;
    const std::int64_t retry_after_ms = refusal->result.retry_after_ms;
    if (retry_after_ms >= 0) {  // -1: the request can never succeed; no time would help
      response.set_header("Retry-After", std::to_string(seconds_rounded_up(retry_after_ms)));
    }
    response.set_content("{\"error\":\"too_many_requests\",\"policy\":\"" + refusal->policy +
                             "\",\"retry_after_ms\":" + std::to_string(retry_after_ms) + "}\n",
                         "application/json");
    return false;
  }

  quota::Engine engine_;
#if QUOTA_GATEWAY_METRICS
  std::shared_ptr<prometheus::Collectable> collector_ = quota::prometheus::collector(engine_);
#endif
  const quota::Limit per_ip_;
  const quota::Limit per_key_;
  const quota::Limit inflight_;
};

// A route's handler that runs only for an admitted request, charged `cost` units. The request's
// in-flight lease is released when the handler returns or throws, after admission refused it
// and on every error path alike.
httplib::Server::Handler limited(
    Gateway& gateway, std::int64_t cost,
    std::function<void(const httplib::Request&, httplib::Response&)> serve) {
  return [&gateway, cost, serve = std::move(serve)](const httplib::Request& request,
                                                    httplib::Response& response) {
    quota::Lease lease;
    try {
      if (!gateway.admit(request, cost, lease, response)) return;
    } catch (const quota::Error& error) {
      // Keys are digested, so no header makes a bad owner: invalid_argument is a bad
      // Idempotency-Key; a key used for another request is 422; a database error is ours.
      switch (error.code()) {
        case quota::ErrorCode::invalid_argument:
          response.status = 400;
          break;
        case quota::ErrorCode::idempotency_conflict:
          response.status = 422;
          break;
        default:
          response.status = 503;
      }
      response.set_content(std::string(error.what()) + "\n", "text/plain");
      return;
    }
    serve(request, response);
  };
}

// GET /work's ?ms=N: 0 to kMaxWorkMs digits, or nullopt.
std::optional<std::int64_t> work_ms(const httplib::Request& request) {
  const std::string text = request.get_param_value("ms");
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const std::int64_t ms = std::stoll(text);
  return ms <= kMaxWorkMs ? std::optional(ms) : std::nullopt;
}

std::optional<Settings> parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--db") {
      settings.db = value;
    } else if (flag == "--host") {
      settings.host = value;
    } else if (flag == "--port") {
      settings.port = std::atoi(value);
    } else if (flag == "--per-ip") {
      settings.per_ip = std::atoll(value);
    } else if (flag == "--per-key") {
      settings.per_key = std::atoll(value);
    } else if (flag == "--window") {
      settings.window_seconds = std::atoll(value);
    } else if (flag == "--inflight") {
      settings.inflight = std::atoll(value);
    } else if (flag == "--inflight-ttl") {
      settings.inflight_ttl_seconds = std::atoll(value);
    } else {
      return std::nullopt;
    }
  }
  if (argc % 2 == 0 || settings.db.empty() || settings.window_seconds <= 0 ||
      settings.inflight_ttl_seconds <= 0) {
    return std::nullopt;
  }
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Settings> settings = parse(argc, argv);
  if (!settings) {
    std::cerr << "usage: gateway --db PATH [--host 127.0.0.1] [--port 0] [--per-ip N] "
                 "[--per-key N] [--window SECONDS] [--inflight N] [--inflight-ttl SECONDS]\n";
    return 2;
  }
  // SIGINT and SIGTERM are taken by one thread with sigwait, which stops the server: the
  // server's threads inherit the blocked mask, so no signal handler ever runs.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    Gateway gateway(*settings);
    httplib::Server server;
    // Slow clients: each connection holds one of the server's threads while its request is
    // read. cpp-httplib's defaults (8 threads, 5 s allowed for each read, 5 s between
    // keep-alive requests) let 8 clients that send their headers a byte at a time stall
    // every other request. Here a read (or write) that waits 2 s closes the connection, so
    // does an idle keep-alive connection after 2 s, and 64 threads serve. A public gateway
    // goes behind a reverse proxy that buffers whole requests (nginx does by default).
    server.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
    server.set_read_timeout(std::chrono::seconds(2));
    server.set_write_timeout(std::chrono::seconds(2));
    server.set_keep_alive_timeout(2);
    server.Get(
        "/", limited(gateway, 1, [](const httplib::Request& request, httplib::Response& response) {
          response.set_content("{\"hello\":\"" + request.remote_addr + "\"}\n", "application/json");
        }));
    server.Get(
        "/work",
        limited(gateway, 2, [](const httplib::Request& request, httplib::Response& response) {
          // Charged and holding its slot already: a bad ?ms= is the request's own error.
          const std::optional<std::int64_t> ms = work_ms(request);
          if (!ms) {
            response.status = 400;
            response.set_content("?ms= must be a number of milliseconds from 0 to " +
                                     std::to_string(kMaxWorkMs) + "\n",
                                 "text/plain");
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(*ms));
          response.set_content("{\"worked_ms\":" + std::to_string(*ms) + "}\n", "application/json");
        }));

#if QUOTA_GATEWAY_METRICS
    server.Get("/metrics", [&](const httplib::Request&, httplib::Response& response) {
      response.set_content(gateway.metrics_text(), "text/plain; version=0.0.4");
    });
#endif

    const int port =
        settings->port == 0
            ? server.bind_to_any_port(settings->host)
            : (server.bind_to_port(settings->host, settings->port) ? settings->port : -1);
    if (port < 0) {
      std::cerr << "gateway: cannot listen on " << settings->host << ":" << settings->port << "\n";
      return 1;
    }
    std::atomic<bool> signalled{false};
    std::thread stopper([&] {
      int signal = 0;
      sigwait(&stop_signals, &signal);
      signalled = true;
      server.stop();
    });
    std::cout << "listening on http://" << settings->host << ":" << port << std::endl;
    server.listen_after_bind();
    if (!signalled) kill(getpid(), SIGTERM);  // the server ended on its own: wake the stopper
    stopper.join();
    std::cout << "stopped" << std::endl;
  } catch (const std::exception& error) {
    std::cerr << "gateway: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
