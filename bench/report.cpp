// The report of a run: the machine it ran on, the targets of the benchmark and the tables,
// all from the run's JSON (so that a saved run can be rendered again: --report FILE).
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/utsname.h>

#include <ctime>
#include <fstream>
#include <functional>
#include <thread>

#include "bench.h"

namespace quota_bench {
namespace {

using nlohmann::json;

const json* find_named(const json& list, const std::string& name) {
  for (const json& item : list) {
    if (item.at("name") == name) return &item;
  }
  return nullptr;
}

// One target: `figures` are (label, value) pairs; met when every value is within `bound`.
json target(const std::string& measure, const std::string& goal,
            const std::vector<std::pair<std::string, const json*>>& figures,
            const std::function<double(const json&)>& value, double bound, bool at_most,
            const char* format) {
  std::string shown;
  bool met = true, measured = !figures.empty();
  for (const auto& [label, item] : figures) {
    if (!shown.empty()) shown += ", ";
    if (!item) {
      measured = false;
      shown += label + " not measured";
      continue;
    }
    const double v = value(*item);
    met = met && (at_most ? v <= bound : v >= bound);
    shown += label + " " +
             (std::string_view(format) == "yes/no" ? (v != 0 ? "yes" : "no")
                                                   : fmt::format(fmt::runtime(format), v));
  }
  json row = {{"measure", measure}, {"target", goal}, {"figures", shown}};
  row["met"] = measured ? json(met) : json(nullptr);
  return row;
}

std::function<double(const json&)> ratio_of(const char* key) {
  return [key](const json& item) { return item.at("ratios").value(key, 0.0); };
}

std::string owners_label(std::int64_t owners) {
  return owners >= 1'000'000 && owners % 1'000'000 == 0 ? fmt::format("{}M", owners / 1'000'000)
                                                        : fmt::format("{}", owners);
}

// ---------------------------------------------------------------------------------------
// Tables: rows of cells, printed aligned for a terminal or as Markdown.

using Table = std::vector<std::vector<std::string>>;

std::string number(const json& item, const char* key, const char* format) {
  if (!item.contains(key) || !item.at(key).is_number()) return "";
  return fmt::format(fmt::runtime(format), item.at(key).get<double>());
}

std::string ops(const json& item) {
  const double value = item.value("ops_per_s", 0.0);
  return value >= 10'000 ? fmt::format("{:.1f}k", value / 1000) : fmt::format("{:.0f}", value);
}

Table cases_table(const json& run) {
  Table table = {{"case", "ops/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "RSS MiB", "× upsert",
                  "× text upsert", "× point SELECT", "× limit 10", "× plain", "× RSS"}};
  for (const json& item : run.at("cases")) {
    const json& ratios = item.at("ratios");
    table.push_back({item.at("name").get<std::string>(), ops(item),
                     number(item, "p50_us", "{:.1f}"), number(item, "p99_us", "{:.1f}"),
                     number(item, "p999_us", "{:.1f}"), number(item, "max_us", "{:.0f}"),
                     fmt::format("{:.1f}", item.value("peak_rss_kib", 0.0) / 1024),
                     number(ratios, "upsert", "{:.2f}"), number(ratios, "upsert_text", "{:.2f}"),
                     number(ratios, "point_select", "{:.2f}"),
                     number(ratios, "short_log", "{:.2f}"), number(ratios, "plain", "{:.2f}"),
                     number(ratios, "rss", "{:.2f}")});
  }
  return table;
}

Table contention_table(const json& run) {
  Table table = {{"two processes, one owner", "ops/s", "smaller share", "p50 µs", "p99 µs",
                  "p99.9 µs", "max µs", "admitted (last run)", "exact (every run)"}};
  for (const json& item : run.at("contention")) {
    const json& last = item.at("repetitions").back();
    table.push_back(
        {item.at("busy_wait").get<std::string>(), ops(item),
         fmt::format("{:.1f} %", 100 * item.value("smallest_share", 0.0)),
         number(item, "p50_us", "{:.1f}"), number(item, "p99_us", "{:.1f}"),
         number(item, "p999_us", "{:.1f}"), number(item, "max_us", "{:.0f}"),
         fmt::format("{} of {} operations", last.value("admitted", 0), last.value("operations", 0)),
         item.value("exact", false) ? "yes" : "NO"});
  }
  return table;
}

Table targets_table(const json& run) {
  Table table = {{"measure", "target", "figures", "met"}};
  for (const json& row : run.at("targets")) {
    const json& met = row.at("met");
    table.push_back({row.at("measure").get<std::string>(), row.at("target").get<std::string>(),
                     row.at("figures").get<std::string>(),
                     met.is_null() ? "not measured" : (met.get<bool>() ? "met" : "MISSED")});
  }
  return table;
}

// The PostgreSQL cases: ratios to the bare text-key upsert (and point SELECT) with as many
// clients on as many owners.
Table postgresql_table(const json& postgresql) {
  Table table = {{"case", "clients", "ops/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs",
                  "× bare upsert", "× bare SELECT", "allowed"}};
  for (const json& item : postgresql.at("cases")) {
    const json& ratios = item.at("ratios");
    table.push_back({item.at("name").get<std::string>(),
                     fmt::format("{}", item.value("clients", 1)), ops(item),
                     number(item, "p50_us", "{:.0f}"), number(item, "p99_us", "{:.0f}"),
                     number(item, "p999_us", "{:.0f}"), number(item, "max_us", "{:.0f}"),
                     number(ratios, "upsert", "{:.2f}"), number(ratios, "point_select", "{:.2f}"),
                     item.contains("algorithm")
                         ? fmt::format("{:.1f} %", 100 * item.value("allowed_share", 0.0))
                         : ""});
  }
  return table;
}

Table exact_table(const json& postgresql) {
  Table table = {{"one owner, small limit", "clients", "limit", "admitted (last run)",
                  "state counts (last run)", "exact (every run)"}};
  for (const json& item : postgresql.at("exact")) {
    const json& last = item.at("repetitions").back();
    table.push_back(
        {item.at("algorithm").get<std::string>(), fmt::format("{}", item.value("clients", 0)),
         fmt::format("{}", item.value("limit_maximum", 0)),
         fmt::format("{} of {} operations", last.value("admitted", 0), last.value("operations", 0)),
         fmt::format("{}", last.value("recorded", -1)), item.value("exact", false) ? "yes" : "NO"});
  }
  return table;
}

// Display width: µ and × are one column each but two bytes in UTF-8.
std::size_t width(const std::string& text) {
  std::size_t columns = 0;
  for (unsigned char byte : text) columns += (byte & 0xC0) != 0x80;
  return columns;
}

// Columns after the first are right-aligned (numbers) unless `left` is set.
std::string aligned(const Table& table, bool left = false) {
  std::vector<std::size_t> widths(table.front().size(), 0);
  for (const auto& row : table) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], width(row[i]));
  }
  std::string out;
  for (const auto& row : table) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - width(row[i]), ' ');
      line += i == 0 ? row[i] + pad : left ? "  " + row[i] + pad : "  " + pad + row[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string markdown(const Table& table, bool left = false) {
  std::string out;
  for (std::size_t r = 0; r < table.size(); ++r) {
    out += "|";
    for (const std::string& cell : table[r]) out += " " + cell + " |";
    out += "\n";
    if (r == 0) {
      out += "|";
      for (std::size_t i = 0; i < table[r].size(); ++i) out += i == 0 || left ? "---|" : "---:|";
      out += "\n";
    }
  }
  return out;
}

// What --page-size, --pragma and --no-memstatus changed, for the line under the machine;
// empty by default.
std::string settings_note(const json& r) {
  std::string note;
  if (r.value("page_size", 0) != 0)
    note += fmt::format("; templates of {}-byte pages", r.at("page_size").get<int>());
  if (r.contains("pragmas") && !r.at("pragmas").empty()) {
    note += "; on every case's connection";
    for (const json& pragma : r.at("pragmas")) note += " PRAGMA " + pragma.get<std::string>() + ";";
    note.pop_back();
  }
  if (!r.value("memstatus", true)) note += "; SQLITE_CONFIG_MEMSTATUS off";
  return note;
}

std::string machine_line(const json& run) {
  const json& m = run.at("machine");
  const json& r = run.at("run");
  const std::string line = fmt::format(
      "{}, {} cores, {}; SQLite {}{}; {} ({}); load average {} before, {} after; {} s per case, "
      "median of {} repetitions{}",
      m.value("cpu", "?"), m.value("cores", 0), m.value("kernel", "?"), m.value("sqlite", "?"),
      m.value("sqlite_lookaside", false) ? " with lookaside" : "", m.value("compiler", "?"),
      m.value("build_type", "?"), m.value("load_average_before", "?"),
      m.value("load_average_after", "?"), r.value("duration_s", 0.0), r.value("repetitions", 0),
      r.value("quick", false) ? " (--quick: tiny counts, figures mean nothing)" : "");
  return line + settings_note(r);
}

std::string postgresql_line(const json& run) {
  const json& p = run.at("postgresql");
  return fmt::format(
      "PostgreSQL {} over a {}, synchronous_commit {} (server default {}), fsync {}, "
      "wal_sync_method {}, shared_buffers {}; {} owners, {} clients in the multi-client cases",
      p.value("server_version", "?"), p.value("connection", "?"),
      p.value("synchronous_commit", "?"), p.value("synchronous_commit_default", "?"),
      p.value("fsync", "?"), p.value("wal_sync_method", "?"), p.value("shared_buffers", "?"),
      p.at("scale").value("owners", 0), p.at("scale").value("clients", 0));
}

bool has_postgresql(const json& run) {
  return run.contains("postgresql") && run.at("postgresql").contains("cases");
}

bool has_sqlite(const json& run) {
  return !run.at("cases").empty() || !run.at("contention").empty();
}

std::string first_line_of(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

json describe_machine(const std::string& build_type) {
  utsname name{};
  uname(&name);
  char date[32] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("g++ ") + __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {{"cpu", first_line_of("/proc/cpuinfo", "model name")},
          {"cores", std::thread::hardware_concurrency()},
          {"kernel", std::string(name.sysname) + " " + name.release},
          {"sqlite", sqlite3_libversion()},
          {"sqlite_lookaside", sqlite3_compileoption_used("OMIT_LOOKASIDE") == 0},
          {"compiler", compiler},
          {"build_type", build_type},
          {"date", date}};
}

json evaluate_postgresql_targets(const json& run) {
  const json& postgresql = run.at("postgresql");
  const json& cases = postgresql.at("cases");
  const std::int64_t owners = postgresql.at("scale").at("owners");
  const int clients = postgresql.at("scale").at("clients");
  const std::vector<std::string> algorithms = {"sliding_log", "fixed_window", "sliding_window",
                                               "token_bucket"};
  auto per_algorithm = [&](std::int64_t count, int with) {
    std::vector<std::pair<std::string, const json*>> figures;
    for (const std::string& algorithm : algorithms) {
      const std::string suffix = with > 1 ? fmt::format("/{}_clients", with) : "";
      figures.emplace_back(algorithm, find_named(cases, fmt::format("consume/{}/postgresql/{}{}",
                                                                    algorithm, count, suffix)));
    }
    return figures;
  };
  json targets = json::array();
  targets.push_back(target("PostgreSQL consume, every algorithm, 1 client",
                           "≤ 1.3× the bare upsert", per_algorithm(owners, 1), ratio_of("upsert"),
                           1.3, true, "{:.2f}×"));
  targets.push_back(target(fmt::format("PostgreSQL consume, every algorithm, {} clients", clients),
                           "≤ 1.3× the bare upsert", per_algorithm(owners, clients),
                           ratio_of("upsert"), 1.3, true, "{:.2f}×"));
  std::vector<std::pair<std::string, const json*>> exact;
  for (const std::string& algorithm : algorithms) {
    const json* found = nullptr;
    for (const json& item : postgresql.at("exact")) {
      if (item.at("algorithm") == algorithm) found = &item;
    }
    exact.emplace_back(algorithm, found);
  }
  const std::string hot = fmt::format("PostgreSQL, {} clients on one owner", clients);
  targets.push_back(target(
      hot + ": admission", "exact", exact,
      [](const json& item) { return item.value("exact", false) ? 1.0 : 0.0; }, 1, false, "yes/no"));
  targets.push_back(target(
      hot + ": consume's throughput", "≥ 0.8× the bare upsert's", per_algorithm(1, clients),
      [](const json& item) {
        const double ratio = item.at("ratios").value("upsert", 0.0);
        return ratio > 0 ? 1 / ratio : 0.0;
      },
      0.8, false, "{:.2f}×"));
  return targets;
}

json evaluate_targets(const json& run) {
  const json& scale = run.at("run").at("scale");
  const std::int64_t owners = scale.at("owners");
  const std::int64_t large = scale.at("large_owners");
  const json& cases = run.at("cases");
  const std::vector<std::string> algorithms = {"sliding_log", "fixed_window", "sliding_window",
                                               "token_bucket"};
  auto per_algorithm = [&](const std::string& operation, const std::string& setting,
                           std::int64_t count, const std::string& prefix = "") {
    std::vector<std::pair<std::string, const json*>> figures;
    for (const std::string& algorithm : algorithms) {
      figures.emplace_back(
          prefix + algorithm,
          find_named(cases, fmt::format("{}/{}/{}/{}", operation, algorithm, setting, count)));
    }
    return figures;
  };
  json targets = json::array();
  targets.push_back(target("consume, every algorithm, WAL/NORMAL", "≤ 1.15× the bare upsert",
                           per_algorithm("consume", "wal_normal", owners), ratio_of("upsert"), 1.15,
                           true, "{:.2f}×"));
  targets.push_back(target("consume, every algorithm, :memory:", "≤ 1.6× the bare upsert",
                           per_algorithm("consume", "memory", owners), ratio_of("upsert"), 1.6,
                           true, "{:.2f}×"));
  for (const char* setting : {"memory", "wal_normal", "wal_full"}) {
    targets.push_back(target(fmt::format("check, every algorithm, {}", setting),
                             "≤ 1.5× a bare point SELECT", per_algorithm("check", setting, owners),
                             ratio_of("point_select"), 1.5, true, "{:.2f}×"));
  }
  targets.push_back(target(fmt::format("consume at {} owners, WAL/NORMAL", owners_label(large)),
                           fmt::format("≤ 1.2× the bare upsert at {} owners", owners_label(large)),
                           per_algorithm("consume", "wal_normal", large), ratio_of("upsert"), 1.2,
                           true, "{:.2f}×"));
  const std::int64_t short_log = scale.at("log_limits").at(0);
  const std::int64_t long_log = scale.at("log_limits").at(1);
  std::vector<std::pair<std::string, const json*>> logs;
  for (const char* setting : {"memory", "wal_normal"}) {
    logs.emplace_back(
        setting,
        find_named(cases, fmt::format("consume/sliding_log/{}/{}/limit_{}", setting,
                                      scale.at("log_owners").get<std::int64_t>(), long_log)));
  }
  targets.push_back(target(fmt::format("sliding log, limit {} vs limit {}", long_log, short_log),
                           "≤ 1.3×", logs, ratio_of("short_log"), 1.3, true, "{:.2f}×"));
  // Issue 19's cost: a lockout or a calendar period on a limit costs a consume little.
  std::vector<std::pair<std::string, const json*>> variants;
  for (const char* variant : {"block", "calendar"}) {
    for (const char* setting : {"memory", "wal_normal"}) {
      variants.emplace_back(fmt::format("{} {}", variant, setting),
                            find_named(cases, fmt::format("consume/fixed_window/{}/{}/{}", setting,
                                                          owners, variant)));
    }
  }
  targets.push_back(target("consume with a block, with a calendar month",
                           "≤ 1.1× the plain fixed_window consume", variants, ratio_of("plain"),
                           1.1, true, "{:.2f}×"));
  // Issue 27: a batch's request costs less than a lone one.
  std::vector<std::pair<std::string, const json*>> batches;
  for (const char* setting : {"memory", "wal_normal"}) {
    batches.emplace_back(setting, find_named(cases, fmt::format("consume_many/fixed_window/{}/{}",
                                                                setting, owners)));
  }
  targets.push_back(target("consume_many of 100, per request",
                           "≤ 0.8× the lone fixed_window consume", batches, ratio_of("plain"), 0.8,
                           true, "{:.2f}×"));

  const json* engine = find_named(run.at("contention"), "contention/engine");
  const std::vector<std::pair<std::string, const json*>> contended = {{"engine handler", engine}};
  auto figure = [](const char* key) {
    return [key](const json& item) { return item.value(key, 0.0); };
  };
  const std::string two = "two processes, one owner, WAL/NORMAL";
  const std::vector<std::pair<std::string, const json*>> every_run = {
      {"engine handler, exact in every run:", engine}};
  targets.push_back(target(
      two + ": admission", "exact", every_run,
      [](const json& item) { return item.value("exact", false) ? 1.0 : 0.0; }, 1, false, "yes/no"));
  targets.push_back(
      target(two + ": p99", "≤ 300 µs", contended, figure("p99_us"), 300, true, "{:.0f} µs"));
  targets.push_back(
      target(two + ": max", "≤ 20 ms", contended, figure("max_us"), 20'000, true, "{:.0f} µs"));
  targets.push_back(target(
      two + ": each process's share", "≥ 35 %", contended,
      [](const json& item) { return 100 * item.value("smallest_share", 0.0); }, 35, false,
      "{:.1f} % (the smaller)"));

  // Memory: the engine's worst case against the bare upsert of its setting and size. The
  // sliding log held at capacity is left out: its database holds `limit` events per owner (a
  // million at limit 100,000, all in RSS in memory), data that the 1,000-owner upsert has not.
  const json* worst = nullptr;
  for (const json& item : cases) {
    if (!item.contains("algorithm") || item.contains("log_limit") ||
        !item.at("ratios").contains("rss")) {
      continue;
    }
    if (!worst || item.at("ratios").at("rss") > worst->at("ratios").at("rss")) worst = &item;
  }
  std::vector<std::pair<std::string, const json*>> memory;
  if (worst) {
    memory.emplace_back(worst->at("name").get<std::string>() + " (the largest but the long logs)",
                        worst);
  }
  targets.push_back(target("memory: peak RSS of a case", "≤ 2× the bare upsert case's", memory,
                           ratio_of("rss"), 2, true, "{:.2f}×"));
  return targets;
}

// A run of the PostgreSQL cases alone (--filter postgresql) shows only their tables; a run
// without them says why they were skipped.
std::string render_text(const json& run) {
  std::string out = "quota-bench: " + machine_line(run) + "\n\n";
  if (has_sqlite(run)) {
    out += aligned(cases_table(run)) + "\n" + aligned(contention_table(run)) + "\n" +
           aligned(targets_table(run), true);
  }
  if (has_postgresql(run)) {
    const json& postgresql = run.at("postgresql");
    json shown = run;
    shown["targets"] = postgresql.at("targets");
    out += (has_sqlite(run) ? "\n" : "") + postgresql_line(run) + "\n\n" +
           aligned(postgresql_table(postgresql)) + "\n" + aligned(exact_table(postgresql)) + "\n" +
           aligned(targets_table(shown), true);
  } else if (run.contains("postgresql")) {
    out += "\nPostgreSQL cases skipped: " + run.at("postgresql").value("skipped", "?") + "\n";
  }
  return out;
}

std::string render_markdown(const json& run) {
  std::string out = "Machine: " + machine_line(run) + ".\n\n";
  if (has_sqlite(run)) {
    out += markdown(targets_table(run), true) + "\n" + markdown(cases_table(run)) + "\n" +
           markdown(contention_table(run));
  }
  if (has_postgresql(run)) {
    const json& postgresql = run.at("postgresql");
    json shown = run;
    shown["targets"] = postgresql.at("targets");
    out += (has_sqlite(run) ? "\n" : "") + postgresql_line(run) + ".\n\n" +
           markdown(targets_table(shown), true) + "\n" + markdown(postgresql_table(postgresql)) +
           "\n" + markdown(exact_table(postgresql));
  }
  return out;
}

}  // namespace quota_bench
