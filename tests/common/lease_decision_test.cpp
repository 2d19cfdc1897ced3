// Leases in the engine's decision path (include/quota/lease.h), on every backend: acquire_lease
// is decided as consume is (hooks, metrics, the failure policy: a fail_open answer holds no
// lease); acquire_lease with an idempotency key answers a retry with the first lease; and
// consume_all / acquire_all over rate and concurrency limits answer the leases they took, all
// or nothing, replayed with a key; quotactl's lease acquire --key and consume a,b print them;
// record names the lease it takes, even over the capacity (library and quotactl).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "quota/lease.h"
#include "quota/policy.h"

namespace quota::test {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t T = 1'700'000'000'000;

Limit concurrency(const std::string& name, std::int64_t maximum, std::int64_t ttl_ms = 10'000) {
  Limit limit;
  limit.name = name;
  limit.algorithm = Algorithm::concurrency;
  limit.maximum = maximum;
  limit.period = milliseconds(ttl_ms);
  return limit;
}

bool is_lease_id(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The rows of quota_leases of `owner` on `limit`, read from the table itself.
std::int64_t lease_rows(const TestDatabase& database, const std::string& limit,
                        const std::string& owner) {
  return database.integer("SELECT count(*) FROM quota_leases WHERE limit_name = '" + limit +
                          "' AND owner = '" + owner + "'");
}

bool lease_row_exists(const TestDatabase& database, const std::string& id) {
  return database.integer("SELECT count(*) FROM quota_leases WHERE id = '" + id + "'") == 1;
}

template <typename Action>
std::optional<ErrorCode> code_of(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.code();
  }
  return std::nullopt;
}

std::uint64_t decisions(const Metrics& metrics, const std::string& limit,
                        const std::string& operation, const std::string& reason) {
  const auto by_limit = metrics.decisions.find(limit);
  if (by_limit == metrics.decisions.end()) return 0;
  const auto by_operation = by_limit->second.find(operation);
  if (by_operation == by_limit->second.end()) return 0;
  const auto found = by_operation->second.find(reason);
  return found == by_operation->second.end() ? 0 : found->second;
}

}  // namespace

TEST_CASE("acquire_lease is decided as consume is: hooks, metrics, suggestions",
          "[lease][hooks][metrics]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(concurrency("uploads", 1));
  f.engine.define(make_limit("per_minute", Algorithm::fixed_window, 10, 60'000));
  int before = 0;
  int after = 0;
  int exceeded = 0;
  Hooks hooks;
  hooks.before_consume = [&](const Request& request) {
    ++before;
    return request.owner != "refused";
  };
  hooks.after_consume = [&](const Request& request, const Result&) {
    ++after;
    if (request.owner == "throws") throw std::runtime_error("after_consume failed");
  };
  hooks.on_exceeded = [&](const Request&, const Result&) { ++exceeded; };
  f.engine.set_hooks("uploads", hooks);

  const LeaseResult taken = f.engine.acquire_lease("uploads", "u");
  CHECK(taken.allowed);
  CHECK(is_lease_id(taken.lease));
  CHECK(taken.expires_at_ms == T + 10'000);
  CHECK(before == 1);
  CHECK(after == 1);
  CHECK(exceeded == 0);

  const LeaseResult denied = f.engine.acquire_lease("uploads", "u");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.lease.empty());
  CHECK(denied.expires_at_ms == 0);
  CHECK(after == 2);
  CHECK(exceeded == 1);

  // before_consume refuses: no lease, no row.
  const LeaseResult refused = f.engine.acquire_lease("uploads", "refused");
  CHECK_FALSE(refused.allowed);
  CHECK(refused.reason == Reason::hook_denied);
  CHECK(refused.lease.empty());
  CHECK(lease_rows(f.database, "uploads", "refused") == 0);

  // A hook that throws takes the lease back with the rest of the operation.
  CHECK_THROWS_WITH(f.engine.acquire_lease("uploads", "throws"), "after_consume failed");
  CHECK(lease_rows(f.database, "uploads", "throws") == 0);

  const Metrics metrics = f.engine.metrics();
  CHECK(decisions(metrics, "uploads", "acquire", "ok") == 1);
  CHECK(decisions(metrics, "uploads", "acquire", "rate_limited") == 1);
  CHECK(decisions(metrics, "uploads", "acquire", "hook_denied") == 1);

  // A rate limit is refused, an unknown one offers the limits there are; nothing changes.
  const std::string dump = f.database.dump();
  try {
    f.engine.acquire_lease("per_minute", "u");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::invalid_argument);
    CHECK_THAT(error.what(), Catch::Contains("not a concurrency limit"));
  }
  try {
    f.engine.acquire_lease("upload", "u");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::unknown_limit);
    CHECK_THAT(error.what(), Catch::Contains("did you mean 'uploads'"));
  }
  CHECK(f.database.dump() == dump);
}

TEST_CASE("a fail_open acquire is allowed and holds no lease", "[lease][policy]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  clock.set(T);
  Options options = options_with(clock);
  options.busy_timeout = milliseconds(50);
  options.failure_policy = FailurePolicy::fail_open;
  int reported = 0;
  options.on_error = [&](const Error&) { ++reported; };
  Engine engine = Engine::open(database.location(), options);
  engine.define(concurrency("uploads", 1));

  // The database fails the acquire: SQLite's write lock held by another process; on
  // PostgreSQL, a trigger that refuses every lease.
  std::optional<LockHolder> holder;
  if (backend == Backend::sqlite) {
    holder.emplace(database.location());
  } else {
    database.exec(
        "CREATE FUNCTION refuse_lease() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the disk is gone'; END $$");
    database.exec(
        "CREATE TRIGGER refuse_lease BEFORE INSERT ON quota_leases "
        "FOR EACH ROW EXECUTE FUNCTION refuse_lease()");
  }
  for (const bool keyed : {false, true}) {
    CAPTURE(keyed);
    const LeaseResult open = keyed ? engine.acquire_lease("uploads", "u", 1, "retry-1")
                                   : engine.acquire_lease("uploads", "u");
    CHECK(open.allowed);
    CHECK(open.reason == Reason::store_unavailable);
    CHECK(open.lease.empty());
    CHECK(open.expires_at_ms == 0);
    CHECK_FALSE(open.replayed);
    quota::Lease handle(engine, "uploads", "u");
    CHECK(handle.result().reason == Reason::store_unavailable);
    CHECK_FALSE(handle.held());
  }
  CHECK(reported == 4);
  CHECK(engine.metrics().fail_open == 4);
  CHECK(decisions(engine.metrics(), "uploads", "acquire", "store_unavailable") == 4);

  holder.reset();
  if (backend == Backend::postgresql) database.exec("DROP TRIGGER refuse_lease ON quota_leases");
  CHECK(lease_rows(database, "uploads", "u") == 0);
  // The key stored nothing: its retry is a first request, which takes the lease now.
  const LeaseResult retry = engine.acquire_lease("uploads", "u", 1, "retry-1");
  CHECK(retry.reason == Reason::ok);
  CHECK_FALSE(retry.replayed);
  CHECK(is_lease_id(retry.lease));
  CHECK(lease_row_exists(database, retry.lease));
}

TEST_CASE("a retry of an acquire with the same key answers the same lease and takes none",
          "[lease][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(concurrency("uploads", 2));

  const LeaseResult first = f.engine.acquire_lease("uploads", "u", 1, "upload-1");
  CHECK(first.allowed);
  CHECK_FALSE(first.replayed);
  CHECK(is_lease_id(first.lease));
  CHECK(first.expires_at_ms == T + 10'000);
  f.clock.set(T + 500);
  const LeaseResult retry = f.engine.acquire_lease("uploads", "u", 1, "upload-1");
  LeaseResult expected = first;
  expected.replayed = true;
  CHECK(retry == expected);
  CHECK(lease_rows(f.database, "uploads", "u") == 1);
  CHECK(f.database.rows("SELECT request, lease, lease_expires_at_ms FROM quota_idempotency") ==
        std::vector<std::vector<std::string>>{
            {"acquire 1", first.lease, std::to_string(T + 10'000)}});

  {
    // A Lease made with the key holds the first acquire's lease, and releases it.
    quota::Lease handle(f.engine, "uploads", "u", 1, "upload-1");
    CHECK(handle.held());
    CHECK(handle.id() == first.lease);
    CHECK(handle.expires_at_ms() == first.expires_at_ms);
    CHECK(handle.result().replayed);
  }
  CHECK(lease_rows(f.database, "uploads", "u") == 0);

  // A denial is stored and replayed as a denial, with no lease, counted once.
  CHECK(f.engine.acquire_lease("uploads", "u", 2).allowed);
  const LeaseResult denied = f.engine.acquire_lease("uploads", "u", 1, "upload-2");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.lease.empty());
  const LeaseResult denied_again = f.engine.acquire_lease("uploads", "u", 1, "upload-2");
  CHECK(denied_again.replayed);
  CHECK_FALSE(denied_again.allowed);
  CHECK(denied_again.lease.empty());
  CHECK(f.engine.owner_usage("uploads", "u").denied == 1);

  // The key used for another cost, or for a consume, is a conflict that changes nothing.
  const std::string before = f.database.dump();
  CHECK(code_of([&] { f.engine.acquire_lease("uploads", "u", 2, "upload-1"); }) ==
        ErrorCode::idempotency_conflict);
  CHECK(code_of([&] { f.engine.consume("uploads", "u", 1, "upload-1"); }) ==
        ErrorCode::idempotency_conflict);
  // Bad keys are refused before anything runs.
  CHECK(code_of([&] { f.engine.acquire_lease("uploads", "u", 1, ""); }) ==
        ErrorCode::invalid_argument);
  CHECK(code_of([&] { f.engine.acquire_lease("uploads", "u", 1, std::string(256, 'k')); }) ==
        ErrorCode::invalid_argument);
  CHECK(code_of([&] { quota::Lease bad(f.engine, "uploads", "u", 1, ""); }) ==
        ErrorCode::invalid_argument);
  CHECK(f.database.dump() == before);

  // Past Options::idempotency_ttl the key is a new request.
  f.clock.set(T + 86'400'000);
  const LeaseResult later = f.engine.acquire_lease("uploads", "u", 1, "upload-1");
  CHECK_FALSE(later.replayed);
  CHECK(is_lease_id(later.lease));
  CHECK(later.lease != first.lease);
}

TEST_CASE("consume_all over rate and concurrency limits answers its leases, all or nothing",
          "[lease][consume_all]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(make_limit("per_minute", Algorithm::fixed_window, 10, 60'000));
  f.engine.define(concurrency("uploads", 2));
  f.engine.define(concurrency("exports", 1, 30'000));
  const std::vector<std::string_view> both = {"per_minute", "uploads"};

  const Decision first = f.engine.consume_all(both, "u");
  CHECK(first.result.allowed);
  REQUIRE(first.leases.size() == 1);
  CHECK(first.leases[0].limit == "uploads");
  CHECK(first.leases[0].owner == "u");
  CHECK(is_lease_id(first.leases[0].lease));
  CHECK(first.leases[0].expires_at_ms == T + 10'000);
  CHECK(lease_row_exists(f.database, first.leases[0].lease));
  // Two concurrency limits: a lease of each, in the order of the call.
  const Decision two = f.engine.consume_all({"exports", "per_minute", "uploads"}, "u");
  CHECK(two.result.allowed);
  REQUIRE(two.leases.size() == 2);
  CHECK(two.leases[0].limit == "exports");
  CHECK(two.leases[0].expires_at_ms == T + 30'000);
  CHECK(two.leases[1].limit == "uploads");
  CHECK(f.engine.consume_all({"per_minute"}, "u").leases.empty());  // a rate limit alone

  // Denied by the concurrency limit: nothing held, the rate limit not charged.
  const Decision full = f.engine.consume_all(both, "u");
  CHECK_FALSE(full.result.allowed);
  CHECK(full.limit == "uploads");
  CHECK(full.leases.empty());
  CHECK(lease_rows(f.database, "uploads", "u") == 2);
  CHECK(f.engine.owner_usage("per_minute", "u").used == 3);

  // Denied by the rate limit: the lease the concurrency limit took is undone.
  f.engine.define(make_limit("tight", Algorithm::fixed_window, 1, 60'000));
  CHECK(f.engine.consume_all({"tight", "uploads"}, "v").leases.size() == 1);
  const Decision tight = f.engine.consume_all({"tight", "uploads"}, "v");
  CHECK_FALSE(tight.result.allowed);
  CHECK(tight.limit == "tight");
  CHECK(tight.leases.empty());
  CHECK(lease_rows(f.database, "uploads", "v") == 1);
  CHECK(f.engine.owner_usage("uploads", "v").used == 1);

  // An owner per limit: the lease is the charged owner's.
  const Decision gateway =
      f.engine.consume_all(std::vector<Charge>{{"per_minute", "10.0.0.1"}, {"uploads", "key-7"}});
  REQUIRE(gateway.leases.size() == 1);
  CHECK(gateway.leases[0].owner == "key-7");
  CHECK(f.engine.release_lease(gateway.leases[0].lease));
  CHECK(lease_rows(f.database, "uploads", "key-7") == 0);

  // acquire_all answers the leases the same way; its denial holds nothing.
  const Decision waited = f.engine.acquire_all(both, "w", 1, milliseconds(0));
  CHECK(waited.result.allowed);
  REQUIRE(waited.leases.size() == 1);
  CHECK(lease_row_exists(f.database, waited.leases[0].lease));
  CHECK(f.engine.acquire_all(both, "w", 1, milliseconds(0)).leases.size() == 1);
  const Decision not_waited = f.engine.acquire_all(both, "w", 1, milliseconds(0));
  CHECK_FALSE(not_waited.result.allowed);
  CHECK(not_waited.leases.empty());
  CHECK(lease_rows(f.database, "uploads", "w") == 2);
}

TEST_CASE("consume_all with a key replays the leases it took", "[lease][consume_all][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(make_limit("per_minute", Algorithm::fixed_window, 10, 60'000));
  f.engine.define(concurrency("uploads", 1));
  f.engine.define(concurrency("exports", 1));
  const std::vector<std::string_view> limits = {"exports", "per_minute", "uploads"};

  const Decision first = f.engine.consume_all(limits, "u", 1, "job-1");
  CHECK(first.result.allowed);
  CHECK_FALSE(first.result.replayed);
  REQUIRE(first.leases.size() == 2);
  f.clock.set(T + 1000);
  const Decision retry = f.engine.consume_all(limits, "u", 1, "job-1");
  CHECK(retry.result.replayed);
  CHECK(retry.limit == first.limit);
  CHECK(retry.leases == first.leases);
  CHECK(lease_rows(f.database, "uploads", "u") == 1);
  CHECK(lease_rows(f.database, "exports", "u") == 1);
  CHECK(f.engine.owner_usage("per_minute", "u").used == 1);

  // A denied call stores no lease, and its retry holds none either.
  const Decision denied = f.engine.consume_all(limits, "u", 1, "job-2");
  CHECK_FALSE(denied.result.allowed);
  CHECK(denied.leases.empty());
  const Decision denied_again = f.engine.consume_all(limits, "u", 1, "job-2");
  CHECK(denied_again.result.replayed);
  CHECK(denied_again.leases.empty());
  CHECK(f.database.integer("SELECT count(*) FROM quota_idempotency WHERE key = 'job-2' AND "
                           "lease IS NOT NULL") == 0);
}

TEST_CASE("quotactl lease acquire --key and consume a,b print the leases",
          "[lease][quotactl][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  { Engine migrated = Engine::open(database.location()); }
  const auto run = [&](std::vector<std::string> args, int expected = 0, bool json = true) {
    std::ostringstream out;
    std::ostringstream err;
    args.insert(args.begin(), {"--db", database.location(), "--now", std::to_string(T)});
    if (json) args.insert(args.begin(), "--json");
    const int status = quotactl::run(args, out, err);
    INFO(err.str());
    CHECK(status == expected);
    if (!json) return nlohmann::json(out.str());
    return status == 0 || status == 1 ? nlohmann::json::parse(out.str())
                                      : nlohmann::json(err.str());
  };
  run({"limit", "set", "uploads", "--max", "1", "--ttl", "30s"});
  run({"limit", "set", "per_minute", "--max", "10", "--per", "1m"});

  const auto first = run({"lease", "acquire", "uploads", "u", "--key", "k-1"});
  CHECK(first["allowed"] == true);
  CHECK(first["replayed"] == false);
  const auto again = run({"lease", "acquire", "uploads", "u", "--key", "k-1"});
  CHECK(again["replayed"] == true);
  CHECK(again["lease"] == first["lease"]);
  CHECK(again["expires_at_ms"] == first["expires_at_ms"]);
  const std::string text =
      run({"lease", "acquire", "uploads", "u", "--key", "k-1"}, 0, false).get<std::string>();
  CHECK_THAT(text, Catch::Contains(first["lease"].get<std::string>()) &&
                       Catch::Contains("[replayed"));
  CHECK_FALSE(run({"lease", "acquire", "uploads", "v"}).contains("replayed"));

  const auto all = run({"consume", "per_minute,uploads", "w"});
  CHECK(all["allowed"] == true);
  REQUIRE(all["leases"].size() == 1);
  CHECK(all["leases"][0]["limit"] == "uploads");
  CHECK(all["leases"][0]["owner"] == "w");
  CHECK(all["leases"][0]["expires_at_ms"] == T + 30'000);
  const std::string id = all["leases"][0]["lease"];
  CHECK(id.size() == 32);
  const auto denied = run({"consume", "per_minute,uploads", "w"}, 1);
  CHECK(denied["leases"].empty());
  const std::string lines =
      run({"consume", "per_minute,uploads", "x"}, 0, false).get<std::string>();
  CHECK_THAT(lines, Catch::Contains("lease ") && Catch::Contains(" on uploads until "));

  // Bad keys: exit 2, a message that says what to do, nothing changed.
  const std::string before = database.dump();
  CHECK_THAT(run({"lease", "acquire", "uploads", "u", "--key", ""}, 2).get<std::string>(),
             Catch::Contains("1 to 255 bytes"));
  CHECK_THAT(run({"lease", "acquire", "uploads", "u", "--key", "k-1", "--cost", "2"}, 2)
                 .get<std::string>(),
             Catch::Contains("use a new key"));
  CHECK(database.dump() == before);
}

TEST_CASE("quotactl consume on a concurrency limit answers the lease it took, and can free it",
          "[lease][quotactl]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  { Engine migrated = Engine::open(database.location()); }
  const auto run = [&](std::vector<std::string> args, int expected = 0, bool json = true,
                       bool fixed_now = true) {
    std::ostringstream out;
    std::ostringstream err;
    args.insert(args.begin(), {"--db", database.location()});
    if (fixed_now) args.insert(args.begin(), {"--now", std::to_string(T)});
    if (json) args.insert(args.begin(), "--json");
    const int status = quotactl::run(args, out, err);
    INFO(err.str());
    CHECK(status == expected);
    if (!json) return nlohmann::json(out.str());
    return status == 0 || status == 1 ? nlohmann::json::parse(out.str())
                                      : nlohmann::json(err.str());
  };
  run({"limit", "set", "slots", "--max", "2", "--ttl", "30s"});
  run({"limit", "set", "per_minute", "--max", "10", "--per", "1m"});
  ManualClock clock;  // the time of the commands' --now
  clock.set(T);
  Engine engine = Engine::open(database.location(), options_with(clock));

  const auto first = run({"consume", "slots", "u"});
  CHECK(first["allowed"] == true);
  REQUIRE(first.contains("lease"));
  const std::string id = first["lease"];
  CHECK(id.size() == 32);
  CHECK(first["expires_at_ms"] == T + 30'000);
  REQUIRE(engine.leases("slots").size() == 1);
  CHECK(engine.leases("slots").front().lease == id);

  // The text line names it too, with how to free it.
  const std::string line = run({"consume", "slots", "u"}, 0, false).get<std::string>();
  const std::vector<LeaseInfo> held = engine.leases("slots");
  REQUIRE(held.size() == 2);
  const std::string second = held[0].lease == id ? held[1].lease : held[0].lease;
  CHECK_THAT(line, Catch::Contains("lease " + second + " on slots until ") &&
                       Catch::Contains("quotactl lease release " + second));

  // Full: denied, and no lease named.
  const auto denied = run({"consume", "slots", "u"}, 1);
  CHECK_FALSE(denied.contains("lease"));
  CHECK(run({"lease", "release", id})["released"] == true);
  CHECK(run({"lease", "release", second})["released"] == true);

  // With a key: the retry answers the same lease.
  const auto keyed = run({"consume", "slots", "u", "--key", "k-1"});
  const auto replayed = run({"consume", "slots", "u", "--key", "k-1"});
  CHECK(replayed["replayed"] == true);
  CHECK(replayed["lease"] == keyed["lease"]);
  CHECK(replayed["expires_at_ms"] == keyed["expires_at_ms"]);
  CHECK(run({"lease", "release", keyed["lease"].get<std::string>()})["released"] == true);

  // With --wait (on the system clock): acquire's path names it as well.
  const auto waited = run({"consume", "slots", "u", "--wait", "1s"}, 0, true, false);
  REQUIRE(waited.contains("lease"));
  CHECK(run({"lease", "release", waited["lease"].get<std::string>()})["released"] == true);
  CHECK(engine.leases("slots").empty());

  // A rate limit takes no lease and names none.
  CHECK_FALSE(run({"consume", "per_minute", "u"}).contains("lease"));
}

TEST_CASE("record on a concurrency limit answers the lease it took, even over the capacity",
          "[lease][quotactl][idempotency]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  ManualClock clock;
  clock.set(T);
  Engine engine = Engine::open(database.location(), options_with(clock));
  engine.define(concurrency("slots", 1, 30'000));
  engine.define(make_limit("per_minute", Algorithm::fixed_window, 10, 60'000));

  // Within the capacity, then over it: both take a lease, and both name it.
  const LeaseResult within = engine.record_with_lease("slots", "u");
  CHECK(within.allowed);
  CHECK(is_lease_id(within.lease));
  CHECK(within.expires_at_ms == T + 30'000);
  const LeaseResult over = engine.record_with_lease("slots", "u", 2);
  CHECK_FALSE(over.allowed);
  CHECK(is_lease_id(over.lease));
  CHECK(over.lease != within.lease);
  CHECK(over.expires_at_ms == T + 30'000);
  CHECK(lease_rows(database, "slots", "u") == 2);
  // Named, it can be freed at once rather than waiting out its TTL.
  CHECK(engine.release_lease(over.lease));
  CHECK(engine.release_lease(within.lease));
  CHECK(engine.leases("slots").empty());

  // With a key: a retry answers the first record's lease and takes none.
  const LeaseResult keyed = engine.record_with_lease("slots", "v", 1, "r-1");
  const LeaseResult replayed = engine.record_with_lease("slots", "v", 1, "r-1");
  CHECK(replayed.replayed);
  CHECK(replayed.lease == keyed.lease);
  CHECK(replayed.expires_at_ms == keyed.expires_at_ms);
  CHECK(lease_rows(database, "slots", "v") == 1);
  CHECK(code_of([&] { engine.record_with_lease("slots", "v", 1, ""); }) ==
        ErrorCode::invalid_argument);

  // A rate limit takes no lease and names none.
  const LeaseResult rate = engine.record_with_lease("per_minute", "u");
  CHECK(rate.allowed);
  CHECK(rate.lease.empty());
  CHECK(rate.expires_at_ms == 0);
  CHECK(code_of([&] { engine.record_with_lease("missing", "u"); }) == ErrorCode::unknown_limit);

  // quotactl record: JSON `lease` and `expires_at_ms`, and the text line, over the capacity too.
  const auto run = [&](std::vector<std::string> args, int expected, bool json = true) {
    std::ostringstream out;
    std::ostringstream err;
    args.insert(args.begin(), {"--db", database.location(), "--now", std::to_string(T)});
    if (json) args.insert(args.begin(), "--json");
    const int status = quotactl::run(args, out, err);
    INFO(err.str());
    CHECK(status == expected);
    return json ? nlohmann::json::parse(out.str()) : nlohmann::json(out.str());
  };
  const auto first = run({"record", "slots", "w"}, 0);
  CHECK(first["allowed"] == true);
  REQUIRE(first.contains("lease"));
  CHECK(first["expires_at_ms"] == T + 30'000);
  const auto beyond = run({"record", "slots", "w"}, 1);
  CHECK(beyond["allowed"] == false);
  REQUIRE(beyond.contains("lease"));
  const std::string id = beyond["lease"];
  CHECK(is_lease_id(id));
  CHECK(lease_row_exists(database, id));
  const std::string line = run({"record", "slots", "w"}, 1, false).get<std::string>();
  const std::vector<LeaseInfo> held = engine.leases("slots", "w");
  REQUIRE(held.size() == 3);
  std::string third;
  for (const LeaseInfo& lease : held) {
    if (lease.lease != id && lease.lease != first["lease"]) third = lease.lease;
  }
  CHECK_THAT(line, Catch::Contains("lease " + third + " on slots until ") &&
                       Catch::Contains("quotactl lease release " + third));
  CHECK_FALSE(run({"record", "per_minute", "w"}, 0).contains("lease"));
}

}  // namespace quota::test
