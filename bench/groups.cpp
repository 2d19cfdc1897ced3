// quota-bench --groups: threads sharing one Engine (group commit on and off) and the batch
// call consume_many, against one thread's lone consumes and the bare upsert, in one run.
//
// Every case opens its database with quota::Engine::open (the engine's own connection: group
// commit applies only there) on a new file, in WAL with synchronous NORMAL or FULL, with one
// fixed_window limit far beyond reach (every consume is allowed and records) over 1,000
// owners picked at random; the clock stands still. The bare upsert is the text-key counter
// of the main cases (INSERT ... ON CONFLICT DO UPDATE ... RETURNING), prepared once, one
// transaction per upsert, on a connection of its own in the same setting.
//
//   threads/N/group|alone/SETTING      N threads (1, 4, 16, 64) consuming on one Engine
//   many/B/SETTING                     one thread, consume_many of B requests (1, 10, 100);
//                                      figures per request, latency per call
//   upsert/SETTING                     the bare upsert, one thread
//   postgresql/lone, postgresql/many/100   with --postgres: a lone consume and consume_many
//                                      of 100 on the server (per request)
//
// The cases run in forked children, every case once per repetition, in reverse order every
// other time; a figure is the median over the repetitions, a ratio the median of the ratios
// within each repetition.
#include <SQLiteCpp/Database.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "bench.h"
#include "quota/engine.h"

namespace quota_bench {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kNowMs = 1'700'000'000'000;
constexpr std::int64_t kOwners = 1000;
constexpr const char* kLimit = "groups";

struct GroupCase {
  std::string name;
  std::string setting;  // memory, wal_normal, wal_full, postgresql
  int threads = 1;      // threads/...
  bool group = true;
  std::size_t batch = 0;  // many/...: requests per consume_many call
  bool upsert = false;
};

quota::Options options_for(const GroupCase& c) {
  quota::Options options;
  options.clock = [] { return kNowMs; };
  options.synchronous_full = c.setting == "wal_full";
  options.group_commit = c.group;
  return options;
}

std::string location_for(const GroupCase& c, const std::string& dir, const std::string& uri) {
  if (c.setting == "postgresql") return uri;
  if (c.setting == "memory") return ":memory:";
  const std::string path = dir + "/groups.db";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  return path;
}

std::string owner_name(std::int64_t n) { return "user:" + std::to_string(n); }

Measurement run_upsert(const GroupCase& c, const std::string& dir, const Budget& budget) {
  const std::string path = c.setting == "memory" ? ":memory:" : dir + "/upsert.db";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  SQLite::Database db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
  if (c.setting != "memory") {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(c.setting == "wal_full" ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
  }
  db.exec(
      "CREATE TABLE text_counters (key TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID");
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v3(db.getHandle(),
                     "INSERT INTO text_counters (key, count) VALUES (?1, 1) "
                     "ON CONFLICT (key) DO UPDATE SET count = count + 1 RETURNING count",
                     -1, SQLITE_PREPARE_PERSISTENT, &statement, nullptr);
  std::mt19937_64 random(1);
  const auto upsert = [&]() -> int {
    const std::string key = owner_name(static_cast<std::int64_t>(random() % kOwners));
    sqlite3_bind_text(statement, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    while (sqlite3_step(statement) == SQLITE_ROW) {
    }
    sqlite3_reset(statement);
    return 1;
  };
  for (std::int64_t i = 0; i < kOwners; ++i) upsert();
  Measurement m = measure(upsert, budget);
  sqlite3_finalize(statement);
  return m;
}

Measurement run_group_case(const GroupCase& c, const std::string& dir, const std::string& uri,
                           const Budget& budget) {
  if (c.upsert) return run_upsert(c, dir, budget);
  quota::Engine engine = quota::Engine::open(location_for(c, dir, uri), options_for(c));
  engine.define({kLimit,
                 quota::Algorithm::fixed_window,
                 1'000'000'000'000,
                 std::chrono::milliseconds(86'400'000),
                 {}});
  // Every owner has its row before the measure.
  for (std::int64_t n = 0; n < kOwners; ++n) engine.consume(kLimit, owner_name(n));
  if (c.batch > 0) {
    std::mt19937_64 random(2);
    std::vector<std::string> owners(c.batch);
    std::vector<quota::BatchRequest> requests(c.batch);
    Measurement m = measure(
        [&]() -> int {
          for (std::size_t i = 0; i < c.batch; ++i) {
            owners[i] = owner_name(static_cast<std::int64_t>(random() % kOwners));
            requests[i] = {kLimit, owners[i], 1};
          }
          int allowed = 0;
          for (const quota::Result& result : engine.consume_many(requests))
            allowed += result.allowed;
          return allowed;
        },
        budget);
    m.admitted /= static_cast<std::int64_t>(c.batch);
    return m;
  }
  std::vector<Measurement> parts(static_cast<std::size_t>(c.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < c.threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(static_cast<std::uint64_t>(t) + 10);
      parts[static_cast<std::size_t>(t)] = measure(
          [&]() -> int {
            return engine.consume(kLimit, owner_name(static_cast<std::int64_t>(random() % kOwners)))
                .allowed;
          },
          budget);
    });
  }
  for (std::thread& thread : threads) thread.join();
  Measurement total;
  for (const Measurement& part : parts) {
    total.operations += part.operations;
    total.admitted += part.admitted;
    total.elapsed_ns = std::max(total.elapsed_ns, part.elapsed_ns);
    total.latency.merge(part.latency);
  }
  return total;
}

std::vector<GroupCase> group_cases(bool postgresql) {
  std::vector<GroupCase> cases;
  for (const char* setting : {"wal_normal", "wal_full"}) {
    cases.push_back({fmt::format("upsert/{}", setting), setting, 1, false, 0, true});
    for (int threads : {1, 4, 16, 64}) {
      for (bool group : {true, false}) {
        cases.push_back(
            {fmt::format("threads/{}/{}/{}", threads, group ? "group" : "alone", setting), setting,
             threads, group, 0, false});
      }
    }
  }
  for (const char* setting : {"memory", "wal_normal", "wal_full"}) {
    if (std::string(setting) == "memory") {
      cases.push_back({"upsert/memory", setting, 1, false, 0, true});
      cases.push_back({"threads/1/group/memory", setting, 1, true, 0, false});
    }
    for (std::size_t batch : {1, 10, 100}) {
      cases.push_back({fmt::format("many/{}/{}", batch, setting), setting, 1, true, batch, false});
    }
  }
  if (postgresql) {
    cases.push_back({"postgresql/lone", "postgresql", 1, true, 0, false});
    cases.push_back({"postgresql/many/100", "postgresql", 1, true, 100, false});
  }
  return cases;
}

// Time per request, in ns.
double per_request(const Measurement& m, std::size_t batch) {
  if (m.operations == 0) return 0;
  return static_cast<double>(m.elapsed_ns) / static_cast<double>(m.operations) /
         static_cast<double>(batch == 0 ? 1 : batch);
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// A schema of the bench's own on the server, in the URI's search_path; dropped at the end.
struct ServerSchema {
  std::string uri;
  std::string base;
  std::string name;
  explicit ServerSchema(const std::string& given) : base(given) {
    name = fmt::format("quota_bench_groups_{}", getpid());
    run("DROP SCHEMA IF EXISTS " + name + " CASCADE; CREATE SCHEMA " + name);
    uri = given + (given.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" +
          name;
  }
  ~ServerSchema() { run("DROP SCHEMA IF EXISTS " + name + " CASCADE"); }
  void run(const std::string& sql) const {
    PGconn* connection = PQconnectdb(base.c_str());
    PQsetNoticeProcessor(
        connection, [](void*, const char*) {}, nullptr);
    PQclear(PQexec(connection, sql.c_str()));
    PQfinish(connection);
  }
};

}  // namespace

int run_groups(const std::string& work_dir, const std::optional<std::string>& postgres,
               const Budget& budget, int repetitions) {
  std::optional<ServerSchema> schema;
  if (postgres) schema.emplace(*postgres);
  const std::vector<GroupCase> cases = group_cases(postgres.has_value());
  // name -> per repetition
  std::map<std::string, std::vector<Measurement>> runs;
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    std::vector<GroupCase> order = cases;
    if (repetition % 2) std::reverse(order.begin(), order.end());
    for (const GroupCase& c : order) {
      std::cerr << "  " << c.name << "\n";
      const Measurement m = in_child(
          [&] { return run_group_case(c, work_dir, schema ? schema->uri : "", budget); }, nullptr);
      if (m.error[0]) throw std::runtime_error(c.name + ": " + m.error);
      runs[c.name].push_back(m);
    }
  }
  const auto ratio = [&](const std::string& a, std::size_t batch_a, const std::string& b,
                         std::size_t batch_b) {
    // time per request of a ÷ time per request of b, median over the repetitions
    std::vector<double> ratios;
    for (int r = 0; r < repetitions; ++r) {
      const double over = per_request(runs.at(b)[r], batch_b);
      if (over > 0) ratios.push_back(per_request(runs.at(a)[r], batch_a) / over);
    }
    return median_of(ratios);
  };
  std::cout << "| case | requests/s | p50 µs | p99 µs | max µs |\n|---|---:|---:|---:|---:|\n";
  for (const GroupCase& c : cases) {
    std::vector<double> rates, p50, p99, max;
    for (const Measurement& m : runs.at(c.name)) {
      rates.push_back(1e9 / std::max(per_request(m, c.batch), 1e-9));
      p50.push_back(m.latency.percentile(0.50) / 1000.0);
      p99.push_back(m.latency.percentile(0.99) / 1000.0);
      max.push_back(m.latency.max() / 1000.0);
    }
    std::cout << fmt::format("| {} | {:.0f} | {:.1f} | {:.1f} | {:.1f} |\n", c.name,
                             median_of(rates), median_of(p50), median_of(p99), median_of(max));
  }
  std::cout << "\nRatios of time per request (within each repetition, median):\n\n"
               "| measure | ratio |\n|---|---:|\n";
  const auto line = [](const std::string& what, double value) {
    std::cout << fmt::format("| {} | {:.3f} |\n", what, value);
  };
  for (const char* setting : {"wal_normal", "wal_full"}) {
    for (int threads : {4, 16, 64}) {
      for (const char* mode : {"group", "alone"}) {
        // consumes/s of N threads ÷ consumes/s of 1 thread = time of 1 ÷ time of N
        line(fmt::format("{}: {} threads ({}) ÷ 1 thread, consumes/s", setting, threads, mode),
             ratio(fmt::format("threads/1/{}/{}", mode, setting), 0,
                   fmt::format("threads/{}/{}/{}", threads, mode, setting), 0));
      }
    }
    line(fmt::format("{}: 16 threads (group) ÷ 1-thread bare upsert, per second", setting),
         ratio(fmt::format("upsert/{}", setting), 0, fmt::format("threads/16/group/{}", setting),
               0));
  }
  for (const char* setting : {"wal_normal", "wal_full"}) {
    for (std::size_t batch : {1, 10, 100}) {
      line(fmt::format("{}: consume_many of {}, per request ÷ bare upsert", setting, batch),
           ratio(fmt::format("many/{}/{}", batch, setting), batch,
                 fmt::format("upsert/{}", setting), 0));
    }
  }
  for (std::size_t batch : {1, 10, 100}) {
    line(fmt::format("memory: consume_many of {}, per request ÷ lone consume", batch),
         ratio(fmt::format("many/{}/memory", batch), batch, "threads/1/group/memory", 0));
  }
  if (postgres) {
    line("postgresql: consume_many of 100, per request ÷ lone consume",
         ratio("postgresql/many/100", 100, "postgresql/lone", 0));
  }
  return 0;
}

}  // namespace quota_bench
