// An HTTP gateway that rate-limits every request per client address and per API key.
//
//   gateway --db PATH [--host 127.0.0.1] [--port 0] [--per-ip N] [--per-key N] [--window S]
//
// Each client address may make --per-ip requests (default 10) and each API key (the
// X-API-Key header; requests without one are limited per address only) --per-key requests
// (default 5) in any --window seconds (default 60), exactly: both limits are sliding logs.
// Both limits are decided at once (Engine::consume_all with an owner per limit): a request
// within both is served (GET / answers a small JSON document) and uses a unit of each; one
// over either is answered 429 Too Many Requests with Retry-After and uses nothing, so a
// client whose key is exhausted does not also eat into its address's allowance.
//
// The keys themselves are never stored: each key's owner is "key:" and the first 16 hex
// digits of its SHA-256 (sha256.h), so quota_usage, `quotactl usage` and the file show
// digests, not secrets. An operator finds a key's row with the same digest, e.g.
// `printf %s "$KEY" | sha256sum | cut -c1-16`. Every answer carries the header
// fields of the IETF HTTP API working group's draft "RateLimit header fields for HTTP"
// (draft-ietf-httpapi-ratelimit-headers, the structured-field syntax of revisions 08 and
// later, checked against -10):
//
//   RateLimit-Policy: "per-ip";q=10;w=60, "per-key";q=5;w=60
//   RateLimit: "per-ip";r=9;t=60, "per-key";r=4;t=60
//
// q is the quota and w the window in seconds; r the units remaining and t the seconds until
// the quota is fully restored (quota's reset_at_ms, rounded up). Retry-After is quota's exact
// retry_after_ms rounded up to whole seconds. --port 0 picks a free port; the gateway prints
// "listening on http://HOST:PORT" once it accepts connections, and stops cleanly on SIGINT or
// SIGTERM. GET /metrics (never limited) serves the engine's counters in Prometheus's text
// format (Engine::metrics() through quota::prometheus and prometheus-cpp's serializer; built
// when prometheus-cpp-dev is installed). The per-address state of clients that stop coming is
// deleted in the background (Options::expire_interval, every minute by default), so a stream
// of new addresses keeps the file bounded without a cron job. The state lives in the --db file, so a restart (or several gateways on one file)
// keeps counting. So do the limits: --per-ip, --per-key and --window define them in a new
// file (Engine::ensure); once they exist the file's numbers win, so that what an operator set
// with `quotactl limit set per-ip --max N --per 1m` is not undone by a restart.
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
};

constexpr const char* kPerIp = "per-ip";
constexpr const char* kPerKey = "per-key";

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
                                 std::chrono::seconds(settings.window_seconds), std::nullopt})) {}

  // Charges the request to its address and, with a key, to the key's digest, in one atomic
  // decision: allowed only if both limits allow; if one denies, neither is charged and only
  // the denying limit counts the denial. consume_all answers for the deciding limit; the
  // other's figures for the header fields come from a check just after (informational: a
  // concurrent request may move them by a unit).
  std::vector<Verdict> admit(const std::string& address, const std::string& key) {
    std::vector<quota::Charge> charges{{kPerIp, address}};
    std::vector<const quota::Limit*> limits{&per_ip_};
    const std::string key_owner = key.empty() ? std::string() : gateway::key_owner(key);
    if (!key.empty()) {
      charges.push_back({kPerKey, key_owner});
      limits.push_back(&per_key_);
    }
    const quota::Decision decision = engine_.consume_all(charges);
    std::vector<Verdict> verdicts;
    for (std::size_t i = 0; i < charges.size(); ++i) {
      const std::string policy(charges[i].limit);
      const bool deciding = policy == decision.limit;
      verdicts.push_back(
          {policy, limits[i],
           deciding ? decision.result : engine_.check(charges[i].limit, charges[i].owner),
           deciding});
    }
    return verdicts;
  }

  // RateLimit-Policy, RateLimit and, when refused, Retry-After. Returns whether allowed.
  bool answer(const std::vector<Verdict>& verdicts, httplib::Response& response) const {
    const std::int64_t now = quota::system_clock_ms();
    std::string policies;
    std::string limits;
    const Verdict* refusal = nullptr;
    for (const Verdict& verdict : verdicts) {
      if (!policies.empty()) {
        policies += ", ";
        limits += ", ";
      }
      policies += "\"" + verdict.policy + "\";q=" + std::to_string(verdict.limit->maximum) +
                  ";w=" + std::to_string(seconds_rounded_up(verdict.limit->period.count()));
      limits += "\"" + verdict.policy + "\";r=" + std::to_string(verdict.result.remaining) +
                ";t=" + std::to_string(seconds_rounded_up(verdict.result.reset_at_ms - now));
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

#if QUOTA_GATEWAY_METRICS
  // The engine's counters in Prometheus's text format, as prometheus-cpp writes them.
  std::string metrics_text() const {
    return prometheus::TextSerializer().Serialize(collector_->Collect());
  }
#endif

 private:
  quota::Engine engine_;
#if QUOTA_GATEWAY_METRICS
  std::shared_ptr<prometheus::Collectable> collector_ = quota::prometheus::collector(engine_);
#endif
  const quota::Limit per_ip_;
  const quota::Limit per_key_;
};

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
    } else {
      return std::nullopt;
    }
  }
  if (argc % 2 == 0 || settings.db.empty() || settings.window_seconds <= 0) return std::nullopt;
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Settings> settings = parse(argc, argv);
  if (!settings) {
    std::cerr << "usage: gateway --db PATH [--host 127.0.0.1] [--port 0] [--per-ip N] "
                 "[--per-key N] [--window SECONDS]\n";
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
    server.set_pre_routing_handler(
        [&](const httplib::Request& request, httplib::Response& response) {
          if (request.path == "/metrics") return httplib::Server::HandlerResponse::Unhandled;
          try {
            const auto verdicts =
                gateway.admit(request.remote_addr, request.get_header_value("X-API-Key"));
            return gateway.answer(verdicts, response) ? httplib::Server::HandlerResponse::Unhandled
                                                      : httplib::Server::HandlerResponse::Handled;
          } catch (const quota::Error& error) {
            // Keys are digested, so no header makes a bad owner; a database error is ours.
            response.status = error.code() == quota::ErrorCode::invalid_argument ? 400 : 503;
            response.set_content(std::string(error.what()) + "\n", "text/plain");
            return httplib::Server::HandlerResponse::Handled;
          }
        });
    server.Get("/", [](const httplib::Request& request, httplib::Response& response) {
      response.set_content("{\"hello\":\"" + request.remote_addr + "\"}\n", "application/json");
    });

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
