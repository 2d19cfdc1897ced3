// quota_limits.plain (migration 0010): the triggers keep it right whoever changes a limit or
// an override (the engine, quotactl, plain SQL, an override of '*'), the migration fills it
// for the limits a database already has, and the engine's plain statements, which guard on
// it, leave a limit made not plain behind its back to the general statement.
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>

#include "backend.h"
#include "cli.h"
#include "quota/policy.h"

namespace quota::test {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t T = 1'700'000'000'000;

// The overridden flag of limit `name` (migration 0016) as 1 or 0, checked against the rule
// that quota_limits_overridden holds.
std::int64_t overridden(const TestDatabase& database, const std::string& name) {
  const std::int64_t flag = database.integer(
      "SELECT CASE WHEN overridden THEN 1 ELSE 0 END FROM quota_limits WHERE name = '" + name + "'");
  CHECK(flag == database.integer("SELECT CASE WHEN overridden THEN 1 ELSE 0 END "
                                 "FROM quota_limits_overridden WHERE name = '" + name + "'"));
  return flag;
}

// The flag of limit `name` as 1 or 0, checked against the rule that quota_limits_plain holds
// (and its overridden flag against its own).
std::int64_t plain(const TestDatabase& database, const std::string& name) {
  overridden(database, name);
  const std::int64_t flag = database.integer(
      "SELECT CASE WHEN plain THEN 1 ELSE 0 END FROM quota_limits WHERE name = '" + name + "'");
  CHECK(flag == database.integer("SELECT CASE WHEN plain THEN 1 ELSE 0 END "
                                 "FROM quota_limits_plain WHERE name = '" + name + "'"));
  return flag;
}

Limit window(const std::string& name) {
  return make_limit(name, Algorithm::fixed_window, 3, 60000);
}

TEST_CASE("the plain flag follows the engine's changes to limits and overrides",
          "[plain][migrations]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.engine.define(window("a"));
  f.engine.define(make_bucket("b", 2, 1000, 4));
  CHECK(plain(f.database, "a") == 1);
  CHECK(plain(f.database, "b") == 1);

  CHECK(overridden(f.database, "a") == 0);
  // An override of the limit, then of '*' (every limit, whatever its owner).
  f.engine.set_override({"a", "u", Policy::exempt});
  CHECK(plain(f.database, "a") == 0);
  CHECK(plain(f.database, "b") == 1);
  CHECK(overridden(f.database, "a") == 1);
  CHECK(overridden(f.database, "b") == 0);
  f.engine.set_override({"a", "v", Policy::maximum, 9});
  CHECK(f.engine.remove_override("a", "u"));
  CHECK(plain(f.database, "a") == 0);  // v's is left
  CHECK(f.engine.remove_override("a", "v"));
  CHECK(plain(f.database, "a") == 1);
  f.engine.set_override({std::string(kEveryLimit), "w", Policy::deny});
  CHECK(plain(f.database, "a") == 0);
  CHECK(plain(f.database, "b") == 0);
  f.engine.define(window("c"));  // defined while a '*' override exists
  CHECK(plain(f.database, "c") == 0);
  CHECK(overridden(f.database, "c") == 1);
  CHECK(f.engine.remove_override(kEveryLimit, "w"));
  CHECK(plain(f.database, "a") == 1);
  CHECK(plain(f.database, "b") == 1);
  CHECK(plain(f.database, "c") == 1);
  CHECK(overridden(f.database, "c") == 0);

  // The limit's own policies, each set and then taken away by define: not plain, and not
  // overridden (the flat statements' limits).
  Limit limit = window("a");
  limit.shadow = true;
  f.engine.define(limit);
  CHECK(plain(f.database, "a") == 0);
  CHECK(overridden(f.database, "a") == 0);
  f.engine.define(window("a"));
  CHECK(plain(f.database, "a") == 1);
  limit = window("a");
  limit.block = 60000ms;
  f.engine.define(limit);
  CHECK(plain(f.database, "a") == 0);
  f.engine.define(window("a"));
  CHECK(plain(f.database, "a") == 1);
  f.engine.define(calendar_limit("a", 3, Calendar::day));
  CHECK(plain(f.database, "a") == 0);
  f.engine.define(window("a"));
  CHECK(plain(f.database, "a") == 1);
  // A change of numbers keeps it.
  f.engine.define(make_limit("a", Algorithm::sliding_window, 5, 1000));
  CHECK(plain(f.database, "a") == 1);

  // A limit removed takes its overrides along; the other limits stay as they were.
  f.engine.set_override({"c", "u", Policy::exempt});
  CHECK(f.engine.remove("c"));
  CHECK(plain(f.database, "a") == 1);
  CHECK(f.database.integer("SELECT count(*) FROM quota_limits_plain") == 2);
}

TEST_CASE("the plain flag follows plain SQL on limits and overrides", "[plain]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.engine.define(window("a"));
  f.engine.define(window("b"));
  f.raw.exec("INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('a', 'u', 'exempt')");
  CHECK(plain(f.database, "a") == 0);
  CHECK(plain(f.database, "b") == 1);
  // Moved to another limit: the first is plain again, the second is not.
  f.raw.exec("UPDATE quota_overrides SET limit_name = 'b' WHERE owner = 'u'");
  CHECK(plain(f.database, "a") == 1);
  CHECK(plain(f.database, "b") == 0);
  CHECK(overridden(f.database, "a") == 0);
  CHECK(overridden(f.database, "b") == 1);
  // A limit renamed: its flag follows the overrides of its new name.
  f.raw.exec("UPDATE quota_limits SET name = 'b2' WHERE name = 'b'");
  CHECK(overridden(f.database, "b2") == 0);
  f.raw.exec("UPDATE quota_limits SET name = 'b' WHERE name = 'b2'");
  CHECK(overridden(f.database, "b") == 1);
  // Moved to '*', and back.
  f.raw.exec("UPDATE quota_overrides SET limit_name = '*' WHERE owner = 'u'");
  CHECK(plain(f.database, "a") == 0);
  CHECK(plain(f.database, "b") == 0);
  f.raw.exec("UPDATE quota_overrides SET limit_name = 'a' WHERE owner = 'u'");
  CHECK(plain(f.database, "a") == 0);
  CHECK(plain(f.database, "b") == 1);
  // A change that keeps the override where it is.
  f.raw.exec("UPDATE quota_overrides SET policy = 'deny' WHERE owner = 'u'");
  CHECK(plain(f.database, "a") == 0);
  f.raw.exec("DELETE FROM quota_overrides");
  CHECK(plain(f.database, "a") == 1);
  CHECK(plain(f.database, "b") == 1);
  // A '*' override inserted and deleted.
  f.raw.exec("INSERT INTO quota_overrides (limit_name, owner, policy, maximum) "
             "VALUES ('*', 'v', 'maximum', 7)");
  CHECK(plain(f.database, "a") == 0);
  CHECK(plain(f.database, "b") == 0);
  f.raw.exec("DELETE FROM quota_overrides WHERE limit_name = '*'");
  CHECK(plain(f.database, "a") == 1);
  CHECK(plain(f.database, "b") == 1);

  // The limit's columns, changed by an UPDATE and by an INSERT.
  f.raw.exec("UPDATE quota_limits SET shadow = NOT shadow WHERE name = 'a'");
  CHECK(plain(f.database, "a") == 0);
  f.raw.exec("UPDATE quota_limits SET shadow = NOT shadow WHERE name = 'a'");
  CHECK(plain(f.database, "a") == 1);
  f.raw.exec("UPDATE quota_limits SET block_ms = 5000 WHERE name = 'a'");
  CHECK(plain(f.database, "a") == 0);
  f.raw.exec("UPDATE quota_limits SET block_ms = NULL WHERE name = 'a'");
  CHECK(plain(f.database, "a") == 1);
  f.raw.exec("UPDATE quota_limits SET period_ms = 86400000, calendar = 'day' WHERE name = 'a'");
  CHECK(plain(f.database, "a") == 0);
  f.raw.exec("UPDATE quota_limits SET calendar = NULL WHERE name = 'a'");
  CHECK(plain(f.database, "a") == 1);
  f.raw.exec("INSERT INTO quota_limits (name, algorithm, maximum, period_ms, block_ms) "
             "VALUES ('c', 'fixed_window', 1, 1000, 1000)");
  CHECK(plain(f.database, "c") == 0);
  f.raw.exec("INSERT INTO quota_limits (name, algorithm, maximum, period_ms) "
             "VALUES ('d', 'fixed_window', 1, 1000)");
  CHECK(plain(f.database, "d") == 1);
  // The block taken away: plain.
  f.raw.exec("UPDATE quota_limits SET block_ms = NULL WHERE name = 'c'");
  CHECK(plain(f.database, "c") == 1);
}

TEST_CASE("the plain flag follows quotactl's changes", "[plain]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  const auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", database.location()});
    std::ostringstream out;
    std::ostringstream err;
    const int status = quotactl::run(args, out, err);
    CAPTURE(args, out.str(), err.str());
    CHECK(status == 0);
  };
  ctl({"migrate"});
  ctl({"limit", "set", "a", "--max", "3", "--per", "1m", "--algo", "fixed_window"});
  CHECK(plain(database, "a") == 1);
  ctl({"override", "set", "a", "u", "--exempt"});
  CHECK(plain(database, "a") == 0);
  ctl({"override", "rm", "a", "u"});
  CHECK(plain(database, "a") == 1);
  ctl({"override", "set", "*", "u", "--max", "5"});
  CHECK(plain(database, "a") == 0);
  ctl({"override", "rm", "*", "u"});
  CHECK(plain(database, "a") == 1);
  ctl({"limit", "set", "a", "--max", "3", "--per", "1m", "--shadow"});
  CHECK(plain(database, "a") == 0);
  ctl({"limit", "set", "a", "--max", "3", "--per", "1m", "--enforce"});
  CHECK(plain(database, "a") == 1);
  ctl({"limit", "set", "a", "--max", "3", "--per", "1m", "--block", "10m"});
  CHECK(plain(database, "a") == 0);
  ctl({"limit", "set", "a", "--max", "3", "--per", "1m", "--no-block"});
  CHECK(plain(database, "a") == 1);
  ctl({"limit", "set", "a", "--max", "3", "--per", "month"});
  CHECK(plain(database, "a") == 0);
  ctl({"limit", "set", "a", "--max", "3", "--per", "1m"});
  CHECK(plain(database, "a") == 1);
}

TEST_CASE("a consume after an override inserted with plain SQL obeys the override",
          "[plain]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn f(backend);
  f.clock.set(T);
  f.engine.define(make_limit("a", Algorithm::fixed_window, 1, 60000));
  f.engine.define(make_bucket("b", 1, 60000, 1));
  // The engine has read both limits as plain, and both owners have state.
  for (const char* name : {"a", "b"}) {
    CHECK(f.engine.consume(name, "u").allowed);
    CHECK_FALSE(f.engine.consume(name, "u").allowed);
  }
  // The statement the engine runs first guards on the flag; it finds the limit not plain,
  // and the general statement, which reads the override, answers.
  f.raw.exec("INSERT INTO quota_overrides (limit_name, owner, policy, maximum) "
             "VALUES ('a', 'u', 'maximum', 5)");
  Result result = f.engine.consume("a", "u");
  CHECK(result.allowed);
  CHECK(result.remaining == 3);
  f.raw.exec("INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('*', 'u', 'exempt')");
  result = f.engine.consume("b", "u");
  CHECK(result.allowed);
  f.raw.exec("DELETE FROM quota_overrides WHERE limit_name = '*'");
  result = f.engine.consume("b", "u");
  CHECK_FALSE(result.allowed);
  CHECK(result.reason == Reason::rate_limited);
  // And with none left, the limit is plain again and decides as the limit says.
  f.raw.exec("DELETE FROM quota_overrides");
  CHECK(plain(f.database, "a") == 1);
  f.clock.set(T + 60000);
  CHECK(f.engine.consume("a", "u").allowed);
  CHECK_FALSE(f.engine.consume("a", "u").allowed);

  // A limit with a block, which the engine reads as flat: its statement guards on the
  // overridden flag, and the general statement answers for the override.
  Limit blocking = make_limit("c", Algorithm::sliding_window, 1, 60000);
  blocking.block = 600000ms;
  f.engine.define(blocking);
  CHECK(f.engine.consume("c", "u").allowed);
  result = f.engine.consume("c", "u");
  CHECK(result.reason == Reason::rate_limited);
  CHECK(result.retry_after_ms == 600000);
  CHECK(f.engine.consume("c", "u").reason == Reason::blocked);
  f.raw.exec("INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('c', 'u', 'exempt')");
  CHECK(overridden(f.database, "c") == 1);
  CHECK(f.engine.consume("c", "u").allowed);
  // The exempt consume cleared the block (an exempt owner is never blocked); without the
  // override the window is still full, so the next consume is denied and blocks again.
  f.raw.exec("DELETE FROM quota_overrides");
  CHECK(overridden(f.database, "c") == 0);
  CHECK(f.engine.consume("c", "u").reason == Reason::rate_limited);
  CHECK(f.engine.consume("c", "u").reason == Reason::blocked);
}

TEST_CASE("migration 0010 gives the limits a database already has their flag",
          "[plain][migrations]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  database.migrate_before(10);
  database.exec(
      "INSERT INTO quota_limits (name, algorithm, maximum, period_ms) VALUES "
      "('bare', 'fixed_window', 1, 1000), ('overridden', 'fixed_window', 1, 1000)");
  database.exec("INSERT INTO quota_limits (name, algorithm, maximum, period_ms, block_ms) "
                "VALUES ('blocking', 'sliding_window', 1, 1000, 1000)");
  database.exec("INSERT INTO quota_limits (name, algorithm, maximum, period_ms, calendar) "
                "VALUES ('daily', 'fixed_window', 1, 86400000, 'day')");
  database.exec("INSERT INTO quota_overrides (limit_name, owner, policy) "
                "VALUES ('overridden', 'u', 'deny')");
  {
    Engine engine = Engine::open(database.location());
    CHECK(engine.schema_version() >= 10);
  }
  CHECK(plain(database, "bare") == 1);
  CHECK(plain(database, "overridden") == 0);
  CHECK(plain(database, "blocking") == 0);
  CHECK(plain(database, "daily") == 0);
}

TEST_CASE("migration 0016 gives the limits a database already has their overridden flag",
          "[plain][flat][migrations]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  TestDatabase database(backend);
  database.migrate_before(16);
  database.exec(
      "INSERT INTO quota_limits (name, algorithm, maximum, period_ms, block_ms) VALUES "
      "('bare', 'fixed_window', 1, 1000, NULL), ('overridden', 'fixed_window', 1, 1000, 1000)");
  database.exec("INSERT INTO quota_overrides (limit_name, owner, policy) "
                "VALUES ('overridden', 'u', 'deny')");
  {
    Engine engine = Engine::open(database.location());
    CHECK(engine.schema_version() >= 16);
  }
  CHECK(overridden(database, "bare") == 0);
  CHECK(overridden(database, "overridden") == 1);
  database.exec("INSERT INTO quota_overrides (limit_name, owner, policy) VALUES ('*', 'v', 'deny')");
  CHECK(overridden(database, "bare") == 1);
  database.exec("DELETE FROM quota_overrides WHERE limit_name = '*'");
  CHECK(overridden(database, "bare") == 0);
  CHECK(overridden(database, "overridden") == 1);
}

}  // namespace
}  // namespace quota::test
