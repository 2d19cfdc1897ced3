// quota-peers-redis: what a user who picks Redis instead pays per decision. One client
// (hiredis, synchronous), one connection to a Redis server over loopback TCP, a fixed-window
// limiter in Lua run with EVALSHA: the usual design (INCRBY on one key per owner, PEXPIRE at
// the window's first request, a denial counts nothing). bench/scripts/peers.sh starts the
// server and runs this between quota-bench's consumes, in interleaved rounds.
//
// The owners are quota-bench's (bench.h's Owners: "user:<n>" in the same random sequence) and
// so is the measuring loop (measure(): one steady_clock read per operation, after a warm-up);
// the limit is the general workload's, 100 per 10 s. The server's clock is real, so before
// measuring the database is emptied and every owner gets one request, as quota-bench's
// templates hold every owner; in a run of a few seconds at the speeds a loopback round trip
// allows, nearly every request is allowed, as in quota-bench (the share is printed).
//
//   quota-peers-redis --port PORT [--host 127.0.0.1] [--duration SECONDS] [--owners N]
//
// prints one JSON object: ops_per_s, p50_us, p99_us, p999_us, max_us, operations,
// allowed_share, cpu_us_per_op (the client's and the server's CPU time per request, from
// clock_gettime and the server's INFO cpu, while measuring), client_cpu_us_per_op, the
// server's version.
#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.h"

namespace {

using quota_bench::Budget;
using quota_bench::Measurement;
using quota_bench::Owners;

// KEYS[1] the owner's key; ARGV: cost, maximum, period in ms. Returns {allowed, remaining,
// milliseconds until the window resets}.
constexpr const char* kFixedWindow = R"(
local cost = tonumber(ARGV[1])
local maximum = tonumber(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + cost > maximum then
  return {0, maximum - used, redis.call('PTTL', KEYS[1])}
end
used = redis.call('INCRBY', KEYS[1], cost)
if used == cost then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {1, maximum - used, redis.call('PTTL', KEYS[1])}
)";

constexpr const char* kMaximum = "100";
constexpr const char* kPeriodMs = "10000";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "quota-peers-redis: error: " << message
            << " (usage: quota-peers-redis --port PORT [--host ADDRESS] [--duration SECONDS] "
               "[--owners N])\n";
  std::exit(2);
}

double parse_number(const std::string& option, const char* text, double low, double high) {
  return quota_bench::number_option(option, text, low, high, usage_error);
}

struct FreeReply {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

class Client {
 public:
  Client(const std::string& host, int port) : context_(redisConnect(host.c_str(), port)) {
    if (!context_) throw std::runtime_error("cannot allocate a Redis context");
    if (context_->err) {
      throw std::runtime_error(fmt::format("cannot connect to {}:{}: {}", host, port,
                                           static_cast<const char*>(context_->errstr)));
    }
  }
  ~Client() { redisFree(context_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Runs one command given as its arguments; throws on a connection or server error.
  Reply run(const std::vector<std::string_view>& arguments) {
    std::vector<const char*> values;
    std::vector<std::size_t> lengths;
    for (std::string_view argument : arguments) {
      values.push_back(argument.data());
      lengths.push_back(argument.size());
    }
    return check(
        redisCommandArgv(context_, static_cast<int>(values.size()), values.data(), lengths.data()));
  }

  // EVALSHA of the limiter on one key; true when allowed. The argument arrays are the
  // caller's, built once: only the key changes between requests.
  bool decide(const char** values, std::size_t* lengths, std::string_view key) {
    values[3] = key.data();
    lengths[3] = key.size();
    const Reply reply{check(redisCommandArgv(context_, 7, values, lengths))};
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER) {
      throw std::runtime_error("the limiter's script answered something other than 3 integers");
    }
    return reply->element[0]->integer == 1;
  }

 private:
  Reply check(void* raw) {
    Reply reply{static_cast<redisReply*>(raw)};
    if (!reply) {
      throw std::runtime_error(
          fmt::format("Redis: {}", static_cast<const char*>(context_->errstr)));
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error(fmt::format("Redis: {}", std::string(reply->str, reply->len)));
    }
    return reply;
  }

  redisContext* context_;
};

// A field of the server's INFO SECTION ("" when it has none).
std::string info_field(Client& client, std::string_view section, const std::string& name) {
  const Reply info = client.run({"INFO", section});
  const std::string text(info->str, info->len);
  const std::string field = name + ":";
  const std::size_t at = text.find(field);
  if (at == std::string::npos) return "";
  const std::size_t start = at + field.size();
  return text.substr(start, text.find_first_of("\r\n", start) - start);
}

// The server process's CPU time so far (user and system), in ns.
std::int64_t server_cpu_ns(Client& client) {
  double seconds = 0;
  for (const char* name : {"used_cpu_user", "used_cpu_sys"}) {
    const std::string value = info_field(client, "cpu", name);
    if (value.empty()) throw std::runtime_error(std::string("the server's INFO has no ") + name);
    seconds += std::strtod(value.c_str(), nullptr);
  }
  return static_cast<std::int64_t>(seconds * 1e9);
}

int run(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  std::int64_t owner_count = 1000;
  Budget budget;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--port") {
      port = static_cast<int>(parse_number(arg, value(), 1, 65535));
    } else if (arg == "--host") {
      host = value();
    } else if (arg == "--duration") {
      budget.duration = std::chrono::nanoseconds(
          static_cast<std::int64_t>(parse_number(arg, value(), 0.001, 600) * 1e9));
    } else if (arg == "--owners") {
      owner_count = static_cast<std::int64_t>(parse_number(arg, value(), 1, 1e7));
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  if (port == 0) usage_error("give the server's --port");

  Client client(host, port);
  client.run({"FLUSHALL"});
  const Reply loaded = client.run({"SCRIPT", "LOAD", kFixedWindow});
  const std::string sha(loaded->str, loaded->len);
  const char* values[7] = {"EVALSHA", sha.c_str(), "1", nullptr, "1", kMaximum, kPeriodMs};
  std::size_t lengths[7] = {7, sha.size(), 1, 0, 1, std::strlen(kMaximum), std::strlen(kPeriodMs)};

  Owners every(owner_count, true, 0);
  for (std::int64_t i = 0; i < owner_count; ++i) {
    client.decide(values, lengths, every.text(every.next()));
  }
  Owners owners(owner_count, false, 0);
  const auto operation = [&]() -> int {
    return client.decide(values, lengths, owners.text(owners.next())) ? 1 : 0;
  };
  const auto warm_until = std::chrono::steady_clock::now() + budget.warmup;
  while (std::chrono::steady_clock::now() < warm_until) operation();
  const std::int64_t server_before = server_cpu_ns(client);
  const std::int64_t client_before = quota_bench::process_cpu_ns();
  const Measurement m = quota_bench::measure(operation, budget);
  const std::int64_t client_cpu_ns = quota_bench::process_cpu_ns() - client_before;
  const std::int64_t server_cpu = server_cpu_ns(client) - server_before;
  const auto per_op = [&](std::int64_t ns) {
    return m.operations ? static_cast<double>(ns) / 1e3 / m.operations : 0.0;
  };

  const auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  const nlohmann::json result = {
      {"name", fmt::format("redis_lua/fixed_window/{}", owner_count)},
      {"ops_per_s", m.elapsed_ns > 0 ? static_cast<double>(m.operations) * 1e9 / m.elapsed_ns : 0},
      {"p50_us", us(m.latency.percentile(0.50))},
      {"p99_us", us(m.latency.percentile(0.99))},
      {"p999_us", us(m.latency.percentile(0.999))},
      {"max_us", us(m.latency.max())},
      {"operations", m.operations},
      {"allowed_share", m.operations ? static_cast<double>(m.admitted) / m.operations : 0.0},
      {"cpu_us_per_op", per_op(client_cpu_ns + server_cpu)},
      {"client_cpu_us_per_op", per_op(client_cpu_ns)},
      {"server", "Redis " + info_field(client, "server", "redis_version")}};
  std::cout << result.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "quota-peers-redis: error: " << error.what() << "\n";
    return 1;
  }
}
