// Concurrency leases (SPEC §13, include/quota/lease.h) on every backend: acquire, renew,
// release, check, record, reset; expiry by the clock to the millisecond; overrides, shadow
// mode and gc; bad input refused with nothing changed; 8 threads on one owner never holding
// more than the maximum; the statements of `quotactl sql acquire|renew|release` run by a plain
// client answering as the engine; quotactl's lease commands.
#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "quota/admin.h"
#include "quota/lease.h"
#include "quota/policy.h"
#include "sql/lease_statements.h"
#include "statements.h"

#if QUOTA_HAS_POSTGRESQL
#include <libpq-fe.h>
#endif
#include <sqlite3.h>

namespace quota::test {
namespace {

using detail::Operation;
using detail::StatementKind;
using std::chrono::milliseconds;

constexpr std::int64_t T = 1'700'000'000'000;

Limit uploads(std::int64_t maximum = 2, std::int64_t ttl_ms = 10'000) {
  Limit limit;
  limit.name = "uploads";
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = milliseconds(ttl_ms);
  return limit;
}

bool is_lease_id(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The units held now by `owner`'s unexpired leases of "uploads", read from the table itself.
std::int64_t held_in_table(const TestDatabase& database, const std::string& owner,
                           std::int64_t now) {
  return database.integer(
      "SELECT coalesce(sum(cost), 0) FROM quota_leases WHERE limit_name = 'uploads' AND owner = '" +
      owner + "' AND expires_at_ms > " + std::to_string(now));
}

TEST_CASE("acquire takes a lease while it fits; release, renew and expiry free it exactly",
          "[lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(uploads());

  const LeaseResult first = f.engine.acquire_lease("uploads", "u");
  CHECK(first.allowed);
  CHECK(first.reason == Reason::ok);
  CHECK(is_lease_id(first.lease));
  CHECK(first.expires_at_ms == T + 10'000);
  CHECK(first.remaining == 1);
  CHECK(first.retry_after_ms == 0);
  CHECK(first.reset_at_ms == T + 10'000);

  f.clock.set(T + 1000);
  const LeaseResult second = f.engine.acquire_lease("uploads", "u");
  CHECK(second.allowed);
  CHECK(second.lease != first.lease);
  CHECK(second.remaining == 0);
  CHECK(second.reset_at_ms == T + 11'000);
  CHECK(held_in_table(f.database, "u", T + 1000) == 2);

  // Full: the wait is until the first lease expires, tight.
  f.clock.set(T + 2000);
  const LeaseResult denied = f.engine.acquire_lease("uploads", "u");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.reason == Reason::rate_limited);
  CHECK(denied.lease.empty());
  CHECK(denied.retry_after_ms == 8000);
  CHECK(denied.denied == 1);
  CHECK(denied.reset_at_ms == T + 11'000);
  // Two units wait for both leases; three never fit.
  CHECK(f.engine.acquire_lease("uploads", "u", 2).retry_after_ms == 9000);
  const LeaseResult too_big = f.engine.acquire_lease("uploads", "u", 3);
  CHECK(too_big.reason == Reason::cost_exceeds_capacity);
  CHECK(too_big.retry_after_ms == -1);
  // Another owner has its own capacity.
  CHECK(f.engine.acquire_lease("uploads", "v").allowed);

  // The first lease frees its unit at T + 10000 exactly, never earlier.
  f.clock.set(T + 9999);
  CHECK_FALSE(f.engine.check("uploads", "u").allowed);
  CHECK(f.engine.check("uploads", "u").retry_after_ms == 1);
  f.clock.set(T + 10'000);
  const Result check = f.engine.check("uploads", "u");
  CHECK(check.allowed);
  CHECK(check.remaining == 1);
  CHECK(f.engine.owner_usage("uploads", "u").used == 1);
  CHECK(f.engine.owner_usage("uploads", "u").reset_at_ms == T + 11'000);

  // An expired lease cannot be renewed; its release says it was not held.
  const LeaseResult expired = f.engine.renew_lease(first.lease);
  CHECK_FALSE(expired.allowed);
  CHECK(expired.reason == Reason::lease_expired);
  CHECK(expired.retry_after_ms == -1);
  CHECK_FALSE(f.engine.release_lease(first.lease));

  // Renewing moves the expiry to now + TTL (or the TTL given).
  const LeaseResult renewed = f.engine.renew_lease(second.lease);
  CHECK(renewed.allowed);
  CHECK(renewed.lease == second.lease);
  CHECK(renewed.expires_at_ms == T + 20'000);
  CHECK(renewed.reset_at_ms == T + 20'000);
  CHECK(renewed.remaining == 1);
  CHECK(f.engine.renew_lease(second.lease, milliseconds(2000)).expires_at_ms == T + 12'000);
  f.clock.set(T + 11'999);
  CHECK(f.engine.check("uploads", "u").remaining == 1);
  const std::vector<LeaseInfo> listed = f.engine.leases("uploads", std::string_view("u"));
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].lease == second.lease);
  CHECK(listed[0].expires_at_ms == T + 12'000);
  CHECK(listed[0].cost == 1);
  CHECK(f.engine.leases("uploads").size() == 2);  // v's too

  // Release frees at once; twice is harmless.
  CHECK(f.engine.release_lease(second.lease));
  CHECK_FALSE(f.engine.release_lease(second.lease));
  CHECK(f.engine.check("uploads", "u").remaining == 2);
  CHECK(held_in_table(f.database, "u", T + 11'999) == 0);
}

TEST_CASE("record takes the lease over the capacity; reset releases every lease; check is pure",
          "[lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(uploads());
  CHECK(f.engine.acquire_lease("uploads", "u", 2).allowed);
  const std::string before = f.database.dump();
  for (int i = 0; i < 3; ++i) CHECK_FALSE(f.engine.check("uploads", "u").allowed);
  CHECK(f.database.dump() == before);

  const Result over = f.engine.record("uploads", "u");
  CHECK_FALSE(over.allowed);  // usage after recording is over the capacity
  CHECK(over.remaining == 0);
  CHECK(over.retry_after_ms == 10'000);  // both leases must go: all three expire at T + 10000
  CHECK(held_in_table(f.database, "u", T) == 3);

  // consume on a concurrency limit is an acquire (whose id it does not return).
  CHECK(f.engine.acquire_lease("uploads", "w").allowed);
  CHECK(f.engine.consume("uploads", "w").allowed);
  CHECK_FALSE(f.engine.consume("uploads", "w").allowed);

  const Result reset = f.engine.reset("uploads", "u");
  CHECK(reset.allowed);
  CHECK(reset.remaining == 2);
  CHECK(held_in_table(f.database, "u", T) == 0);
  CHECK(f.engine.acquire_lease("uploads", "u", 2).allowed);
  CHECK(held_in_table(f.database, "w", T) == 2);  // another owner keeps its leases
}

TEST_CASE("leases take overrides, shadow mode and gc", "[lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(uploads());

  f.engine.set_override({"uploads", "banned", Policy::deny, std::nullopt, std::nullopt});
  const LeaseResult banned = f.engine.acquire_lease("uploads", "banned");
  CHECK(banned.reason == Reason::owner_denied);
  CHECK(banned.retry_after_ms == -1);
  CHECK(banned.lease.empty());

  f.engine.set_override({"uploads", "ops", Policy::exempt, std::nullopt, std::nullopt});
  for (int i = 0; i < 4; ++i) {
    const LeaseResult exempt = f.engine.acquire_lease("uploads", "ops");
    CHECK(exempt.allowed);
    CHECK(exempt.lease.empty());  // an exempt owner uses no quota
    CHECK(exempt.remaining == 2);
  }

  f.engine.set_override({"*", "big", Policy::maximum, 4, std::nullopt});
  for (int i = 0; i < 4; ++i) CHECK(f.engine.acquire_lease("uploads", "big").allowed);
  CHECK_FALSE(f.engine.acquire_lease("uploads", "big").allowed);

  Limit shadow = uploads(1);
  shadow.shadow = true;
  f.engine.define(shadow);
  CHECK(f.engine.acquire_lease("uploads", "s").lease.size() == 32);
  const LeaseResult would = f.engine.acquire_lease("uploads", "s");
  CHECK(would.allowed);
  CHECK(would.shadow_denied);
  CHECK(would.reason == Reason::rate_limited);
  CHECK(would.lease.empty());
  CHECK(held_in_table(f.database, "s", T) == 1);
  CHECK(f.engine.owner_usage("uploads", "s").shadow_denied == 1);

  // gc: the expired leases go, and the owners left with nothing (and no denials).
  f.clock.set(T + 10'000);
  f.engine.gc();
  CHECK(f.database.integer("SELECT count(*) FROM quota_leases") == 0);
  // ops (exempt, never denied) goes; s keeps its row for its shadow denial, big and banned
  // for their denials.
  CHECK(f.database.integer("SELECT count(*) FROM quota_lease_owners WHERE owner = 'ops'") == 0);
  CHECK(f.database.integer("SELECT count(*) FROM quota_lease_owners WHERE owner = 's'") == 1);
  CHECK(f.database.integer("SELECT count(*) FROM quota_lease_owners WHERE owner = 'big'") == 1);
}

TEST_CASE("a caller whose clock is behind is evaluated at the owner's time and told its own wait",
          "[lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T + 5000);
  f.engine.define(uploads(1));
  const LeaseResult held = f.engine.acquire_lease("uploads", "u");
  CHECK(held.expires_at_ms == T + 15'000);
  // At T, behind the owner's remembered T + 5000: the lease counts, and the wait is from T.
  f.clock.set(T);
  const LeaseResult behind = f.engine.acquire_lease("uploads", "u");
  CHECK_FALSE(behind.allowed);
  CHECK(behind.retry_after_ms == 15'000);
  CHECK(behind.reset_at_ms == T + 15'000);
  f.clock.set(T + 14'999);
  CHECK_FALSE(f.engine.acquire_lease("uploads", "u").allowed);
  f.clock.set(T + 15'000);
  CHECK(f.engine.acquire_lease("uploads", "u").allowed);
}

TEST_CASE("bad lease input is refused and changes nothing", "[lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(uploads());
  f.engine.define(make_limit("rate", Algorithm::fixed_window, 5, 1000));
  const LeaseResult held = f.engine.acquire_lease("uploads", "u");
  const std::string before = f.database.dump();
  auto refused = [&](auto&& call, ErrorCode code, const std::string& words) {
    try {
      call();
      FAIL("not refused");
    } catch (const Error& error) {
      CHECK(error.code() == code);
      CHECK_THAT(error.what(), Catch::Contains(words));
    }
    CHECK(f.database.dump() == before);
  };
  refused([&] { f.engine.define(uploads(2, 999)); }, ErrorCode::invalid_argument, "1 s to 1 day");
  refused([&] { f.engine.define(uploads(2, 86'400'001)); }, ErrorCode::invalid_argument,
          "1 s to 1 day");
  Limit with_burst = uploads();
  with_burst.burst = 3;
  refused([&] { f.engine.define(with_burst); }, ErrorCode::invalid_argument, "drop the burst");
  Limit with_block = uploads();
  with_block.block = milliseconds(0);  // a block is taken (lease_lockout_test.cpp), not this one
  refused([&] { f.engine.define(with_block); }, ErrorCode::invalid_argument, "1 ms to 366 days");
  refused([&] { f.engine.acquire_lease("rate", "u"); }, ErrorCode::invalid_argument,
          "not a concurrency limit");
  refused([&] { f.engine.acquire_lease("nope", "u"); }, ErrorCode::unknown_limit, "unknown limit");
  refused([&] { f.engine.acquire_lease("uploads", "u", 0); }, ErrorCode::invalid_argument, "cost");
  refused([&] { f.engine.acquire_lease("uploads", ""); }, ErrorCode::invalid_argument, "owner");
  refused([&] { f.engine.renew_lease(""); }, ErrorCode::invalid_argument, "lease id");
  refused([&] { f.engine.renew_lease(held.lease, milliseconds(999)); },
          ErrorCode::invalid_argument, "1 s to 1 day");
  refused([&] { f.engine.release_lease(std::string(65, 'a')); }, ErrorCode::invalid_argument,
          "lease id");
  refused([&] { f.engine.refund("uploads", "u"); }, ErrorCode::invalid_argument,
          "release the lease");
  refused([&] { f.engine.leases("rate"); }, ErrorCode::invalid_argument,
          "not a concurrency limit");
  refused([&] { f.engine.leases("nope"); }, ErrorCode::unknown_limit, "unknown limit");
}

TEST_CASE("quota::Lease releases when destroyed, and moves", "[lease]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(uploads(1));
  {
    Lease lease(f.engine, "uploads", "u");
    CHECK(lease.held());
    CHECK(is_lease_id(lease.id()));
    Lease denied(f.engine, "uploads", "u");
    CHECK_FALSE(denied.held());
    CHECK(denied.result().reason == Reason::rate_limited);
    Lease moved = std::move(lease);
    CHECK_FALSE(lease.held());  // NOLINT(bugprone-use-after-move): moved-from holds nothing
    CHECK(moved.held());
    CHECK(moved.renew(milliseconds(5000)).expires_at_ms == T + 5000);
    CHECK(held_in_table(f.database, "u", T) == 1);
  }
  CHECK(held_in_table(f.database, "u", T) == 0);
  Lease again(f.engine, "uploads", "u");
  CHECK(again.release());
  CHECK_FALSE(again.release());
  CHECK(f.engine.check("uploads", "u").allowed);
}

TEST_CASE("8 threads acquiring on one owner never hold more than the maximum", "[lease][threads]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  constexpr std::int64_t kMaximum = 3;
  {
    Engine setup = Engine::open(database.location());
    setup.define(uploads(kMaximum, 60'000));
  }
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> granted{0};
  std::atomic<int> over{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      // Each thread its own Engine: its own connection, as another process would have.
      Engine engine = Engine::open(database.location());
      for (int i = 0; i < 25; ++i) {
        const LeaseResult result = engine.acquire_lease("uploads", "u");
        if (!result.allowed) continue;
        const int now_holding = ++holding;
        int seen = most.load();
        while (now_holding > seen && !most.compare_exchange_weak(seen, now_holding)) {
        }
        ++granted;
        const std::vector<LeaseInfo> leases = engine.leases("uploads");
        if (static_cast<std::int64_t>(leases.size()) > kMaximum) ++over;
        --holding;
        engine.release_lease(result.lease);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(over == 0);
  CHECK(most <= kMaximum);
  CHECK(granted > 0);
  CHECK(database.integer("SELECT count(*) FROM quota_leases") == 0);
}

// ---------------------------------------------------------------------------------------
// The printed statements run by a plain client.

// Runs `sql` with `parameters` (SQLite: bound to :name by name; PostgreSQL: $1.. in order),
// as any client would; the rows, every value as text (NULL as "NULL", truth values 1/0).
using Parameters = std::vector<std::pair<std::string, std::optional<std::string>>>;
std::vector<std::vector<std::string>> run_plain(const TestDatabase& database, const std::string& sql,
                                                const Parameters& parameters) {
  std::vector<std::vector<std::string>> rows;
  if (database.backend() == Backend::sqlite) {
    RawDb raw(database.location());
    sqlite3_stmt* statement = nullptr;
    REQUIRE(sqlite3_prepare_v2(raw.handle(), sql.c_str(), -1, &statement, nullptr) == SQLITE_OK);
    for (const auto& [name, value] : parameters) {
      const int index = sqlite3_bind_parameter_index(statement, (":" + name).c_str());
      REQUIRE(index > 0);
      if (value) {
        sqlite3_bind_text(statement, index, value->c_str(), -1, SQLITE_TRANSIENT);
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
    INFO(sqlite3_errmsg(raw.handle()));
    CHECK(status == SQLITE_DONE);
    sqlite3_finalize(statement);
    return rows;
  }
#if QUOTA_HAS_POSTGRESQL
  PGconn* connection = PQconnectdb(database.location().c_str());
  REQUIRE(PQstatus(connection) == CONNECTION_OK);
  std::vector<const char*> values;
  for (const auto& parameter : parameters) {
    values.push_back(parameter.second ? parameter.second->c_str() : nullptr);
  }
  // Typed as psql's PREPARE of `quotactl sql` types them: the request statements' four
  // parameters; renew's and release's are typed by the statement itself.
  const std::vector<Oid> request_types = {25, 25, 20, 20};  // text, text, bigint, bigint
  const bool request = parameters.size() == 4 && parameters.front().first == "limit";
  PGresult* result = PQexecParams(connection, sql.c_str(), static_cast<int>(values.size()),
                                  request ? request_types.data() : nullptr, values.data(), nullptr,
                                  nullptr, 0);
  INFO(PQresultErrorMessage(result));
  CHECK(PQresultStatus(result) == PGRES_TUPLES_OK);
  for (int r = 0; r < PQntuples(result); ++r) {
    std::vector<std::string> row;
    for (int c = 0; c < PQnfields(result); ++c) {
      const std::string text = PQgetisnull(result, r, c) ? "NULL" : PQgetvalue(result, r, c);
      row.push_back(text == "t" ? "1" : text == "f" ? "0" : text);
    }
    rows.push_back(std::move(row));
  }
  PQclear(result);
  PQfinish(connection);
#endif
  return rows;
}

TEST_CASE("the statements of quotactl sql acquire|renew|release answer as the engine does",
          "[lease][sql]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(uploads());
  const admin::Dialect dialect =
      backend == Backend::postgresql ? admin::Dialect::postgresql : admin::Dialect::sqlite;
  const std::string acquire = admin::statement(dialect, "acquire", Algorithm::concurrency);
  const std::string renew = admin::statement(dialect, "renew", Algorithm::concurrency);
  const std::string release = admin::statement(dialect, "release", Algorithm::concurrency);
  CHECK(acquire == detail::statement(backend == Backend::postgresql ? detail::kPostgresql
                                                                    : detail::kSqlite,
                                     Operation::consume, StatementKind::concurrency));

  // The engine on owner "e", the plain client on owner "p", the same requests at the same times.
  const auto plain_acquire = [&](std::int64_t now, std::int64_t cost) {
    return run_plain(f.database, acquire,
                     {{"limit", "uploads"}, {"owner", "p"}, {"cost", std::to_string(cost)},
                      {"now", std::to_string(now)}});
  };
  std::vector<std::string> plain_leases;
  for (const auto& [at, cost] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {T, 1}, {T + 1000, 1}, {T + 2000, 1}, {T + 3000, 2}, {T + 3000, 3}}) {
    f.clock.set(at);
    const LeaseResult engine = f.engine.acquire_lease("uploads", "e", cost);
    const auto rows = plain_acquire(at, cost);
    REQUIRE(rows.size() == 1);
    const auto& row = rows[0];
    CAPTURE(at, cost);
    CHECK(row[0] == (engine.allowed ? "1" : "0"));
    CHECK(row[1] == to_string(engine.reason));
    CHECK(row[2] == std::to_string(engine.remaining));
    CHECK(row[3] == std::to_string(engine.retry_after_ms));
    CHECK(row[4] == std::to_string(engine.reset_at_ms));
    CHECK(row[5] == std::to_string(engine.denied));
    CHECK((row[7] == "NULL") == engine.lease.empty());
    if (!engine.lease.empty()) {
      CHECK(row[8] == std::to_string(engine.expires_at_ms));
      plain_leases.push_back(row[7]);
    }
  }
  REQUIRE(plain_leases.size() == 2);
  // renew: one row while unexpired, none after; release: held 1, then no row.
  f.clock.set(T + 5000);
  auto renewed = run_plain(f.database, renew,
                           {{"lease", plain_leases[0]}, {"ttl", "4000"},
                            {"now", std::to_string(T + 5000)}});
  REQUIRE(renewed.size() == 1);
  CHECK(renewed[0][6] == std::to_string(T + 9000));
  renewed = run_plain(f.database, renew,
                      {{"lease", plain_leases[0]}, {"ttl", std::nullopt},
                       {"now", std::to_string(T + 9000)}});
  CHECK(renewed.empty());  // expired at T + 9000 exactly
  f.clock.set(T + 9000);
  CHECK(f.engine.renew_lease(plain_leases[0]).reason == Reason::lease_expired);
  auto released = run_plain(f.database, release,
                            {{"lease", plain_leases[1]}, {"now", std::to_string(T + 5000)}});
  REQUIRE(released.size() == 1);
  CHECK(released[0][0] == "1");
  released = run_plain(f.database, release,
                       {{"lease", plain_leases[1]}, {"now", std::to_string(T + 5000)}});
  CHECK(released.empty());
  // The plain client's check answers as the engine's.
  const Result engine_check = f.engine.check("uploads", "p");
  const Result plain_check =
      f.raw.run(Operation::check, StatementKind::concurrency, "uploads", "p", 1, T + 9000);
  CHECK(plain_check == engine_check);
  CHECK(engine_check.remaining == 2);
}

TEST_CASE("quotactl limit set --ttl, lease acquire|renew|release|list and sql acquire",
          "[lease][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  { Engine migrated = Engine::open(database.location()); }
  const auto run = [&](std::vector<std::string> args, int expected = 0) {
    std::ostringstream out;
    std::ostringstream err;
    args.insert(args.begin(), {"--db", database.location(), "--now", std::to_string(T), "--json"});
    const int status = quotactl::run(args, out, err);
    INFO(err.str());
    CHECK(status == expected);
    return status == 0 || status == 1 ? nlohmann::json::parse(out.str())
                                      : nlohmann::json(err.str());
  };
  const auto limit = run({"limit", "set", "uploads", "--max", "1", "--ttl", "30s"});
  CHECK(limit["algorithm"] == "concurrency");
  CHECK(limit["period_ms"] == 30'000);
  const auto taken = run({"lease", "acquire", "uploads", "u"});
  CHECK(taken["allowed"] == true);
  CHECK(taken["expires_at_ms"] == T + 30'000);
  const std::string id = taken["lease"];
  CHECK(run({"lease", "acquire", "uploads", "u"}, 1)["retry_after_ms"] == 30'000);
  const auto listed = run({"lease", "list", "uploads", "--owner", "u"});
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["lease"] == id);
  CHECK(run({"lease", "renew", id, "--ttl", "1m"})["expires_at_ms"] == T + 60'000);
  CHECK(run({"lease", "release", id})["released"] == true);
  CHECK(run({"lease", "release", id})["released"] == false);
  CHECK(run({"lease", "renew", id}, 1)["reason"] == "lease_expired");
  const auto sql = run({"sql", "acquire", "uploads"});
  CHECK(sql["algorithm"] == "concurrency");
  CHECK(sql["parameters"] == nlohmann::json({"limit", "owner", "cost", "now"}));
  CHECK(run({"sql", "renew"})["parameters"] == nlohmann::json({"lease", "ttl", "now"}));
  CHECK(run({"sql", "release"})["parameters"] == nlohmann::json({"lease", "now"}));

  // Bad input: exit 2, a message that says what to do, nothing changed.
  const std::string before = database.dump();
  CHECK_THAT(run({"limit", "set", "x", "--max", "1", "--algo", "fixed_window", "--ttl", "30s"}, 2)
                 .get<std::string>(),
             Catch::Contains("--ttl is only for concurrency limits"));
  CHECK_THAT(run({"limit", "set", "x", "--max", "1", "--algo", "concurrency", "--per", "1m"}, 2)
                 .get<std::string>(),
             Catch::Contains("takes no --per"));
  CHECK_THAT(run({"limit", "set", "x", "--max", "1", "--ttl", "1m", "--burst", "2"}, 2)
                 .get<std::string>(),
             Catch::Contains("takes no --burst"));
  CHECK_THAT(run({"limit", "set", "x", "--max", "1", "--algo", "concurrency"}, 2).get<std::string>(),
             Catch::Contains("needs --ttl"));
  CHECK_THAT(run({"limit", "set", "x", "--max", "1", "--ttl", "500ms"}, 2).get<std::string>(),
             Catch::Contains("1 s to 1 day"));
  CHECK_THAT(run({"limit", "set", "x", "--max", "1"}, 2).get<std::string>(),
             Catch::Contains("needs --per"));
  CHECK_THAT(run({"limit", "set", "uploads", "--max", "1", "--per", "1m"}, 2).get<std::string>(),
             Catch::Contains("is a concurrency limit"));
  CHECK_THAT(run({"lease", "renew", id, "--ttl", "2d"}, 2).get<std::string>(),
             Catch::Contains("1s to 1d"));
  CHECK_THAT(run({"lease", "release", ""}, 2).get<std::string>(), Catch::Contains("lease ID"));
  CHECK_THAT(run({"lease", "acquire", "nope", "u"}, 2).get<std::string>(),
             Catch::Contains("unknown limit"));
  CHECK_THAT(run({"sql", "refund", "uploads"}, 2).get<std::string>(),
             Catch::Contains("release the lease"));
  CHECK(database.dump() == before);
}

}  // namespace
}  // namespace quota::test
