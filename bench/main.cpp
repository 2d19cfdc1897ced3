// quota-bench: what a decision costs, against SQLite's own floor, in one run.
//
// Workloads (each case a forked process; its name is subject[/algorithm]/setting/owners):
//   upsert_int, upsert_text  the floor: a bare INSERT ... ON CONFLICT DO UPDATE ... RETURNING
//                            on a one-table counter, integer and text key
//   select_int, select_text  a bare point SELECT on the same tables (the floor of check)
//   article                  the SQL-only design of "SQLite-only Rate Limiting" (verbatim)
//   upsert_state,            storage without a decision: the bare upsert on the engine's own
//   upsert_narrow            state table, and on the narrowest state row a text owner allows
//   consume, check, record   quota::Engine, each algorithm
//   consume/.../block        fixed_window consume on a limit with a block (Limit::block),
//                            beside the plain one (memory and wal_normal, 1,000 owners)
//   consume/.../shadow       the same on a limit in shadow mode (Limit::shadow; memory)
//   consume/.../overridden   the same with an override of the limit for another owner (memory)
//   consume/.../calendar     the same on a calendar month at +09:00 anchored on the 31st
//                            (Limit::calendar), as many requests per window per owner
//   consume/concurrency      an acquire (a consume on a concurrency limit of 100 leases, TTL
//                            10 s): a lease taken, beside fixed_window's consume (memory and
//                            wal_normal, 1,000 owners)
// in the settings memory (":memory:"), wal_normal and wal_full (WAL, synchronous NORMAL or
// FULL), with 1,000 owners; consume and the upserts also with 1,000,000 owners (wal_normal);
// the sliding log held at capacity with limit 10 and limit 100,000 (10 owners, memory and
// wal_normal); and two processes consuming on one owner (contention/...), with SQLite's busy
// timeout and checkpoint and with the engine's (the defaults).
//
// On PostgreSQL (--postgres URI; without it these cases are skipped and the run says so; the
// setting's name is postgresql, more than one client is /N_clients, one hot owner /1/):
//   upsert_text, select_text the server's floor: the bare upsert and point SELECT, text key
//   consume, check           quota::Engine::open(URI), each algorithm
// with 1 client and with 8 (threads, each its own connection), over 1,000 owners; 8 clients on
// one hot owner for upsert_text and consume; and exact/ALGORITHM: 8 clients consuming on one
// owner of a small limit, admitted exactly as often as the limit allows (postgresql.cpp).
//
// Each case runs for --duration after a warm-up, --repetitions times; the repetitions run
// every case in turn, in reverse order every other time, so that drift on a noisy machine
// hits the baselines and the product alike. A figure is the median of the repetitions; a
// ratio is the median of the ratios within each repetition. Ratios are of time per operation
// (2.0 = half the operations per second).
//
//   quota-bench                 the full run and a table      (about 7 minutes)
//   quota-bench --json          the same as one JSON document
//   quota-bench --quick --json  tiny counts (the test suite checks the document's shape)
//   quota-bench --help          every option
//   quota-bench --postgres URI --filter postgresql   only the PostgreSQL cases
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "bench.h"

namespace quota_bench {
namespace {

constexpr const char* kUsage = R"(usage: quota-bench [OPTIONS]

Measures quota::Engine's operations against SQLite's floor (a bare upsert, a bare point
SELECT) and the article's SQL-only design, in one run, and evaluates the targets.

  --json                 print the run as one JSON document instead of tables
  --markdown             print the tables as Markdown (for docs/performance.md)
  --out FILE             also write the run's JSON to FILE
  --report FILE          print the tables (or --markdown) of a saved JSON run, its targets
                         evaluated again; measure nothing
  --filter TEXT          only the cases whose name contains TEXT (repeatable); the baselines
                         their ratios need are added. TEXT ending in $ matches the names that
                         end with the rest: consume/fixed_window/wal_normal/1000$ leaves out
                         the 1,000,000-owner case
  --postgres URI         also run the PostgreSQL cases on this server (postgresql://...,
                         without options=: the bench sets search_path and
                         synchronous_commit on); they work in a schema of their own,
                         quota_bench_PID, dropped at the end. Without it they are skipped
  --duration SECONDS     measured time per case and repetition (default 1)
  --repetitions N        runs of every case (default 3)
  --quick                tiny counts, for the test suite: 10 ms per case, one repetition,
                         2,000 owners instead of 1,000,000, log limit 1,000 instead of 100,000
  --groups               measure only group commit and consume_many (bench/groups.cpp): 1,
                         4, 16 and 64 threads on one Engine, group commit on and off, and
                         consume_many of 1, 10 and 100, against the bare upsert; with
                         --postgres, consume_many against lone consumes on the server. Prints
                         Markdown tables (--duration, --repetitions and --work-dir apply)
  --list                 print the case names and exit
  --work-dir DIR         keep the template databases in DIR and reuse them (default: a new
                         temporary directory, removed at the end)
  --prepare              build the templates the selected cases need (in --work-dir), then exit
  --count-instructions CASE --operations N
                         run N operations of CASE in this process with no timing, inside the
                         function quota_bench_run_ops (for callgrind; see
                         bench/scripts/bench-instructions.sh)
  --statement FILE       with --count-instructions: run the SQL statement in FILE instead of
                         the case's operation, on the case's database, with :limit, :owner,
                         :cost and :now bound as the engine binds them
  --setup FILE           with --statement: SQL to run once first (e.g. DROP TRIGGER ...)
  --page-size N          build the templates with this page size (512 to 65536, a power of
                         two; default SQLite's, 4096), for every case but the two processes'
  --pragma NAME=VALUE    run PRAGMA NAME = VALUE on every case's connection but the two
                         processes' (repeatable), e.g. cache_size=-65536, mmap_size=268435456;
                         journal_mode and synchronous are the setting's, page_size --page-size's
  --no-memstatus         sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) before SQLite starts: no
                         global mutex and statistics around every allocation SQLite makes (a
                         setting of the whole process, which an application may make and the
                         engine never does)
)";

struct Config {
  bool json = false;
  bool markdown = false;
  bool quick = false;
  bool list = false;
  bool prepare = false;
  bool groups = false;
  std::optional<std::string> out, report, work_dir, count_case, statement, setup, postgres;
  std::vector<std::string> filters;
  FileSettings file;
  bool memstatus = true;
  double duration_s = 1.0;
  int repetitions = 3;
  std::int64_t operations = 0;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "quota-bench: error: " << message << " (quota-bench --help lists the options)\n";
  std::exit(2);
}

double parse_number(const std::string& option, const char* text, double low, double high) {
  return number_option(option, text, low, high, usage_error);
}

// "NAME=VALUE" (spaces around '=' allowed) as "NAME = VALUE": NAME a pragma's name, VALUE an
// integer or a word, so that nothing but one setting reaches the PRAGMA statement.
std::string parse_pragma(const std::string& text) {
  const auto is_word = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char ch) {
      return std::isalnum(ch) || ch == '_';
    });
  };
  const auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    return s;
  };
  const std::size_t equals = text.find('=');
  const std::string name = trim(text.substr(0, equals));
  std::string value = equals == std::string::npos ? "" : trim(text.substr(equals + 1));
  const bool negative = !value.empty() && value[0] == '-';
  if (!is_word(name) || !is_word(negative ? value.substr(1) : value)) {
    usage_error(
        "--pragma takes NAME=VALUE, a pragma's name and an integer or a word, such as "
        "cache_size=-65536, not '" +
        text + "'");
  }
  if (name == "journal_mode" || name == "synchronous") {
    usage_error("--pragma " + name + ": the setting (memory, wal_normal, wal_full) decides it");
  }
  if (name == "page_size") usage_error("--pragma page_size: use --page-size N");
  return name + " = " + value;
}

// SQLite ignores a pragma it does not know: a misspelt one would measure nothing new. Run
// after sqlite3_config (see main), which must come before SQLite's first use.
void check_pragmas_known(const FileSettings& file) {
  if (file.pragmas.empty()) return;
  SQLite::Database probe(":memory:");
  SQLite::Statement known(probe, "SELECT 1 FROM pragma_pragma_list WHERE name = ?");
  for (const std::string& pragma : file.pragmas) {
    const std::string name = pragma.substr(0, pragma.find(' '));
    known.bind(1, name);
    if (!known.executeStep()) {
      usage_error("--pragma " + name + ": SQLite " + sqlite3_libversion() +
                  " has no such pragma (PRAGMA pragma_list names them)");
    }
    known.reset();
  }
}

Config parse(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--json") {
      config.json = true;
    } else if (arg == "--markdown") {
      config.markdown = true;
    } else if (arg == "--quick") {
      config.quick = true;
    } else if (arg == "--groups") {
      config.groups = true;
    } else if (arg == "--list") {
      config.list = true;
    } else if (arg == "--prepare") {
      config.prepare = true;
    } else if (arg == "--out") {
      config.out = value();
    } else if (arg == "--report") {
      config.report = value();
    } else if (arg == "--work-dir") {
      config.work_dir = value();
    } else if (arg == "--postgres") {
      config.postgres = value();
      if (!is_postgresql_uri(*config.postgres)) {
        usage_error(
            "--postgres takes a postgresql:// URI (postgresql://USER@/DATABASE?host=SOCKET-DIR), "
            "not '" +
            *config.postgres + "'");
      }
      if (config.postgres->find("options=") != std::string::npos) {
        usage_error(
            "--postgres: leave options= out of the URI: the bench sets search_path and "
            "synchronous_commit on itself");
      }
    } else if (arg == "--filter") {
      config.filters.emplace_back(value());
    } else if (arg == "--duration") {
      config.duration_s = parse_number(arg, value(), 0.001, 600);
    } else if (arg == "--repetitions") {
      config.repetitions = static_cast<int>(parse_number(arg, value(), 1, 100));
    } else if (arg == "--count-instructions") {
      config.count_case = value();
    } else if (arg == "--statement") {
      config.statement = value();
    } else if (arg == "--setup") {
      config.setup = value();
    } else if (arg == "--page-size") {
      const double size = parse_number(arg, value(), 512, 65536);
      if (size != static_cast<int>(size) || !std::has_single_bit(static_cast<unsigned>(size))) {
        usage_error("--page-size takes a power of two from 512 to 65536, not '" +
                    std::string(argv[i]) + "'");
      }
      config.file.page_size = static_cast<int>(size);
    } else if (arg == "--pragma") {
      config.file.pragmas.push_back(parse_pragma(value()));
    } else if (arg == "--no-memstatus") {
      config.memstatus = false;
    } else if (arg == "--operations") {
      config.operations = static_cast<std::int64_t>(parse_number(arg, value(), 1, 1e9));
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  if (config.count_case && config.operations == 0) {
    usage_error("--count-instructions needs --operations N");
  }
  if (config.prepare && !config.work_dir) usage_error("--prepare needs --work-dir DIR");
  if (config.statement && !config.count_case) usage_error("--statement needs --count-instructions");
  if (config.setup && !config.statement) usage_error("--setup needs --statement FILE");
  return config;
}

// ---------------------------------------------------------------------------------------
// The cases.

struct Scale {
  std::int64_t owners = 1000;
  std::int64_t large_owners = 1'000'000;
  std::int64_t long_log = 100'000;
  std::int64_t short_log = 10;
  std::int64_t log_owners = 10;
  std::int64_t contention_maximum = 20'000;
};

constexpr int kPostgresqlClients = 8;

// The exactness runs on PostgreSQL: 8 clients, one owner of a small limit.
std::string exact_name(quota::Algorithm algorithm) {
  return fmt::format("exact/{}/postgresql/1/{}_clients", quota::to_string(algorithm),
                     kPostgresqlClients);
}

constexpr quota::Algorithm kAlgorithms[] = {
    quota::Algorithm::sliding_log, quota::Algorithm::fixed_window, quota::Algorithm::sliding_window,
    quota::Algorithm::token_bucket};

std::vector<Case> all_cases(const Scale& scale) {
  std::vector<Case> cases;
  auto add = [&](Subject subject, Setting setting, std::int64_t owners,
                 quota::Algorithm algorithm = quota::Algorithm::fixed_window,
                 std::int64_t log_limit = 0) {
    cases.push_back({subject, setting, algorithm, owners, log_limit});
  };
  // Baselines between the engine's cases, so that neither side runs all in one stretch.
  for (Setting setting : {Setting::memory, Setting::wal_normal, Setting::wal_full}) {
    add(Subject::upsert_int, setting, scale.owners);
    for (auto algorithm : kAlgorithms) add(Subject::consume, setting, scale.owners, algorithm);
    add(Subject::select_int, setting, scale.owners);
    for (auto algorithm : kAlgorithms) add(Subject::check, setting, scale.owners, algorithm);
    add(Subject::upsert_text, setting, scale.owners);
    for (auto algorithm : kAlgorithms) add(Subject::record, setting, scale.owners, algorithm);
    add(Subject::select_text, setting, scale.owners);
    add(Subject::article, setting, scale.owners);
    add(Subject::upsert_state, setting, scale.owners);
    add(Subject::upsert_narrow, setting, scale.owners);
    if (setting != Setting::wal_full) {
      add(Subject::consume, setting, scale.owners);
      cases.back().block = true;
      if (setting == Setting::memory) {
        add(Subject::consume, setting, scale.owners);
        cases.back().shadow = true;
        add(Subject::consume, setting, scale.owners);
        cases.back().overridden = true;
      }
      add(Subject::consume, setting, scale.owners);
      cases.back().calendar = true;
    }
  }
  // A lease's acquire (a consume on a concurrency limit), held to the fixed_window consume of
  // the same setting.
  for (Setting setting : {Setting::memory, Setting::wal_normal}) {
    add(Subject::consume, setting, scale.owners, quota::Algorithm::concurrency);
  }
  // Idempotency keys: a keyed consume that stores its answer, and a replay of one.
  add(Subject::consume_keyed, Setting::memory, scale.owners);
  add(Subject::replay, Setting::memory, scale.owners);
  // A batch (Engine::consume_many of kBatchSize requests), per request, held to the lone
  // consume of the same algorithm.
  for (Setting setting : {Setting::memory, Setting::wal_normal}) {
    add(Subject::consume_many, setting, scale.owners);
  }
  add(Subject::upsert_int, Setting::wal_normal, scale.large_owners);
  for (auto algorithm : kAlgorithms) {
    add(Subject::consume, Setting::wal_normal, scale.large_owners, algorithm);
  }
  add(Subject::upsert_text, Setting::wal_normal, scale.large_owners);
  add(Subject::upsert_state, Setting::wal_normal, scale.large_owners);
  add(Subject::upsert_narrow, Setting::wal_normal, scale.large_owners);
  // Each engine case of a file again with a watch on (Engine::watch): what watching costs.
  for (auto algorithm : kAlgorithms) {
    Case watched{Subject::consume, Setting::wal_normal, algorithm, scale.owners, 0};
    watched.watched = true;
    cases.push_back(watched);
  }
  for (Setting setting : {Setting::memory, Setting::wal_normal}) {
    for (std::int64_t limit : {scale.short_log, scale.long_log}) {
      add(Subject::consume, setting, scale.log_owners, quota::Algorithm::sliding_log, limit);
    }
  }
  // PostgreSQL: 1 and 8 clients over the owners, then 8 clients on one hot owner.
  auto add_postgresql = [&](Subject subject, std::int64_t owners, int clients,
                            quota::Algorithm algorithm = quota::Algorithm::fixed_window) {
    Case c{subject, Setting::postgresql, algorithm, owners, 0};
    c.clients = clients;
    cases.push_back(c);
  };
  for (int clients : {1, kPostgresqlClients}) {
    add_postgresql(Subject::upsert_text, scale.owners, clients);
    for (auto algorithm : kAlgorithms) {
      add_postgresql(Subject::consume, scale.owners, clients, algorithm);
    }
    add_postgresql(Subject::select_text, scale.owners, clients);
    for (auto algorithm : kAlgorithms)
      add_postgresql(Subject::check, scale.owners, clients, algorithm);
  }
  add_postgresql(Subject::upsert_text, 1, kPostgresqlClients);
  for (auto algorithm : kAlgorithms) {
    add_postgresql(Subject::consume, 1, kPostgresqlClients, algorithm);
  }
  return cases;
}

// The baselines a case's ratios are taken against (by name).
struct References {
  std::string upsert, upsert_text, select, select_text, short_log;
  // A case with a block, shadow mode, an override or a calendar: the same case without it.
  std::string plain;
};

References references_of(const Case& c, const Scale& scale) {
  if (c.setting == Setting::postgresql) {
    // The server's floor with as many clients on as many owners: the bare text-key upsert
    // (and the bare point SELECT for check).
    auto name = [&](Subject subject) {
      Case base{subject, Setting::postgresql, {}, c.owners, 0};
      base.clients = c.clients;
      return base.name();
    };
    References references;
    references.upsert = name(Subject::upsert_text);
    if (c.subject == Subject::check) references.select = name(Subject::select_text);
    return references;
  }
  const std::int64_t owners = c.log_limit > 0 ? scale.owners : c.owners;
  auto name = [&](Subject subject) { return Case{subject, c.setting, {}, owners, 0}.name(); };
  References references{name(Subject::upsert_int), name(Subject::upsert_text), "", "", "", ""};
  if (c.subject == Subject::check) {
    references.select = name(Subject::select_int);
    references.select_text = name(Subject::select_text);
  }
  if (c.log_limit > 0 && c.log_limit != scale.short_log) {
    Case short_log = c;
    short_log.log_limit = scale.short_log;
    references.short_log = short_log.name();
  }
  if (c.block || c.shadow || c.overridden || c.calendar || c.subject == Subject::consume_many) {
    Case plain = c;
    plain.block = plain.shadow = plain.overridden = plain.calendar = false;
    plain.subject = Subject::consume;
    references.plain = plain.name();
  }
  return references;
}

bool selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(), [&](const std::string& filter) {
    if (!filter.empty() && filter.back() == '$') {
      return name.ends_with(std::string_view(filter).substr(0, filter.size() - 1));
    }
    return name.find(filter) != std::string::npos;
  });
}

// The selected cases and the baselines they need, in the order of all_cases.
std::vector<Case> select_cases(const std::vector<Case>& cases, const Scale& scale,
                               const std::vector<std::string>& filters) {
  std::vector<std::string> wanted;
  for (const Case& c : cases) {
    if (!selected(c.name(), filters)) continue;
    const References r = references_of(c, scale);
    for (const std::string& name :
         {c.name(), r.upsert, r.upsert_text, r.select, r.select_text, r.short_log, r.plain}) {
      if (!name.empty()) wanted.push_back(name);
    }
  }
  std::vector<Case> chosen;
  for (const Case& c : cases) {
    if (std::find(wanted.begin(), wanted.end(), c.name()) != wanted.end()) chosen.push_back(c);
  }
  return chosen;
}

// ---------------------------------------------------------------------------------------
// Figures.

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

double ops_per_second(const Measurement& m) {
  return m.elapsed_ns > 0 ? static_cast<double>(m.operations) * 1e9 / m.elapsed_ns : 0;
}

double microseconds(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

nlohmann::json latency_figures(const Histogram& latency) {
  return {{"p50_us", microseconds(latency.percentile(0.50))},
          {"p99_us", microseconds(latency.percentile(0.99))},
          {"p999_us", microseconds(latency.percentile(0.999))},
          {"max_us", microseconds(latency.max())}};
}

struct CaseRun {
  Measurement measurement;
  long peak_rss_kib = 0;
};

// The median over the repetitions of each figure of `runs` (JSON objects of numbers), and
// the largest max_us.
nlohmann::json medians(const std::vector<nlohmann::json>& runs) {
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [key, first] : runs.front().items()) {
    if (!first.is_number()) continue;
    std::vector<double> values;
    for (const auto& run : runs) values.push_back(run.at(key).get<double>());
    summary[key] =
        key == "max_us" ? *std::max_element(values.begin(), values.end()) : median(values);
  }
  return summary;
}

nlohmann::json case_json(const Case& c, const std::vector<CaseRun>& runs,
                         const std::map<std::string, std::vector<CaseRun>>& by_name,
                         const Scale& scale) {
  nlohmann::json json = {{"name", c.name()},
                         {"subject", subject_name(c.subject)},
                         {"setting", setting_name(c.setting)},
                         {"owners", c.owners}};
  if (c.setting == Setting::postgresql) json["clients"] = c.clients;
  if (c.engine()) json["algorithm"] = quota::to_string(c.algorithm);
  if (c.log_limit > 0) json["log_limit"] = c.log_limit;
  std::vector<nlohmann::json> repetitions;
  std::int64_t operations = 0, admitted = 0;
  for (const CaseRun& run : runs) {
    nlohmann::json figures = latency_figures(run.measurement.latency);
    figures["ops_per_s"] = ops_per_second(run.measurement);
    // The bench process's CPU time per operation while measuring (SQLite's cases: all of it).
    if (c.setting != Setting::postgresql && run.measurement.operations > 0) {
      figures["cpu_us_per_op"] = run.measurement.cpu_ns / 1e3 / run.measurement.operations;
    }
    figures["peak_rss_kib"] = run.peak_rss_kib;
    repetitions.push_back(figures);
    operations += run.measurement.operations;
    admitted += run.measurement.admitted;
  }
  json.update(medians(repetitions));
  json["operations"] = operations;
  json["allowed_share"] = operations ? static_cast<double>(admitted) / operations : 0.0;

  // Ratios of time per operation, repetition by repetition.
  const References references = references_of(c, scale);
  nlohmann::json ratios = nlohmann::json::object();
  auto ratio = [&](const char* key, const std::string& reference, bool rss = false) {
    const auto found = by_name.find(reference);
    if (reference.empty() || found == by_name.end()) return;
    std::vector<double> values;
    for (std::size_t i = 0; i < runs.size() && i < found->second.size(); ++i) {
      const CaseRun& base = found->second[i];
      values.push_back(rss ? static_cast<double>(runs[i].peak_rss_kib) / base.peak_rss_kib
                           : ops_per_second(base.measurement) /
                                 ops_per_second(runs[i].measurement));
    }
    ratios[key] = median(values);
  };
  ratio("upsert", references.upsert);
  ratio("upsert_text", references.upsert_text);
  ratio("point_select", references.select);
  ratio("point_select_text", references.select_text);
  ratio("short_log", references.short_log);
  ratio("plain", references.plain);
  // A server's memory is not the client process's: no RSS ratio on PostgreSQL.
  if (c.setting != Setting::postgresql) ratio("rss", references.upsert, true);
  json["ratios"] = ratios;
  json["reference"] = references.upsert;
  json["repetitions"] = repetitions;
  return json;
}

nlohmann::json contention_json(BusyWait wait, const std::vector<ContentionRun>& runs) {
  std::vector<nlohmann::json> repetitions;
  bool exact = true;
  std::int64_t failures = 0;
  for (const ContentionRun& run : runs) {
    Histogram both = run.process[0].latency;
    both.merge(run.process[1].latency);
    const std::int64_t operations = run.process[0].operations + run.process[1].operations;
    const std::int64_t failed = run.process[0].failures + run.process[1].failures;
    const std::int64_t admitted = run.process[0].admitted + run.process[1].admitted;
    const std::int64_t expected = std::min(operations - failed, run.maximum);
    nlohmann::json figures = latency_figures(both);
    const double seconds = std::max(run.process[0].elapsed_ns, run.process[1].elapsed_ns) / 1e9;
    figures["ops_per_s"] = seconds > 0 ? operations / seconds : 0.0;
    nlohmann::json processes = nlohmann::json::array();
    double smallest_share = 1;
    for (int i = 0; i < 2; ++i) {
      const Measurement& m = run.process[i];
      const double share = operations ? static_cast<double>(m.operations) / operations : 0;
      smallest_share = std::min(smallest_share, share);
      nlohmann::json process = latency_figures(m.latency);
      process["operations"] = m.operations;
      process["share"] = share;
      process["admitted"] = m.admitted;
      process["failures"] = m.failures;
      process["peak_rss_kib"] = run.peak_rss_kib[i];
      processes.push_back(process);
    }
    figures["smallest_share"] = smallest_share;
    figures["operations"] = operations;
    figures["admitted"] = admitted;
    figures["expected_admitted"] = expected;
    figures["failures"] = failed;
    figures["peak_rss_kib"] = std::max(run.peak_rss_kib[0], run.peak_rss_kib[1]);
    figures["processes"] = processes;
    exact = exact && admitted == expected;
    failures += failed;
    repetitions.push_back(figures);
  }
  nlohmann::json json = {{"name", std::string("contention/") + busy_wait_name(wait)},
                         {"busy_wait", busy_wait_name(wait)},
                         {"limit_maximum", runs.front().maximum}};
  json.update(medians(repetitions));
  json["exact"] = exact;
  json["failures"] = failures;
  json["repetitions"] = repetitions;
  return json;
}

// One algorithm's exactness runs: admitted must be min(operations answered, maximum), and the
// owner's state must count exactly what was admitted.
nlohmann::json exact_json(quota::Algorithm algorithm, const std::vector<Measurement>& runs,
                          std::int64_t maximum) {
  nlohmann::json repetitions = nlohmann::json::array();
  bool exact = true;
  for (const Measurement& m : runs) {
    const std::int64_t expected = std::min(m.operations - m.failures, maximum);
    const bool this_exact = m.admitted == expected && m.recorded == m.admitted;
    exact = exact && this_exact;
    repetitions.push_back({{"operations", m.operations},
                           {"admitted", m.admitted},
                           {"expected_admitted", expected},
                           {"recorded", m.recorded},
                           {"failures", m.failures},
                           {"exact", this_exact}});
  }
  return {{"name", exact_name(algorithm)},
          {"algorithm", quota::to_string(algorithm)},
          {"clients", kPostgresqlClients},
          {"limit_maximum", maximum},
          {"exact", exact},
          {"repetitions", repetitions}};
}

// ---------------------------------------------------------------------------------------

class WorkDir {
 public:
  explicit WorkDir(const std::optional<std::string>& given) {
    if (given) {
      path_ = *given;
      std::filesystem::create_directories(path_);
      return;
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "quota-bench-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary directory");
    path_ = pattern;
    temporary_ = true;
  }
  ~WorkDir() {
    std::error_code ignored;
    if (temporary_) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool temporary_ = false;
};

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  if (!file) usage_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

int run(const Config& config) {
  if (config.report) {
    std::ifstream file(*config.report);
    if (!file) usage_error("cannot read " + *config.report);
    nlohmann::json saved = nlohmann::json::parse(file);
    saved["targets"] = evaluate_targets(saved);  // as this build evaluates them
    if (saved.contains("postgresql") && saved["postgresql"].contains("cases")) {
      saved["postgresql"]["targets"] = evaluate_postgresql_targets(saved);
    }
    std::cout << (config.markdown ? render_markdown(saved) : render_text(saved));
    return 0;
  }
  Scale scale;
  Budget budget;
  budget.duration = std::chrono::nanoseconds(static_cast<std::int64_t>(config.duration_s * 1e9));
  int repetitions = config.repetitions;
  if (config.quick) {
    scale = {1000, 2000, 1000, 10, 10, 200};
    budget.duration = std::chrono::milliseconds(10);
    budget.warmup = std::chrono::milliseconds(2);
    repetitions = 1;
  }
  const std::vector<Case> everything = all_cases(scale);
  std::vector<Case> cases = select_cases(everything, scale, config.filters);
  std::vector<quota::Algorithm> exactness;
  for (auto algorithm : kAlgorithms) {
    if (selected(exact_name(algorithm), config.filters)) exactness.push_back(algorithm);
  }
  const auto on_postgresql = [](const Case& c) { return c.setting == Setting::postgresql; };
  const bool wants_postgresql =
      !exactness.empty() || std::any_of(cases.begin(), cases.end(), on_postgresql);
  if (!config.postgres) {
    cases.erase(std::remove_if(cases.begin(), cases.end(), on_postgresql), cases.end());
    exactness.clear();
  }
  const std::vector<BusyWait> contention = [&] {
    std::vector<BusyWait> waits;
    for (BusyWait wait : {BusyWait::sqlite_busy_timeout, BusyWait::engine}) {
      if (selected(std::string("contention/") + busy_wait_name(wait), config.filters)) {
        waits.push_back(wait);
      }
    }
    return waits;
  }();
  if (config.groups) {
    const WorkDir work_dir(config.work_dir);
    return run_groups(work_dir.path(), config.postgres, budget, repetitions);
  }
  if (config.list) {
    for (const Case& c : everything) std::cout << c.name() << "\n";
    for (auto algorithm : kAlgorithms) std::cout << exact_name(algorithm) << "\n";
    for (BusyWait wait : {BusyWait::sqlite_busy_timeout, BusyWait::engine}) {
      std::cout << "contention/" << busy_wait_name(wait) << "\n";
    }
    return 0;
  }
  if (config.count_case) {
    // Every refusal (usage_error exits) before the work directory exists, so none is left.
    const auto found = std::find_if(everything.begin(), everything.end(),
                                    [&](const Case& c) { return c.name() == *config.count_case; });
    if (found == everything.end()) usage_error("no case '" + *config.count_case + "' (see --list)");
    if (found->setting == Setting::postgresql) {
      usage_error("--count-instructions counts the SQLite cases only, not '" + *config.count_case +
                  "'");
    }
    const std::optional<Replacement> replacement =
        config.statement ? std::optional<Replacement>({config.setup ? read_text(*config.setup) : "",
                                                       read_text(*config.statement)})
                         : std::nullopt;
    const WorkDir work_dir(config.work_dir);
    count_case(*found, Templates(work_dir.path(), config.file), config.operations,
               replacement ? &*replacement : nullptr);
    return 0;
  }

  const WorkDir work_dir(config.work_dir);
  const Templates templates(work_dir.path(), config.file);
  PostgresqlScale postgresql_scale;
  if (config.quick) postgresql_scale = {scale.owners, 100, 25};
  std::unique_ptr<PostgresqlBench> postgresql;
  if (!config.postgres) {
    if (wants_postgresql) {
      std::cerr << "quota-bench: the PostgreSQL cases are skipped: no --postgres URI given\n";
    }
  } else if (wants_postgresql && !config.prepare) {
    postgresql = std::make_unique<PostgresqlBench>(*config.postgres, postgresql_scale);
  }

  // Templates first, each built in a child so that the parent stays small.
  const std::string load_before = load_average();
  const auto started = std::chrono::steady_clock::now();
  for (const Case& c : cases) {
    if (c.setting == Setting::postgresql) continue;  // PostgresqlBench made its schema
    const Measurement built = in_child(
        [&] {
          templates.prepare(c);
          return Measurement{};
        },
        nullptr);
    if (built.error[0]) throw std::runtime_error(c.name() + ": " + built.error);
  }
  if (config.prepare) return 0;

  std::map<std::string, std::vector<CaseRun>> by_name;
  std::map<BusyWait, std::vector<ContentionRun>> contended;
  std::map<quota::Algorithm, std::vector<Measurement>> exact_runs;
  int postgresql_sequence = 0;
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    std::vector<Case> order = cases;
    if (repetition % 2) std::reverse(order.begin(), order.end());
    for (const Case& c : order) {
      CaseRun run;
      if (c.setting == Setting::postgresql) {
        const int sequence = postgresql_sequence++;
        run.measurement =
            in_child([&] { return postgresql->run(c, budget, sequence); }, &run.peak_rss_kib);
      } else {
        run.measurement =
            in_child([&] { return run_case(c, templates, budget, repetition); }, &run.peak_rss_kib);
      }
      if (run.measurement.error[0])
        throw std::runtime_error(c.name() + ": " + run.measurement.error);
      std::cerr << "[" << repetition + 1 << "/" << repetitions << "] " << c.name() << ": "
                << static_cast<long>(ops_per_second(run.measurement)) << " ops/s\n";
      by_name[c.name()].push_back(run);
    }
    for (BusyWait wait : contention) {
      Budget contended_budget = budget;
      contended_budget.duration *= 2;
      contended[wait].push_back(
          run_contention(wait, work_dir.path(), contended_budget, scale.contention_maximum));
      std::cerr << "[" << repetition + 1 << "/" << repetitions << "] contention/"
                << busy_wait_name(wait) << "\n";
    }
    for (auto algorithm : exactness) {
      const Measurement m =
          in_child([&] { return postgresql->run_exact(algorithm, kPostgresqlClients, repetition); },
                   nullptr);
      if (m.error[0]) throw std::runtime_error(exact_name(algorithm) + ": " + m.error);
      std::cerr << "[" << repetition + 1 << "/" << repetitions << "] " << exact_name(algorithm)
                << ": " << m.admitted << " of " << m.operations << " admitted\n";
      exact_runs[algorithm].push_back(m);
    }
  }

  nlohmann::json result;
  result["machine"] = describe_machine(QUOTA_BENCH_BUILD_TYPE);
  result["machine"]["load_average_before"] = load_before;
  result["machine"]["load_average_after"] = load_average();
  result["run"] = {
      {"quick", config.quick},
      {"duration_s", std::chrono::duration<double>(budget.duration).count()},
      {"repetitions", repetitions},
      {"filters", config.filters},
      {"page_size", config.file.page_size},
      {"pragmas", config.file.pragmas},
      {"memstatus", config.memstatus},
      {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
      {"scale",
       {{"owners", scale.owners},
        {"large_owners", scale.large_owners},
        {"log_limits", {scale.short_log, scale.long_log}},
        {"log_owners", scale.log_owners}}}};
  result["cases"] = nlohmann::json::array();
  nlohmann::json postgresql_cases = nlohmann::json::array();
  for (const Case& c : cases) {
    (c.setting == Setting::postgresql ? postgresql_cases : result["cases"])
        .push_back(case_json(c, by_name.at(c.name()), by_name, scale));
  }
  if (postgresql) {
    result["postgresql"] = postgresql->server();
    result["postgresql"]["scale"] = {{"owners", postgresql_scale.owners},
                                     {"clients", kPostgresqlClients},
                                     {"exact_maximum", postgresql_scale.exact_maximum},
                                     {"exact_per_client", postgresql_scale.exact_per_client}};
    result["postgresql"]["cases"] = postgresql_cases;
    result["postgresql"]["exact"] = nlohmann::json::array();
    for (auto algorithm : exactness) {
      result["postgresql"]["exact"].push_back(
          exact_json(algorithm, exact_runs[algorithm], postgresql_scale.exact_maximum));
    }
  } else {
    result["postgresql"] = {
        {"skipped", config.postgres ? "no PostgreSQL case selected" : "no --postgres URI given"}};
  }
  result["contention"] = nlohmann::json::array();
  for (BusyWait wait : contention)
    result["contention"].push_back(contention_json(wait, contended[wait]));
  result["targets"] = evaluate_targets(result);
  if (postgresql) result["postgresql"]["targets"] = evaluate_postgresql_targets(result);

  if (config.out) std::ofstream(*config.out) << result.dump(2) << "\n";
  if (config.json) {
    std::cout << result.dump(2) << "\n";
  } else {
    std::cout << (config.markdown ? render_markdown(result) : render_text(result));
  }
  return 0;
}

}  // namespace
}  // namespace quota_bench

int main(int argc, char** argv) {
  try {
    const quota_bench::Config config = quota_bench::parse(argc, argv);
    if (!config.memstatus && sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK) {
      throw std::runtime_error("SQLite refused SQLITE_CONFIG_MEMSTATUS: it had started already");
    }
    quota_bench::check_pragmas_known(config.file);
    return quota_bench::run(config);
  } catch (const std::exception& error) {
    std::cerr << "quota-bench: error: " << error.what() << "\n";
    return 1;
  }
}
