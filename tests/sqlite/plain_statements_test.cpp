// A plain limit's statements (src/statements.h, StatementKind::plain_fixed_window ...): on the same requests
// they answer and write what the general statements (those `quotactl sql` prints) answer and
// write; they refuse a limit or an owner that is no longer plain, changing nothing; and the
// engine, which runs them first, notices a change made by another connection.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "statements.h"
#include "support.h"

namespace quota::test {
namespace {

using detail::Operation;

constexpr std::int64_t T = 1'700'000'000'000;

// What a step of a statement gave: its first row as text, or the error's message.
struct Outcome {
  bool answered = false;
  std::vector<std::string> row;
  std::string error;
};

Outcome run(sqlite3* db, const std::string& sql, const std::string& limit,
            const std::string& owner, std::int64_t cost, std::int64_t now) {
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK);
  sqlite3_bind_text(statement, sqlite3_bind_parameter_index(statement, ":limit"), limit.c_str(),
                    -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(statement, sqlite3_bind_parameter_index(statement, ":owner"), owner.c_str(),
                    -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(statement, sqlite3_bind_parameter_index(statement, ":cost"), cost);
  sqlite3_bind_int64(statement, sqlite3_bind_parameter_index(statement, ":now"), now);
  Outcome outcome;
  int status = sqlite3_step(statement);
  if (status == SQLITE_ROW) {
    outcome.answered = true;
    for (int i = 0; i < sqlite3_column_count(statement); ++i) {
      const auto* text = sqlite3_column_text(statement, i);
      outcome.row.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
    }
    while ((status = sqlite3_step(statement)) == SQLITE_ROW) {
    }
  }
  if (status != SQLITE_DONE) outcome.error = sqlite3_errmsg(db);
  sqlite3_finalize(statement);
  return outcome;
}

// A plain consume or record as SQLite's store runs it (detail::plain_parts): the UPDATE, then,
// when it changed the row, the answer's SELECT, in one transaction.
Outcome run_parts(RawDb& db, const detail::PlainParts& parts, const std::string& limit,
                  const std::string& owner, std::int64_t cost, std::int64_t now) {
  db.exec("BEGIN IMMEDIATE");
  Outcome outcome = run(db.handle(), parts.write, limit, owner, cost, now);
  if (outcome.error.empty() && sqlite3_changes(db.handle()) > 0) {
    outcome = run(db.handle(), parts.answer, limit, owner, cost, now);
  }
  db.exec(outcome.error.empty() ? "COMMIT" : "ROLLBACK");
  return outcome;
}

// The state a later request reads (not the answer columns the general statement keeps).
std::vector<std::vector<std::string>> state_of(RawDb& db, Algorithm algorithm) {
  if (algorithm == Algorithm::sliding_log) {
    // The owner's row (its stored answer too: the answer is read from it) and its events.
    auto rows = db.rows(
        "SELECT limit_name, owner, total, newest_at_ms, recorded, denied, seen_ms, maximum, "
        "period_ms, blocked_until_ms, shadow_denied, last_allowed, last_reason, last_remaining, "
        "last_retry_after_ms, last_reset_at_ms FROM quota_log_owners ORDER BY limit_name, owner");
    for (auto& event : db.rows("SELECT limit_name, owner, at_ms, cost, total FROM quota_log "
                               "ORDER BY limit_name, owner, at_ms")) {
      rows.push_back(std::move(event));
    }
    return rows;
  }
  return db.rows(algorithm == Algorithm::token_bucket
                     ? "SELECT limit_name, owner, level, denied, seen_ms, maximum, period_ms, "
                       "burst, blocked_until_ms, shadow_denied FROM quota_buckets "
                       "ORDER BY limit_name, owner"
                     : "SELECT limit_name, owner, window_key, used, previous_used, denied, "
                       "seen_ms, maximum, period_ms, blocked_until_ms, shadow_denied "
                       "FROM quota_windows ORDER BY limit_name, owner");
}

// A change that makes limit 'p' (owner 'a' with state) not plain, and its undoing: shadow
// mode, a block, an override of the owner, one of '*' for any owner (another owner's: it makes
// every limit not plain), and, for a fixed_window limit, a calendar period.
struct Change {
  const char* apply;
  const char* undo;
};

std::vector<Change> not_plain_changes(bool fixed_window) {
  std::vector<Change> changes = {
      {"UPDATE quota_limits SET shadow = 1", "UPDATE quota_limits SET shadow = 0"},
      {"UPDATE quota_limits SET block_ms = 5000", "UPDATE quota_limits SET block_ms = NULL"},
      {"INSERT INTO quota_overrides VALUES ('p', 'a', 'exempt', NULL, NULL)",
       "DELETE FROM quota_overrides"},
      {"INSERT INTO quota_overrides VALUES ('*', 'zz', 'maximum', 9, NULL)",
       "DELETE FROM quota_overrides"},
  };
  if (fixed_window) {
    changes.push_back({"UPDATE quota_limits SET maximum = 1, period_ms = 86400000, calendar = 'day'",
                       "UPDATE quota_limits SET calendar = NULL, maximum = 3, period_ms = 1000"});
  }
  return changes;
}

// Runs 1,500 random requests of one algorithm on three databases: the general statements,
// the statements of `shape` (then the general one where they answer nothing), and the same
// in two parts as SQLite's store runs them; each answer and the state after it must be the
// general statement's. A flat limit's configuration changes between shadow mode, a block,
// both and neither as it runs.
void compare_with_general(Algorithm algorithm, std::uint64_t seed, detail::Shape shape) {
  const bool flat = shape == detail::Shape::flat || shape == detail::Shape::overridden;
  const bool overrides = shape == detail::Shape::overridden;
  CAPTURE(to_string(algorithm), seed, flat, overrides);
  std::mt19937_64 random(seed);
  auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  TempDir dir;
  const std::string general_path = dir.file("general.db");
  const std::string plain_path = dir.file("plain.db");
  const std::string parts_path = dir.file("parts.db");
  const std::int64_t maximum = between(1, 5);
  const std::int64_t period = between(1, 60);
  Limit limit = algorithm == Algorithm::token_bucket
                    ? make_bucket("p", maximum, period, maximum + between(0, 2))
                    : make_limit("p", algorithm, maximum, period);
  if (flat) limit.block = std::chrono::milliseconds(between(1, 3 * period));
  for (const std::string& path : {general_path, plain_path, parts_path}) {
    Engine::open(path).define(limit);
  }
  RawDb general(general_path);
  RawDb plain(plain_path);
  RawDb parts(parts_path);
  // Answers and state are compared, not durability: no fsync on each of the 4,500 writes.
  for (RawDb* db : {&general, &plain, &parts}) db->exec("PRAGMA synchronous = OFF");
  const auto kind = detail::specialised_kind(Operation::consume, detail::kind_of(algorithm), shape);
  REQUIRE(kind);
  REQUIRE(detail::is_flat(*kind) == flat);
  if (!flat) {
    // A sliding log's check is the general one (both databases run it below).
    const auto check_kind = detail::plain_kind(Operation::check, detail::kind_of(algorithm));
    REQUIRE((algorithm == Algorithm::sliding_log ? !check_kind : check_kind == kind));
  }
  const auto change_everywhere = [&](const std::string& change) {
    general.exec(change);
    plain.exec(change);
    parts.exec(change);
  };
  std::int64_t now = T;
  int by_specialised = 0;
  for (int step = 0; step < 1500; ++step) {
    const std::int64_t move = between(0, 9);
    now += move < 3 ? 0 : move < 9 ? between(1, period / 3 + 1) : -between(1, period);
    const std::string owner = std::string(1, static_cast<char>('a' + between(0, 3)));
    const std::int64_t cost = between(0, 7) == 0 ? between(maximum, maximum + 3) : 1;
    const std::int64_t pick = between(0, 9);
    const Operation operation = pick == 0   ? Operation::record
                                : pick <= 2 ? Operation::check
                                            : Operation::consume;
    CAPTURE(step, owner, cost, now - T, detail::operation_name(operation));
    if (between(0, 199) == 0) {
      // Another configuration of the same limit: its owners' state is kept.
      change_everywhere(fmt::format("UPDATE quota_limits SET maximum = {0}, period_ms = {1}{2}",
                                    between(1, 5), between(1, 60),
                                    algorithm == Algorithm::token_bucket ? ", burst = maximum" : ""));
    }
    if (flat && between(0, 99) == 0) {
      // The limit's own policies: shadow mode, a block, both, or neither (then it is plain,
      // which the flat statements answer for too).
      const std::int64_t policies = between(0, 3);
      change_everywhere(fmt::format(
          "UPDATE quota_limits SET shadow = {}, block_ms = {}", policies & 1,
          policies & 2 ? std::to_string(between(1, 200)) : std::string("NULL")));
    }
    if (overrides && between(0, 29) == 0) {
      // An override of an owner (or of '*'): set, changed or removed.
      const std::string whose =
          between(0, 4) == 0 ? std::string("'*'") : fmt::format("'{}'", char('a' + between(0, 3)));
      const std::int64_t policy = between(0, 3);
      change_everywhere(
          policy == 0 ? fmt::format("DELETE FROM quota_overrides WHERE owner IN ({0}, 'x') "
                                    "OR limit_name = {0}",
                                    whose)
                      : fmt::format("INSERT OR REPLACE INTO quota_overrides VALUES ({}, {}, '{}', {}, {})",
                                    whose == "'*'" ? "'*'" : "'p'",
                                    whose == "'*'" ? fmt::format("'{}'", char('a' + between(0, 3))) : whose,
                                    policy == 1 ? "maximum" : policy == 2 ? "exempt" : "deny",
                                    policy == 1 ? std::to_string(between(1, 6)) : "NULL",
                                    policy == 1 && between(0, 1) ? std::to_string(between(1, 8)) : "NULL"));
    }
    const Outcome expected =
        run(general.handle(), detail::statement(operation, detail::kind_of(algorithm)), "p", owner, cost, now);
    REQUIRE(expected.error.empty());
    const detail::StatementKind specialised =
        detail::specialised_kind(operation, detail::kind_of(algorithm), shape).value_or(detail::kind_of(algorithm));
    Outcome got = run(plain.handle(), detail::statement(operation, specialised), "p", owner, cost, now);
    REQUIRE(got.error.empty());
    const bool specialised_answered = got.answered;
    if (got.answered) {
      if (specialised != detail::kind_of(algorithm)) ++by_specialised;
    } else {
      // An owner without state: the general statement makes its row (a plain check
      // answers for it, as for every owner of a plain limit).
      REQUIRE(operation != Operation::check);
      got = run(plain.handle(), detail::statement(operation, detail::kind_of(algorithm)), "p", owner, cost, now);
    }
    REQUIRE(got.row == expected.row);
    REQUIRE(state_of(plain, algorithm) == state_of(general, algorithm));
    // The same request as SQLite's store runs a plain or flat consume or record: in two parts.
    if (const auto* two = detail::plain_parts(detail::kSqlite, operation, specialised)) {
      Outcome apart = run_parts(parts, *two, "p", owner, cost, now);
      REQUIRE(apart.error.empty());
      REQUIRE(apart.answered == specialised_answered);
      if (!apart.answered) {
        apart = run(parts.handle(), detail::statement(operation, detail::kind_of(algorithm)),
                    "p", owner, cost, now);
      }
      REQUIRE(apart.row == expected.row);
    } else {
      REQUIRE(run(parts.handle(), detail::statement(operation, detail::kind_of(algorithm)),
                  "p", owner, cost, now)
                  .row == expected.row);
    }
    REQUIRE(state_of(parts, algorithm) == state_of(general, algorithm));
  }
  CHECK(by_specialised > (algorithm == Algorithm::sliding_log || flat ? 700 : 1000));
}

TEST_CASE("a plain limit's statements answer and write what the general statements do",
          "[slow][plain][property]") {
  for (const Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window,
                                    Algorithm::token_bucket, Algorithm::sliding_log}) {
    for (const std::uint64_t seed : {1u, 2u, 3u}) compare_with_general(algorithm, seed, detail::Shape::plain);
  }
}

TEST_CASE("a flat limit's statements (shadow mode, a block) answer and write what the general "
          "statements do",
          "[slow][plain][flat][property]") {
  for (const Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window,
                                    Algorithm::token_bucket, Algorithm::sliding_log}) {
    for (const std::uint64_t seed : {1u, 2u, 3u}) compare_with_general(algorithm, seed, detail::Shape::flat);
  }
}

TEST_CASE("the flat statements with overrides answer and write what the general statements do",
          "[slow][plain][flat][property]") {
  for (const Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window,
                                    Algorithm::token_bucket, Algorithm::sliding_log}) {
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      compare_with_general(algorithm, seed, detail::Shape::overridden);
    }
  }
}

// A concurrency limit's state a later request reads: the owner's row and its leases (their
// ids aside, which are random).
std::vector<std::vector<std::string>> lease_state_of(RawDb& db) {
  auto rows = db.rows(
      "SELECT limit_name, owner, maximum, period_ms, cost, seen_ms, denied, shadow_denied "
      "FROM quota_lease_owners ORDER BY limit_name, owner");
  for (auto& lease : db.rows("SELECT limit_name, owner, cost, expires_at_ms, acquired_at_ms "
                             "FROM quota_leases ORDER BY limit_name, owner, expires_at_ms, cost")) {
    rows.push_back(std::move(lease));
  }
  return rows;
}

TEST_CASE("a plain concurrency limit's acquire and record answer and write what the general "
          "statements do",
          "[plain][lease]") {
  for (const std::uint64_t seed : {1u, 2u}) {
    CAPTURE(seed);
    std::mt19937_64 random(seed);
    auto between = [&](std::int64_t low, std::int64_t high) {
      return std::uniform_int_distribution<std::int64_t>(low, high)(random);
    };
    TempDir dir;
    const std::string general_path = dir.file("general.db");
    const std::string plain_path = dir.file("plain.db");
    const std::int64_t maximum = between(1, 5);
    const std::int64_t ttl = between(1, 5) * 1000;
    for (const std::string& path : {general_path, plain_path}) {
      Engine::open(path).define(make_limit("p", Algorithm::concurrency, maximum, ttl));
    }
    RawDb general(general_path);
    RawDb plain(plain_path);
    const auto general_kind = detail::kind_of(Algorithm::concurrency);
    const auto kind = detail::plain_kind(Operation::consume, general_kind);
    REQUIRE(kind == detail::StatementKind::plain_concurrency);
    std::int64_t now = T;
    int by_plain = 0;
    for (int step = 0; step < 600; ++step) {
      const std::int64_t move = between(0, 9);
      now += move < 3 ? 0 : move < 9 ? between(1, ttl / 3) : -between(1, ttl);
      const std::string owner = std::string(1, static_cast<char>('a' + between(0, 3)));
      const std::int64_t cost = between(0, 7) == 0 ? between(maximum, maximum + 2) : 1;
      const Operation operation = between(0, 9) == 0 ? Operation::record : Operation::consume;
      CAPTURE(step, owner, cost, now - T, detail::operation_name(operation));
      if (between(0, 99) == 0) {
        // Another maximum or TTL of the same limit: the owners' leases are kept.
        const std::string change = fmt::format(
            "UPDATE quota_limits SET maximum = {}, period_ms = {}", between(1, 5), between(1, 5) * 1000);
        general.exec(change);
        plain.exec(change);
      }
      if (between(0, 29) == 0) {
        // A release of one of the owner's leases, the same in both.
        const std::string release = fmt::format(
            "DELETE FROM quota_leases WHERE owner = '{}' AND expires_at_ms = (SELECT "
            "min(expires_at_ms) FROM quota_leases WHERE owner = '{}')",
            owner, owner);
        general.exec(release);
        plain.exec(release);
      }
      Outcome expected = run(general.handle(), detail::statement(operation, general_kind), "p",
                             owner, cost, now);
      REQUIRE(expected.error.empty());
      Outcome got = run(plain.handle(), detail::statement(operation, *kind), "p", owner, cost, now);
      REQUIRE(got.error.empty());
      if (got.answered) {
        ++by_plain;
      } else {
        got = run(plain.handle(), detail::statement(operation, general_kind), "p", owner, cost, now);
      }
      REQUIRE(got.row.size() == 9);
      REQUIRE(expected.row.size() == 9);
      // The lease's id is random: taken or not, alike; otherwise the same answer.
      CHECK((got.row[7] == "NULL") == (expected.row[7] == "NULL"));
      got.row[7] = expected.row[7];
      REQUIRE(got.row == expected.row);
      REQUIRE(lease_state_of(plain) == lease_state_of(general));
    }
    CHECK(by_plain > 500);
  }
}

TEST_CASE("a plain concurrency statement answers nothing for a new owner and refuses a limit "
          "no longer plain, changing nothing",
          "[plain][lease]") {
  EngineOnFile f;
  f.engine.define(make_limit("p", Algorithm::concurrency, 3, 10000));
  f.clock.set(T);
  CHECK(f.engine.acquire_lease("p", "a").allowed);
  const std::string plain_consume =
      detail::statement(Operation::consume, detail::StatementKind::plain_concurrency);
  std::string before = dump(f.path);
  Outcome outcome = run(f.raw.handle(), plain_consume, "p", "new", 1, T + 1);
  CHECK_FALSE(outcome.answered);
  CHECK(outcome.error.empty());
  CHECK(dump(f.path) == before);
  for (const char* change : {"UPDATE quota_limits SET shadow = 1",
                             "INSERT INTO quota_overrides VALUES ('p', 'a', 'exempt', NULL, NULL)",
                             "INSERT INTO quota_overrides VALUES ('*', 'a', 'deny', NULL, NULL)"}) {
    CAPTURE(change);
    f.raw.exec(change);
    before = dump(f.path);
    outcome = run(f.raw.handle(), plain_consume, "p", "a", 1, T + 1);
    CHECK_FALSE(outcome.answered);
    CHECK(outcome.error.find("unknown limit") != std::string::npos);
    CHECK(dump(f.path) == before);
    f.raw.exec("UPDATE quota_limits SET shadow = 0");
    f.raw.exec("DELETE FROM quota_overrides");
  }
  // The engine runs it first, and notices an override set by another connection.
  CHECK(f.engine.consume("p", "a").remaining == 1);
  f.raw.exec("INSERT INTO quota_overrides VALUES ('p', 'a', 'deny', NULL, NULL)");
  const Result denied = f.engine.consume("p", "a");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.reason == Reason::owner_denied);
}

TEST_CASE("a plain statement answers nothing for an owner without state", "[plain]") {
  EngineOnFile f;
  f.engine.define(make_limit("p", Algorithm::fixed_window, 3, 1000));
  f.clock.set(T);
  f.engine.consume("p", "a");
  const std::string before = dump(f.path);
  const Outcome outcome = run(f.raw.handle(),
                              detail::statement(Operation::consume, detail::StatementKind::plain_fixed_window),
                              "p", "new", 1, T + 1);
  CHECK_FALSE(outcome.answered);
  CHECK(outcome.error.empty());
  CHECK(dump(f.path) == before);
}

// Each change of not_plain_changes makes `kind`'s plain consume of limit 'p' (owner 'a' with
// state) fail with "unknown limit", whole or in SQLite's two parts, changing nothing.
void expect_refused_after_each_change(EngineOnFile& f, detail::StatementKind kind,
                                      const std::vector<Change>& changes) {
  for (const Change& change : changes) {
    CAPTURE(change.apply);
    f.raw.exec(change.apply);
    const std::string before = dump(f.path);
    const Outcome outcome =
        run(f.raw.handle(), detail::statement(Operation::consume, kind), "p", "a", 1, T + 1);
    CHECK_FALSE(outcome.answered);
    CHECK(outcome.error.find("unknown limit") != std::string::npos);
    CHECK(dump(f.path) == before);
    // The same in two parts (SQLite's store): the UPDATE refuses, the transaction is undone.
    const Outcome apart = run_parts(
        f.raw, *detail::plain_parts(detail::kSqlite, Operation::consume, kind), "p", "a", 1, T + 1);
    CHECK_FALSE(apart.answered);
    CHECK(apart.error.find("unknown limit") != std::string::npos);
    CHECK(dump(f.path) == before);
    f.raw.exec(change.undo);
  }
}

TEST_CASE("a plain statement refuses a limit or an owner that is no longer plain, changing "
          "nothing",
          "[plain]") {
  EngineOnFile f;
  f.engine.define(make_limit("p", Algorithm::fixed_window, 3, 1000));
  f.clock.set(T);
  f.engine.consume("p", "a");
  expect_refused_after_each_change(f, detail::StatementKind::plain_fixed_window,
                                   not_plain_changes(true));
  // Of another algorithm: a sliding_window statement on this fixed_window limit.
  const Outcome other =
      run(f.raw.handle(), detail::statement(Operation::consume, detail::StatementKind::plain_sliding_window), "p",
          "a", 1, T + 1);
  CHECK(other.error.find("unknown limit") != std::string::npos);
}

TEST_CASE("a flat statement refuses a limit that an override concerns or with a calendar, "
          "and one with overrides a calendar, changing nothing; the engine then runs another",
          "[plain][flat]") {
  EngineOnFile f;
  Limit limit = make_limit("p", Algorithm::fixed_window, 3, 1000);
  limit.block = std::chrono::milliseconds(5000);
  limit.shadow = true;
  f.engine.define(limit);
  f.clock.set(T);
  f.engine.consume("p", "a");
  // Shadow mode and the block are the flat statement's own: only overrides and a calendar
  // (migration 0016's flag, and the fixed_window statements' test) refuse it.
  std::vector<Change> changes = not_plain_changes(true);
  changes.erase(changes.begin(), changes.begin() + 2);
  expect_refused_after_each_change(f, detail::StatementKind::flat_fixed_window, changes);
  CHECK(run(f.raw.handle(), detail::statement(Operation::consume, detail::StatementKind::flat_fixed_window),
            "p", "a", 1, T + 2)
            .answered);
  // Of another algorithm: a sliding_window statement on this fixed_window limit.
  CHECK(run(f.raw.handle(), detail::statement(Operation::consume, detail::StatementKind::flat_sliding_window),
            "p", "a", 1, T + 2)
            .error.find("unknown limit") != std::string::npos);
  // With overrides: only a calendar refuses it.
  expect_refused_after_each_change(f, detail::StatementKind::overridden_fixed_window,
                                   {changes.back()});
  // The engine, which read the limit as flat, notices an override set by another connection.
  f.raw.exec("UPDATE quota_limits SET shadow = 0");
  f.clock.set(T + 3);
  f.engine.consume("p", "a");
  const Result blocked = f.engine.consume("p", "a");
  CHECK(blocked.reason == Reason::rate_limited);
  CHECK(blocked.retry_after_ms == 5000);
  CHECK(f.engine.consume("p", "a").reason == Reason::blocked);
  f.raw.exec("INSERT INTO quota_overrides VALUES ('p', 'a', 'exempt', NULL, NULL)");
  CHECK(f.engine.consume("p", "a").allowed);
  // ...and, now reading it as overridden, that override changed by another connection.
  f.raw.exec("UPDATE quota_overrides SET policy = 'deny'");
  CHECK(f.engine.consume("p", "a").reason == Reason::owner_denied);
}

TEST_CASE("a plain sliding log's statement refuses a limit that is no longer plain, changing "
          "nothing, and the engine then runs the general one",
          "[plain]") {
  EngineOnFile f;
  f.engine.define(make_limit("p", Algorithm::sliding_log, 3, 1000));
  f.clock.set(T);
  f.engine.consume("p", "a");
  expect_refused_after_each_change(f, detail::StatementKind::plain_sliding_log,
                                   not_plain_changes(false));
  // Plain again: it answers, and records the event by the log's trigger.
  const Outcome outcome =
      run(f.raw.handle(), detail::statement(Operation::consume, detail::StatementKind::plain_sliding_log),
          "p", "a", 1, T + 2);
  CHECK(outcome.answered);
  CHECK(f.raw.rows("SELECT count(*) FROM quota_log WHERE owner = 'a'") ==
        std::vector<std::vector<std::string>>{{"2"}});
  // The engine notices a block set by another connection.
  f.raw.exec("UPDATE quota_limits SET block_ms = 5000");
  CHECK(f.engine.consume("p", "a").allowed);
  const Result denied = f.engine.consume("p", "a");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.retry_after_ms >= 5000);
}

TEST_CASE("the engine notices a limit made not plain by another connection", "[plain]") {
  EngineOnFile f;
  f.engine.define(make_limit("p", Algorithm::fixed_window, 1, 60000));
  f.clock.set(T);
  CHECK(f.engine.consume("p", "a").allowed);
  CHECK_FALSE(f.engine.consume("p", "a").allowed);
  // Shadow mode, set by another connection: never denied, the would-be denial counted.
  f.raw.exec("UPDATE quota_limits SET shadow = 1 WHERE name = 'p'");
  Result shadowed = f.engine.consume("p", "a");
  CHECK(shadowed.allowed);
  CHECK(shadowed.shadow_denied);
  f.raw.exec("UPDATE quota_limits SET shadow = 0 WHERE name = 'p'");
  // An override, set by another connection: its maximum applies at once.
  f.raw.exec("INSERT INTO quota_overrides VALUES ('p', 'a', 'maximum', 5, NULL)");
  CHECK(f.engine.consume("p", "a").allowed);
  CHECK(f.engine.consume("p", "a").remaining == 2);
  // And a '*' override that denies, for another owner with state.
  CHECK(f.engine.consume("p", "b").allowed);
  f.raw.exec("INSERT INTO quota_overrides VALUES ('*', 'b', 'deny', NULL, NULL)");
  const Result denied = f.engine.consume("p", "b");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.reason == Reason::owner_denied);
}

TEST_CASE("a plain check answers for an owner without state as the general check, and "
          "nothing for a limit no longer plain, changing nothing",
          "[plain]") {
  EngineOnFile f;
  const Algorithm algorithm =
      GENERATE(Algorithm::fixed_window, Algorithm::sliding_window, Algorithm::token_bucket);
  CAPTURE(to_string(algorithm));
  f.engine.define(algorithm == Algorithm::token_bucket ? make_bucket("p", 3, 1000, 4)
                                                       : make_limit("p", algorithm, 3, 1000));
  f.clock.set(T);
  f.engine.consume("p", "a", 2);
  const auto kind = detail::plain_kind(Operation::check, detail::kind_of(algorithm));
  REQUIRE(kind);
  const std::string& plain_check = detail::statement(Operation::check, *kind);
  const std::string& general_check = detail::statement(Operation::check, detail::kind_of(algorithm));
  for (const char* owner : {"a", "new"}) {
    CAPTURE(owner);
    const std::string before = dump(f.path);
    const Outcome plain = run(f.raw.handle(), plain_check, "p", owner, 2, T + 1);
    const Outcome general = run(f.raw.handle(), general_check, "p", owner, 2, T + 1);
    REQUIRE(plain.answered);
    CHECK(plain.error.empty());
    CHECK(plain.row == general.row);
    CHECK(dump(f.path) == before);
  }
  for (const Change& change : not_plain_changes(false)) {
    CAPTURE(change.apply);
    f.raw.exec(change.apply);
    const std::string before = dump(f.path);
    const Outcome outcome = run(f.raw.handle(), plain_check, "p", "a", 1, T + 1);
    CHECK_FALSE(outcome.answered);
    CHECK(outcome.error.empty());
    CHECK(dump(f.path) == before);
    f.raw.exec(change.undo);
  }
  // Of another algorithm: no row.
  const auto other = algorithm == Algorithm::fixed_window ? detail::StatementKind::plain_token_bucket
                                                          : detail::StatementKind::plain_fixed_window;
  const Outcome outcome = run(f.raw.handle(), detail::statement(Operation::check, other), "p", "a", 1, T + 1);
  CHECK_FALSE(outcome.answered);
  CHECK(outcome.error.empty());
}

TEST_CASE("the engine's check notices a limit made not plain by another connection", "[plain]") {
  EngineOnFile f;
  f.engine.define(make_limit("p", Algorithm::fixed_window, 1, 60000));
  f.clock.set(T);
  CHECK(f.engine.consume("p", "a").allowed);
  CHECK_FALSE(f.engine.check("p", "a").allowed);
  // An override, set by another connection: its maximum applies at once.
  f.raw.exec("INSERT INTO quota_overrides VALUES ('p', 'a', 'maximum', 5, NULL)");
  Result checked = f.engine.check("p", "a");
  CHECK(checked.allowed);
  CHECK(checked.remaining == 4);
  // A '*' override that denies another owner, without state.
  f.raw.exec("INSERT INTO quota_overrides VALUES ('*', 'b', 'deny', NULL, NULL)");
  checked = f.engine.check("p", "b");
  CHECK_FALSE(checked.allowed);
  CHECK(checked.reason == Reason::owner_denied);
  f.raw.exec("DELETE FROM quota_overrides");
  // A block, set by another connection, over an owner blocked when its limit had one.
  CHECK_FALSE(f.engine.check("p", "a").allowed);
  CHECK(f.engine.check("p", "b").allowed);
  f.raw.exec("UPDATE quota_windows SET blocked_until_ms = " + std::to_string(T + 30000) +
             " WHERE owner = 'a'");
  f.raw.exec("UPDATE quota_limits SET block_ms = 30000 WHERE name = 'p'");
  checked = f.engine.check("p", "a");
  CHECK_FALSE(checked.allowed);
  CHECK(checked.reason == Reason::blocked);
  CHECK(checked.retry_after_ms >= 30000);
}

}  // namespace
}  // namespace quota::test
