// `quotactl sql consume|record|acquire NAME --key` (SPEC §14): the keyed protocol's statements,
// the library's own texts in order, run by a plain client (the SQLite C API, libpq) in one
// transaction on a real key on every backend: the first request decides, a repeat replays,
// another cost or operation with the key conflicts, with the same answers as the library's.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "backend.h"
#include "idempotency.h"
#include "quota/admin.h"
#include "support/quotactl_run.h"

#if QUOTA_HAS_POSTGRESQL
#include <libpq-fe.h>
#endif
#include <sqlite3.h>

namespace quota::test {
namespace {

using std::chrono::milliseconds;
using Text = std::optional<std::string>;
using Rows = std::vector<std::vector<std::string>>;

constexpr std::int64_t T = 1'700'000'000'000;
constexpr std::int64_t kKeyTtl = 86'400'000;  // Options::idempotency_ttl's default

bool is_integer(const std::string& text) {
  const std::size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  return text.size() > start && text.find_first_not_of("0123456789", start) == std::string::npos;
}

// A plain client on one connection: runs a statement with its parameters in order (SQLite: the
// keyed statements' ?1, ?2, ..., the request statement's :limit, :owner, :cost, :now;
// PostgreSQL: $1, $2, ...), and says how many rows a write changed.
class Client {
 public:
  explicit Client(const TestDatabase& database) : postgresql_(database.backend() == Backend::postgresql) {
    if (!postgresql_) {
      REQUIRE(sqlite3_open(database.location().c_str(), &sqlite_) == SQLITE_OK);
      sqlite3_busy_timeout(sqlite_, 5000);
      return;
    }
#if QUOTA_HAS_POSTGRESQL
    pg_ = PQconnectdb(database.location().c_str());
    REQUIRE(PQstatus(pg_) == CONNECTION_OK);
#endif
  }
  ~Client() {
    if (sqlite_) sqlite3_close(sqlite_);
#if QUOTA_HAS_POSTGRESQL
    if (pg_) PQfinish(pg_);
#endif
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  std::int64_t changes = 0;  // rows the last statement changed

  Rows run(const std::string& sql, const std::vector<Text>& values, bool named = false) {
    Rows rows;
    if (!postgresql_) {
      sqlite3_stmt* statement = nullptr;
      INFO(sql);
      REQUIRE(sqlite3_prepare_v2(sqlite_, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK);
      const char* names[] = {":limit", ":owner", ":cost", ":now"};
      for (std::size_t i = 0; i < values.size(); ++i) {
        const int index = named ? sqlite3_bind_parameter_index(statement, names[i])
                                : static_cast<int>(i) + 1;
        REQUIRE(index > 0);
        if (values[i] && is_integer(*values[i])) {
          // As a client binds its numbers: (?5 <> 0) compares an integer, never a text.
          sqlite3_bind_int64(statement, index, std::stoll(*values[i]));
        } else if (values[i]) {
          sqlite3_bind_text(statement, index, values[i]->c_str(), -1, SQLITE_TRANSIENT);
        } else {
          sqlite3_bind_null(statement, index);
        }
      }
      int status;
      while ((status = sqlite3_step(statement)) == SQLITE_ROW) {
        std::vector<std::string> row;
        for (int c = 0; c < sqlite3_column_count(statement); ++c) {
          const auto* text = sqlite3_column_text(statement, c);
          row.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
        }
        rows.push_back(std::move(row));
      }
      INFO(sqlite3_errmsg(sqlite_));
      CHECK(status == SQLITE_DONE);
      sqlite3_finalize(statement);
      changes = sqlite3_changes(sqlite_);
      return rows;
    }
#if QUOTA_HAS_POSTGRESQL
    std::vector<const char*> texts;
    for (const Text& value : values) texts.push_back(value ? value->c_str() : nullptr);
    // The request statement typed as psql's PREPARE of `quotactl sql` types it; the keyed
    // statements' types are inferred from their columns.
    const std::vector<Oid> request_types = {25, 25, 20, 20};
    PGresult* result = PQexecParams(pg_, sql.c_str(), static_cast<int>(texts.size()),
                                    named ? request_types.data() : nullptr, texts.data(), nullptr,
                                    nullptr, 0);
    INFO(sql);
    INFO(PQresultErrorMessage(result));
    REQUIRE((PQresultStatus(result) == PGRES_TUPLES_OK ||
             PQresultStatus(result) == PGRES_COMMAND_OK));
    for (int r = 0; r < PQntuples(result); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < PQnfields(result); ++c) {
        const std::string text = PQgetisnull(result, r, c) ? "NULL" : PQgetvalue(result, r, c);
        row.push_back(text == "t" ? "1" : text == "f" ? "0" : text);
      }
      rows.push_back(std::move(row));
    }
    const char* tuples = PQcmdTuples(result);
    changes = *tuples ? std::stoll(tuples) : 0;
    PQclear(result);
#endif
    return rows;
  }

  void exec(const std::string& sql) { run(sql, {}); }

  bool postgresql() const { return postgresql_; }

 private:
  bool postgresql_;
  sqlite3* sqlite_ = nullptr;
#if QUOTA_HAS_POSTGRESQL
  PGconn* pg_ = nullptr;
#endif
};

// What the protocol answered: "decided", "replayed" or "conflict", and the answer's allowed,
// reason, remaining, retry_after_ms, reset_at_ms, denied, shadow_denied.
struct Answer {
  std::string outcome;
  std::vector<std::string> fields;
  std::string lease = "NULL";  // an acquire's lease id ("NULL": none taken)
};

// Runs `steps` as docs/sql.md and each step's `then` say, in one transaction.
Answer run_protocol(Client& client, const std::vector<admin::KeyedStep>& steps,
                    const std::string& operation, const std::string& limit,
                    const std::string& owner, const std::string& key, std::int64_t cost,
                    std::int64_t now) {
  REQUIRE(steps.size() == 4);
  const std::string request = admin::keyed_request_text(operation, cost);
  const std::string at = std::to_string(now);
  client.exec(client.postgresql() ? "BEGIN" : "BEGIN IMMEDIATE");
  Rows rows = client.run(steps[0].sql, {limit, owner, key, at});
  if (!rows.empty()) {
    client.exec("ROLLBACK");
    if (rows[0][0] != request) return {"conflict", {}};
    return {"replayed", std::vector<std::string>(rows[0].begin() + 2, rows[0].begin() + 9),
            rows[0][9]};
  }
  client.run(steps[1].sql, {limit, owner, key, request, std::to_string(now + kKeyTtl), at});
  REQUIRE(client.changes == 1);
  rows = client.run(steps[2].sql, {limit, owner, std::to_string(cost), at}, true);
  REQUIRE(rows.size() == 1);
  const std::vector<std::string> fields(rows[0].begin(), rows[0].begin() + 7);
  // An acquire's row ends with its lease and expires_at_ms (NULL: none taken).
  const bool leased = operation == "acquire" && rows[0].size() >= 9 && rows[0][7] != "NULL";
  const Text lease = leased ? Text(rows[0][7]) : std::nullopt;
  const Text expires = leased ? Text(rows[0][8]) : std::nullopt;
  client.run(steps[3].sql, {limit, owner, key, std::nullopt, fields[0], fields[1], fields[2],
                            fields[3], fields[4], fields[5], fields[6], lease, expires});
  REQUIRE(client.changes == 1);
  client.exec("COMMIT");
  return {"decided", fields, leased ? rows[0][7] : "NULL"};
}

// The library's answer in the same shape.
Answer library(const std::function<Result()>& call) {
  try {
    const Result result = call();
    return {result.replayed ? "replayed" : "decided",
            {result.allowed ? "1" : "0", std::string(to_string(result.reason)),
             std::to_string(result.remaining), std::to_string(result.retry_after_ms),
             std::to_string(result.reset_at_ms), std::to_string(result.denied),
             result.shadow_denied ? "1" : "0"}};
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::idempotency_conflict);
    return {"conflict", {}};
  }
}

TEST_CASE("the keyed protocol that quotactl sql --key prints answers as the library does",
          "[sql][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.engine.define(make_limit("send", Algorithm::fixed_window, 2, 3'600'000));
  Limit uploads;
  uploads.name = "uploads";
  uploads.algorithm = Algorithm::concurrency;
  uploads.maximum = 1;
  uploads.period = milliseconds(60'000);
  f.engine.define(uploads);
  const admin::Dialect dialect =
      backend == Backend::postgresql ? admin::Dialect::postgresql : admin::Dialect::sqlite;
  Client client(f.database);

  struct Request {
    std::string operation;  // consume, record, acquire
    std::string limit;
    std::string key;
    std::int64_t cost;
    std::int64_t at;
    std::string outcome;  // what both must answer
  };
  const std::vector<Request> requests{
      {"consume", "send", "k1", 1, T, "decided"},
      {"consume", "send", "k1", 1, T + 10, "replayed"},
      {"consume", "send", "k1", 2, T + 20, "conflict"},   // another cost
      {"record", "send", "k1", 1, T + 30, "conflict"},    // another operation
      {"consume", "send", "k2", 1, T + 40, "decided"},    // the last unit
      {"consume", "send", "k3", 1, T + 50, "decided"},    // denied, and stored
      {"consume", "send", "k3", 1, T + 60, "replayed"},   // the denial again, not counted
      {"record", "send", "r1", 5, T + 70, "decided"},
      {"record", "send", "r1", 5, T + 80, "replayed"},
      {"acquire", "uploads", "a1", 1, T + 90, "decided"},
      {"acquire", "uploads", "a1", 1, T + 100, "replayed"},
      {"acquire", "uploads", "a2", 1, T + 110, "decided"},  // full: rate_limited
  };
  std::map<std::string, std::string> leases;  // key -> the lease its first acquire took
  for (const Request& r : requests) {
    CAPTURE(r.operation, r.key, r.cost, r.at);
    const Algorithm algorithm = r.limit == "send" ? Algorithm::fixed_window : Algorithm::concurrency;
    const std::vector<admin::KeyedStep> steps =
        admin::keyed_statements(dialect, r.operation, algorithm);
    // The library on owner "e", the plain client on owner "p", the same requests at the same
    // times.
    f.clock.set(r.at);
    const Answer expected = library([&]() -> Result {
      if (r.operation == "acquire") return f.engine.acquire_lease(r.limit, "e", r.cost, r.key);
      return r.operation == "record" ? f.engine.record(r.limit, "e", r.cost, r.key)
                                     : f.engine.consume(r.limit, "e", r.cost, r.key);
    });
    const Answer plain = run_protocol(client, steps, r.operation, r.limit, "p", r.key, r.cost, r.at);
    CHECK(expected.outcome == r.outcome);
    CHECK(plain.outcome == expected.outcome);
    CHECK(plain.fields == expected.fields);
    // A replayed acquire answers the first one's lease.
    if (r.operation == "acquire" && plain.outcome == "decided") leases[r.key] = plain.lease;
    if (r.operation == "acquire" && plain.outcome == "replayed") {
      CHECK(plain.lease != "NULL");
      CHECK(plain.lease == leases[r.key]);
    }
  }
  // Both charged the same: the replays and conflicts nothing.
  CHECK(f.engine.owner_usage("send", "p").used == f.engine.owner_usage("send", "e").used);
  CHECK(f.engine.owner_usage("send", "p").denied == 1);
  CHECK(f.database.integer("SELECT count(*) FROM quota_leases WHERE owner = 'p'") == 1);
}

TEST_CASE("quotactl sql --key prints the library's keyed statements, in order", "[sql][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase db(backend);
  const auto quotactl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", db.location()});
    return run_quotactl(args);
  };
  REQUIRE(quotactl({"migrate"}).status == 0);
  REQUIRE(quotactl({"limit", "set", "send", "--max", "2", "--per", "1h", "--algo",
                    "fixed_window"}).status == 0);
  const admin::Dialect dialect =
      backend == Backend::postgresql ? admin::Dialect::postgresql : admin::Dialect::sqlite;

  const QuotactlRun json = quotactl({"--json", "sql", "consume", "send", "--key"});
  INFO(json.err);
  REQUIRE(json.status == 0);
  const nlohmann::json document = json.document();
  const std::vector<admin::KeyedStep> steps =
      admin::keyed_statements(dialect, "consume", Algorithm::fixed_window);
  REQUIRE(document["steps"].size() == 4);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(document["steps"][i]["step"] == steps[i].name);
    CHECK(document["steps"][i]["sql"] == steps[i].sql);
    CHECK(document["steps"][i]["parameters"] == steps[i].parameters);
    CHECK(document["steps"][i]["then"] == steps[i].then);
  }
  // The texts are the library's own: src/idempotency.h's, and the request's statement.
  const std::string find_key = document["steps"][0]["sql"];
  CHECK(find_key == (backend == Backend::postgresql ? detail::dollar_parameters(detail::kFindKey)
                                                     : std::string(detail::kFindKey)));
  CHECK(document["steps"][2]["sql"] ==
        admin::statement(dialect, "consume", Algorithm::fixed_window));

  // The readable text holds each statement, with what to do with its answer.
  const QuotactlRun text = quotactl({"sql", "record", "send", "--key"});
  REQUIRE(text.status == 0);
  for (const admin::KeyedStep& step :
       admin::keyed_statements(dialect, "record", Algorithm::fixed_window)) {
    CHECK_THAT(text.out, Catch::Contains(step.sql) && Catch::Contains("-- then: " + step.then.substr(0, 40)));
  }
  CHECK_THAT(text.out, Catch::Contains(backend == Backend::postgresql ? "BEGIN;" : "BEGIN IMMEDIATE;") &&
                           Catch::EndsWith("COMMIT;\n"));

  // --key with another operation is refused, exit 2, saying what to do.
  for (const char* operation : {"check", "reset", "refund", "renew", "release"}) {
    CAPTURE(operation);
    const QuotactlRun refused = quotactl({"sql", operation, "--key"});
    CHECK(refused.status == 2);
    CHECK_THAT(refused.err, Catch::Contains("--key works with consume, record and acquire"));
    CHECK(refused.out.empty());
  }
}

}  // namespace
}  // namespace quota::test
