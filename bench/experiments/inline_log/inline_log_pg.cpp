// The inline sliding-log experiment on PostgreSQL (see inline_log.cpp for the question and the
// workload): the engine's consume as `quotactl sql consume` prints it for PostgreSQL, against
// inline_consume_pg.sql (the events in the owner's row as jsonb), and the bare upsert, through
// libpq with prepared statements, one consume per round trip.
//
// Differences from the SQLite program: the state is written by SQL in place of the fill by
// the statement (a million round trips would take minutes): for each limit L, owner i holds the
// events at kStartMs + i + k x 1,000 (k < L), cost 1, exactly what L x 1,000 consumes in turn
// leave (in quota_log and quota_log_owners, or as one array), and the layouts' answers over
// the measured consumes are compared. The state is not copied afresh for each repetition:
// every layout keeps consuming where its previous repetition stopped, at capacity throughout.
// Both layouts live in one database (run_pg.sh makes it), the bare counter too.
#include <libpq-fe.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kStartMs = 1'700'000'000'000;
constexpr std::int64_t kOwners = 1000;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The statement of a file: its lines without `--` comments and without quotactl's PREPARE
// line, the trailing `;` dropped.
std::string statement_text(const std::string& path) {
  std::stringstream in(read_text(path));
  std::string text;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("--", 0) == 0 || line.rfind("PREPARE ", 0) == 0) continue;
    text += line + "\n";
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ';' || text.back() == ' '))
    text.pop_back();
  return text;
}

class Connection {
 public:
  explicit Connection(const std::string& uri) : handle_(PQconnectdb(uri.c_str())) {
    if (PQstatus(handle_) != CONNECTION_OK) fail(PQerrorMessage(handle_));
  }
  ~Connection() { PQfinish(handle_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void exec(const std::string& sql) {
    PGresult* result = PQexec(handle_, sql.c_str());
    const ExecStatusType status = PQresultStatus(result);
    const std::string message = PQresultErrorMessage(result);
    PQclear(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      fail("SQL failed: " + message + "  in: " + sql.substr(0, 200));
  }

  std::string value(const std::string& sql) {
    PGresult* result = PQexec(handle_, sql.c_str());
    if (PQresultStatus(result) != PGRES_TUPLES_OK) {
      const std::string message = PQresultErrorMessage(result);
      PQclear(result);
      fail("SQL failed: " + message);
    }
    std::string text = PQntuples(result) ? PQgetvalue(result, 0, 0) : "";
    PQclear(result);
    return text;
  }

  void prepare(const std::string& name, const std::string& sql, int parameters) {
    const Oid types[] = {25, 25, 20, 20};  // text, text, bigint, bigint
    PGresult* result = PQprepare(handle_, name.c_str(), sql.c_str(), parameters, types);
    const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
    const std::string message = PQresultErrorMessage(result);
    PQclear(result);
    if (!ok) fail("prepare " + name + ": " + message);
  }

  PGconn* get() const { return handle_; }

 private:
  PGconn* handle_;
};

struct Answer {
  std::string allowed, reason, remaining, retry_after_ms, reset_at_ms, denied;
  bool operator==(const Answer& o) const {
    return allowed == o.allowed && reason == o.reason && remaining == o.remaining &&
           retry_after_ms == o.retry_after_ms && reset_at_ms == o.reset_at_ms && denied == o.denied;
  }
  std::string show() const {
    return "allowed " + allowed + " " + reason + " remaining " + remaining + " retry " +
           retry_after_ms + " reset " + reset_at_ms + " denied " + denied;
  }
};

// Runs prepared statement `name` with the limit, owner, cost and time (the bare upsert: the
// owner alone).
Answer run(Connection& c, const std::string& name, const std::string& limit,
           const std::string& owner, std::int64_t cost, std::int64_t now) {
  const std::string cost_text = std::to_string(cost), now_text = std::to_string(now);
  const bool bare = name == "bare";
  const char* values[] = {bare ? owner.c_str() : limit.c_str(), owner.c_str(), cost_text.c_str(),
                          now_text.c_str()};
  PGresult* result =
      PQexecPrepared(c.get(), name.c_str(), bare ? 1 : 4, values, nullptr, nullptr, 0);
  if (PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != 1) {
    const std::string message = PQresultErrorMessage(result);
    PQclear(result);
    fail(name + ": " + message);
  }
  Answer a;
  a.allowed = PQgetvalue(result, 0, 0);
  if (!bare) {
    a.reason = PQgetvalue(result, 0, 1);
    a.remaining = PQgetvalue(result, 0, 2);
    a.retry_after_ms = PQgetvalue(result, 0, 3);
    a.reset_at_ms = PQgetvalue(result, 0, 4);
    a.denied = PQgetvalue(result, 0, 5);
  }
  PQclear(result);
  return a;
}

struct Settings {
  std::string uri, current_sql, directory;
  std::vector<std::int64_t> limits{10, 100, 1000};
  int repetitions = 5;
  std::int64_t warmup = 1000, ops = 2000, verify = 10000;
};

struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1DULL;
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() >> 11) % n; }
};

// The same random requests as inline_log.cpp's verification, through both statements.
void verify(const Settings& s, Connection& c) {
  struct Case {
    std::string limit;
    std::int64_t maximum, period;
  };
  const std::vector<Case> cases = {{"v3", 3, 1000},
                                   {"v20", 20, 5000},
                                   {"log10", 10, 10000},
                                   {"log100", 100, 100000},
                                   {"log1000", 1000, 1000000}};
  Random random{0x9E3779B97F4A7C15ULL};
  std::map<std::string, std::int64_t> reasons, clock;
  std::int64_t backwards = 0, same_ms = 0;
  for (std::int64_t i = 0; i < s.verify; ++i) {
    const Case& k = cases[random.below(static_cast<std::int64_t>(cases.size()))];
    const std::string owner = "v:" + std::to_string(random.below(3));
    std::int64_t& now = clock.try_emplace(k.limit, kStartMs).first->second;
    const std::int64_t roll = random.below(100);
    if (roll < 8) {
      now -= random.below(k.period / 2) + 1;
      ++backwards;
    } else if (roll < 18) {
      ++same_ms;
    } else if (roll < 23) {
      now += random.below(2 * k.period);
    } else {
      now += random.below(k.period / (k.maximum * 2) + 2);
    }
    const std::int64_t cost_roll = random.below(100);
    const std::int64_t cost = cost_roll < 70   ? 1
                              : cost_roll < 97 ? random.below(k.maximum) + 1
                                               : k.maximum + 1 + random.below(3);
    const Answer x = run(c, "current", k.limit, owner, cost, now);
    const Answer y = run(c, "inline", k.limit, owner, cost, now);
    if (!(x == y))
      fail("request " + std::to_string(i) + " (" + k.limit + ", " + owner + ", cost " +
           std::to_string(cost) + ", now " + std::to_string(now) + "): current " + x.show() +
           ", inline " + y.show());
    ++reasons[x.reason];
  }
  std::printf("verified %lld consumes on PostgreSQL: every answer equal (",
              static_cast<long long>(s.verify));
  for (const auto& [reason, count] : reasons)
    std::printf("%s %lld, ", reason.c_str(), static_cast<long long>(count));
  std::printf("%lld sent at an earlier time than the one before, %lld in the same ms)\n",
              static_cast<long long>(backwards), static_cast<long long>(same_ms));
  std::fflush(stdout);
}

// Every owner of `limit` at capacity in both layouts (see the header).
void fill(Connection& c, std::int64_t limit) {
  const std::string L = std::to_string(limit), S = std::to_string(kStartMs);
  const std::string newest = S + " + i + " + std::to_string((limit - 1) * 1000);
  const std::string period = std::to_string(limit * 1000);
  c.exec("INSERT INTO quota_log (limit_name, owner, at_ms, cost, total) SELECT 'log" + L +
         "', 'user:' || i, " + S +
         " + i + k * 1000, 1, k + 1 FROM generate_series(0, 999) AS i, generate_series(0, " + L +
         " - 1) AS k");
  // recorded 0: the row's record trigger would append its event again.
  c.exec(
      "INSERT INTO quota_log_owners (limit_name, owner, maximum, period_ms, total, newest_at_ms, "
      "recorded, denied, seen_ms, cost, last_allowed, last_reason, last_remaining, "
      "last_retry_after_ms, last_reset_at_ms, shadow_denied) SELECT 'log" +
      L + "', 'user:' || i, " + L + ", " + period + ", " + L + ", " + newest + ", 0, 0, " + newest +
      ", 1, TRUE, 'ok', 0, 0, " + newest + " + " + period +
      ", 0 FROM generate_series(0, 999) AS i");
  c.exec(
      "INSERT INTO quota_log_inline (limit_name, owner, maximum, period_ms, events, denied, "
      "seen_ms, cost, last_allowed, last_reason, last_remaining, last_retry_after_ms, "
      "last_reset_at_ms, shadow_denied) SELECT 'log" +
      L + "', 'user:' || i, " + L + ", " + period + ", (SELECT jsonb_agg(jsonb_build_array(" + S +
      " + i + k * 1000, 1) ORDER BY k) FROM generate_series(0, " + L + " - 1) AS k), 0, " + newest +
      ", 1, TRUE, 'ok', 0, 0, " + newest + " + " + period +
      ", 0 FROM generate_series(0, 999) AS i");
}

// The CPU time (user + system, µs) of process `pid` (the server's backend of this
// connection, on this machine) and of this thread: on a machine shared with other jobs the
// wall clock measures the scheduler's queue as much as the statement.
double process_cpu_microseconds(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::stringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double thread_cpu_microseconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void timing(const Settings& s, Connection& c) {
  const char* subjects[] = {"bare", "current", "inline"};
  std::map<std::pair<std::int64_t, int>, std::vector<double>> figures, cpu;
  const long backend = PQbackendPID(c.get());
  std::map<std::pair<std::int64_t, int>, std::int64_t> position;  // the next consume's index
  std::vector<std::string> owners;
  for (std::int64_t i = 0; i < kOwners; ++i) owners.push_back("user:" + std::to_string(i));
  auto segment = [&](std::int64_t limit, int subject, std::int64_t count, std::uint64_t& hash) {
    const std::string name = "log" + std::to_string(limit);
    std::int64_t& i = position[{limit, subject}];
    for (std::int64_t end = i + count; i < end; ++i) {
      const Answer a =
          run(c, subjects[subject], name, owners[i % kOwners], 1, kStartMs + limit * kOwners + i);
      if (subject != 0 && a.allowed != "t") fail(std::string(subjects[subject]) + " denied");
      for (const std::string* v : {&a.remaining, &a.retry_after_ms, &a.reset_at_ms, &a.denied})
        for (char ch : *v) hash = (hash ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
    }
  };
  for (std::int64_t limit : s.limits) {
    for (int subject = 0; subject < 3; ++subject) {
      std::uint64_t ignored = 0;
      segment(limit, subject, s.warmup, ignored);
    }
  }
  for (int repetition = 0; repetition < s.repetitions; ++repetition) {
    for (std::int64_t limit : s.limits) {
      std::uint64_t hashes[3] = {};
      for (int k = 0; k < 3; ++k) {
        const int subject = (k + repetition) % 3;
        hashes[subject] = 1469598103934665603ULL;
        const double cpu_started = process_cpu_microseconds(backend) + thread_cpu_microseconds();
        const auto started = std::chrono::steady_clock::now();
        segment(limit, subject, s.ops, hashes[subject]);
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started)
                .count() /
            static_cast<double>(s.ops);
        const double cpu_us =
            (process_cpu_microseconds(backend) + thread_cpu_microseconds() - cpu_started) /
            static_cast<double>(s.ops);
        figures[{limit, subject}].push_back(us);
        cpu[{limit, subject}].push_back(cpu_us);
        std::printf("rep %d limit %lld %s: %.1f us/op wall, %.1f cpu (server + client)\n",
                    repetition + 1, static_cast<long long>(limit), subjects[subject], us, cpu_us);
        std::fflush(stdout);
      }
      if (hashes[1] != hashes[2]) fail("the layouts' answers differ");
    }
  }
  for (auto* table : {&figures, &cpu}) {
    std::printf("\n%s µs per consume (median of the repetitions)\n\n",
                table == &figures ? "Wall-clock" : "CPU (the server's backend + this client)");
    std::printf(
        "| limit | bare | current | inline | inline ÷ current | current ÷ bare | inline ÷ bare "
        "|\n|---:|---:|---:|---:|---:|---:|---:|\n");
    for (std::int64_t limit : s.limits) {
      auto ratio = [&](int a, int b) {
        std::vector<double> r;
        for (std::size_t i = 0; i < (*table)[{limit, a}].size(); ++i)
          r.push_back((*table)[{limit, a}][i] / (*table)[{limit, b}][i]);
        return median(r);
      };
      std::printf("| %lld | %.1f | %.1f | %.1f | %.2f× | %.2f× | %.2f× |\n",
                  static_cast<long long>(limit), median((*table)[{limit, 0}]),
                  median((*table)[{limit, 1}]), median((*table)[{limit, 2}]), ratio(2, 1),
                  ratio(1, 0), ratio(2, 0));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--uri")
      s.uri = value();
    else if (arg == "--current")
      s.current_sql = value();
    else if (arg == "--dir")
      s.directory = value();
    else if (arg == "--repetitions")
      s.repetitions = std::stoi(value());
    else if (arg == "--ops")
      s.ops = std::stoll(value());
    else if (arg == "--warmup")
      s.warmup = std::stoll(value());
    else if (arg == "--verify")
      s.verify = std::stoll(value());
    else if (arg == "--limits") {
      s.limits.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) s.limits.push_back(std::stoll(item));
    } else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  if (s.uri.empty() || s.current_sql.empty() || s.directory.empty()) {
    std::fprintf(stderr,
                 "usage: inline_log_pg --uri URI --current SQL --dir DIR [--limits 10,100,1000] "
                 "[--repetitions 5] [--warmup 1000] [--ops 2000] [--verify 10000]\n");
    return 2;
  }
  try {
    Connection c(s.uri);
    std::printf("%s\n", c.value("SELECT version()").c_str());
    c.exec("SET client_min_messages = warning");
    c.exec("DROP TABLE IF EXISTS quota_log_inline, text_counters");
    c.exec(read_text(s.directory + "/inline_schema_pg.sql"));
    c.exec("TRUNCATE quota_log, quota_log_owners");
    c.exec(
        "CREATE TABLE text_counters (key text COLLATE \"C\" PRIMARY KEY, count bigint NOT NULL)");
    c.exec("INSERT INTO text_counters SELECT 'user:' || i, 1 FROM generate_series(0, 999) AS i");
    c.prepare("current", statement_text(s.current_sql), 4);
    c.prepare("inline", statement_text(s.directory + "/inline_consume_pg.sql"), 4);
    c.prepare("bare",
              "INSERT INTO text_counters (key, count) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE "
              "SET count = text_counters.count + 1 RETURNING count",
              1);
    verify(s, c);
    for (std::int64_t limit : s.limits) fill(c, limit);
    c.exec("VACUUM ANALYZE quota_log");
    c.exec("VACUUM ANALYZE quota_log_owners");
    c.exec("VACUUM ANALYZE quota_log_inline");
    c.exec("VACUUM ANALYZE text_counters");
    for (std::int64_t limit : s.limits) {
      const std::string name = "'log" + std::to_string(limit) + "'";
      std::printf("limit %lld: events, pg_column_size per owner %s bytes\n",
                  static_cast<long long>(limit),
                  c.value("SELECT round(avg(pg_column_size(events))) FROM quota_log_inline "
                          "WHERE limit_name = " +
                          name)
                      .c_str());
    }
    std::printf(
        "sizes (all limits): quota_log_owners + quota_log %s, quota_log_inline %s\n",
        c.value("SELECT pg_size_pretty(pg_total_relation_size('quota_log_owners') + "
                "pg_total_relation_size('quota_log'))")
            .c_str(),
        c.value("SELECT pg_size_pretty(pg_total_relation_size('quota_log_inline'))").c_str());
    std::fflush(stdout);
    timing(s, c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inline_log_pg: %s\n", e.what());
    return 1;
  }
  return 0;
}
