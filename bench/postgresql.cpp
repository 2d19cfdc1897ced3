// The PostgreSQL cases: the same engine on a server (--postgres URI), against the server's own
// floor, in the same run.
//
//   upsert_text   the floor: a bare INSERT ... ON CONFLICT (key) DO UPDATE SET count = count + 1
//                 RETURNING count on a one-table counter with a text key
//   select_text   a bare point SELECT on it (the floor of check)
//   consume, check  quota::Engine::open(URI), each algorithm
// each with 1 client and with 8 (threads, each with its own connection), over 1,000 owners
// picked at random (each client its own sequence); and 8 clients on one hot owner for the bare
// upsert and for consume, with a limit that admits every request (1,000,000,000 per 10 s).
// Exactness apart: 8 clients consuming on one owner of a limit of 1,000 (a day; the clock
// standing still), 250 each, must be admitted exactly 1,000 times and leave a state that
// counts exactly what was admitted.
//
// Every connection, the baselines' and the engine's, is made from the same URI: the bench's
// schema as search_path and synchronous_commit on (options=-c...), whatever the server's
// default. The baselines prepare their statement once (PQprepare) and run it with
// PQexecPrepared and text parameters, as the engine runs its own. The engine's clock is
// simulated, as in the SQLite cases: one clock shared by the case's threads, 1 ms per operation.
#include "quota/postgresql.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench.h"

namespace quota_bench {
namespace {

constexpr std::int64_t kStartMs = 1'700'000'000'000;  // as the SQLite cases
constexpr std::int64_t kMaximum = 100;                // 100 per 10 s, as the SQLite cases
constexpr std::int64_t kPeriodMs = 10'000;
constexpr std::int64_t kHotMaximum = 1'000'000'000;  // admits every request of a case
constexpr std::int64_t kDayMs = 86'400'000;
constexpr const char* kHotOwner = "hot";

constexpr const char* kUpsertText =
    "INSERT INTO text_counters (key, count) VALUES ($1, 1) "
    "ON CONFLICT (key) DO UPDATE SET count = text_counters.count + 1 RETURNING count";
constexpr const char* kSelectText = "SELECT count FROM text_counters WHERE key = $1";

constexpr quota::Algorithm kAlgorithms[] = {
    quota::Algorithm::sliding_log, quota::Algorithm::fixed_window, quota::Algorithm::sliding_window,
    quota::Algorithm::token_bucket};

std::string limit_name(const char* kind, quota::Algorithm algorithm) {
  return fmt::format("bench_{}{}", kind, quota::to_string(algorithm));
}

// The server's notices (DROP SCHEMA's cascade) are not the bench's to print.
void ignore_notice(void*, const char*) {}

struct Connection {
  PGconn* handle = nullptr;
  explicit Connection(const std::string& uri) : handle(PQconnectdb(uri.c_str())) {
    PQsetNoticeProcessor(handle, ignore_notice, nullptr);
    if (PQstatus(handle) != CONNECTION_OK) {
      std::string message = PQerrorMessage(handle);
      while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
        message.pop_back();
      }
      PQfinish(handle);
      throw std::runtime_error("cannot connect to the PostgreSQL server given by --postgres (" +
                               message + "): start it, or check the URI (quota-bench --help)");
    }
  }
  ~Connection() { PQfinish(handle); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
};

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

Result checked(PGconn* connection, PGresult* result, const std::string& what) {
  Result owned(result, &PQclear);
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    std::string message = PQerrorMessage(connection);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    throw std::runtime_error(what + ": " + message);
  }
  return owned;
}

Result exec(PGconn* connection, const std::string& sql) {
  return checked(connection, PQexec(connection, sql.c_str()), sql.substr(0, 60));
}

std::string value(PGconn* connection, const std::string& sql) {
  Result result = exec(connection, sql);
  return PQntuples(result.get()) ? PQgetvalue(result.get(), 0, 0) : "";
}

// `uri` with `options` (already percent-encoded) added as its options= parameter.
std::string with_options(const std::string& uri, const std::string& options) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "options=" + options;
}

// The bare statement's operation on one connection.
struct BareOperation {
  PGconn* connection;
  const char* name;  // the prepared statement
  Owners owners;
  bool hot;

  std::string key;  // libpq reads a text parameter up to its NUL, whatever its length

  int operator()() {
    key = hot ? std::string_view(kHotOwner) : owners.text(owners.next());
    const char* values[1] = {key.c_str()};
    const int lengths[1] = {static_cast<int>(key.size())};
    const int formats[1] = {0};
    Result result(PQexecPrepared(connection, name, 1, values, lengths, formats, 0), &PQclear);
    if (PQresultStatus(result.get()) != PGRES_TUPLES_OK || PQntuples(result.get()) != 1) {
      throw std::runtime_error(fmt::format("{} ({}): {} rows, {}", name, key,
                                           PQntuples(result.get()), PQerrorMessage(connection)));
    }
    return 1;
  }
};

struct EngineOperation {
  quota::Engine* engine;
  Subject subject;
  std::string limit;
  Owners owners;
  bool hot;

  int operator()() {
    const std::string_view owner = hot ? std::string_view(kHotOwner) : owners.text(owners.next());
    return subject == Subject::check ? engine->check(limit, owner).allowed
                                     : engine->consume(limit, owner).allowed;
  }
};

// Runs `clients` threads; each calls `client(index, ready)`, which sets itself up, calls
// ready() (every thread waits there for the others) and returns its Measurement. Merged:
// operations, admissions and latencies summed, elapsed the longest.
template <typename Client>
Measurement in_threads(int clients, Client&& client) {
  std::barrier ready(clients);
  std::vector<Measurement> measured(static_cast<std::size_t>(clients));
  std::vector<std::string> errors(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      bool arrived = false;
      try {
        measured[i] = client(i, [&] {
          arrived = true;
          ready.arrive_and_wait();
        });
      } catch (const std::exception& error) {
        errors[i] = error.what();
        if (!arrived) ready.arrive_and_drop();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  Measurement total;
  for (int i = 0; i < clients; ++i) {
    if (!errors[i].empty()) throw std::runtime_error(errors[i]);
    total.operations += measured[i].operations;
    total.admitted += measured[i].admitted;
    total.failures += measured[i].failures;
    total.elapsed_ns = std::max(total.elapsed_ns, measured[i].elapsed_ns);
    total.latency.merge(measured[i].latency);
  }
  return total;
}

template <typename Operation>
Measurement warm_and_measure(Operation& operation, const Budget& budget,
                             const std::function<void()>& ready) {
  const auto warm_until = std::chrono::steady_clock::now() + budget.warmup;
  while (std::chrono::steady_clock::now() < warm_until) operation();
  ready();
  return measure(operation, budget);
}

}  // namespace

bool is_postgresql_uri(std::string_view text) {
  return text.rfind("postgresql://", 0) == 0 || text.rfind("postgres://", 0) == 0;
}

PostgresqlBench::PostgresqlBench(const std::string& uri, PostgresqlScale scale)
    : schema_(fmt::format("quota_bench_{}", getpid())), scale_(scale) {
  uri_ = with_options(uri, "-csearch_path%3D" + schema_ + "%20-csynchronous_commit%3Don");
  {
    Connection connection(uri);
    PGconn* c = connection.handle;
    const char* host = PQhost(c);
    server_ = {{"server_version", value(c, "SHOW server_version")},
               {"version", value(c, "SELECT version()")},
               {"connection", host && host[0] == '/' ? "Unix socket" : "TCP"},
               {"synchronous_commit_default", value(c, "SHOW synchronous_commit")},
               {"synchronous_commit", "on"},
               {"fsync", value(c, "SHOW fsync")},
               {"wal_sync_method", value(c, "SHOW wal_sync_method")},
               {"shared_buffers", value(c, "SHOW shared_buffers")},
               {"schema", schema_}};
    exec(c, "CREATE SCHEMA " + schema_);
  }
  try {
    Connection connection(uri_);
    PGconn* c = connection.handle;
    // The baselines' counters: every owner and the hot key with a row, as the engine's.
    exec(c, "CREATE TABLE text_counters (key text PRIMARY KEY, count bigint NOT NULL)");
    exec(c, fmt::format("INSERT INTO text_counters SELECT 'user:' || i, 1 "
                        "FROM generate_series(0, {}) AS i",
                        scale_.owners - 1));
    exec(c, fmt::format("INSERT INTO text_counters VALUES ('{}', 1)", kHotOwner));
    exec(c, "ANALYZE text_counters");

    // The engine's schema (migrated on open), its limits, and one consume per owner and
    // limit, made by the engine on this connection inside one transaction.
    std::int64_t now = kStartMs;
    quota::Options options;
    options.clock = [&now] { return now; };
    quota::Engine::open(uri_, options);  // creates the schema's tables
    exec(c, "BEGIN");
    {
      quota::Engine engine = quota::postgresql::attach(c, options);
      for (quota::Algorithm algorithm : kAlgorithms) {
        const std::string limit = limit_name("", algorithm);
        engine.define({limit, algorithm, kMaximum, std::chrono::milliseconds(kPeriodMs), {}});
        engine.define({limit_name("hot_", algorithm),
                       algorithm,
                       kHotMaximum,
                       std::chrono::milliseconds(kPeriodMs),
                       {}});
        engine.define({limit_name("exact_", algorithm),
                       algorithm,
                       scale_.exact_maximum,
                       std::chrono::milliseconds(kDayMs),
                       {}});
        Owners names(scale_.owners, true, 0);
        for (std::int64_t owner = 0; owner < scale_.owners; ++owner) {
          now = kStartMs + owner;
          engine.consume(limit, names.text(owner));
        }
        engine.consume(limit_name("hot_", algorithm), kHotOwner);
      }
    }
    exec(c, "COMMIT");
    exec(c, "ANALYZE");
  } catch (...) {
    try {
      Connection connection(uri);
      exec(connection.handle, "DROP SCHEMA " + schema_ + " CASCADE");
    } catch (...) {
    }
    throw;
  }
}

PostgresqlBench::~PostgresqlBench() {
  try {
    Connection connection(uri_);
    exec(connection.handle, "DROP SCHEMA " + schema_ + " CASCADE");
  } catch (const std::exception& error) {
    std::cerr << "quota-bench: could not drop the schema " << schema_ << ": " << error.what()
              << "\n";
  }
}

Measurement PostgresqlBench::run(const Case& c, const Budget& budget, int sequence) const {
  const bool hot = c.owners == 1;
  // Each case far later than the one before (a case runs for minutes of simulated time at
  // most): the state that earlier cases left is never ahead of this one's clock.
  std::atomic<std::int64_t> now{kStartMs + (sequence + 1) * std::int64_t{1'000'000'000}};
  return in_threads(c.clients, [&](int client, const std::function<void()>& ready) {
    // Each client its own sequence of owners, so that clients do not meet on one row more
    // often than random owners do.
    Owners owners(c.owners, false, 0, 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL * client);
    if (!c.engine()) {
      Connection connection(uri_);
      const char* name = c.subject == Subject::select_text ? "bench_select" : "bench_upsert";
      checked(connection.handle,
              PQprepare(connection.handle, name,
                        c.subject == Subject::select_text ? kSelectText : kUpsertText, 1, nullptr),
              name);
      BareOperation operation{connection.handle, name, owners, hot, {}};
      return warm_and_measure(operation, budget, ready);
    }
    quota::Options options;
    options.clock = [&now] { return now.fetch_add(1, std::memory_order_relaxed); };
    quota::Engine engine = quota::Engine::open(uri_, options);
    EngineOperation operation{&engine, c.subject, limit_name(hot ? "hot_" : "", c.algorithm),
                              owners, hot};
    return warm_and_measure(operation, budget, ready);
  });
}

Measurement PostgresqlBench::run_exact(quota::Algorithm algorithm, int clients, int round) const {
  const std::string limit = limit_name("exact_", algorithm);
  const std::string owner = fmt::format("exact-{}", round);
  // The clock stands still inside one day's window: the allowance is the maximum exactly.
  quota::Options options;
  options.clock = [] { return kStartMs / kDayMs * kDayMs + kDayMs / 2; };
  Budget budget;
  budget.duration = std::chrono::hours(1);
  budget.max_operations = scale_.exact_per_client;
  Measurement total = in_threads(clients, [&](int, const std::function<void()>& ready) {
    quota::Engine engine = quota::Engine::open(uri_, options);
    ready();
    return measure_consumes(engine, limit, owner, budget);
  });
  total.recorded = quota::Engine::open(uri_, options).owner_usage(limit, owner).used;
  return total;
}

}  // namespace quota_bench
