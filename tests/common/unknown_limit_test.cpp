// An unknown limit on every backend: the error names the stored limits the caller likely meant
// (a typo or a difference of case away), whatever call met it, and speaks of the library's
// API only (a program in any language reads it, not only quotactl's users).
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "quota/error.h"
#include "support.h"

namespace quota::test {
namespace {

// The error `call` throws: it must throw quota::Error.
Error error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  FAIL("no error was thrown");
  return Error(ErrorCode::io, "");
}

}  // namespace

TEST_CASE("likely_meant: a typo or a difference of case away, closest first", "[names]") {
  const std::vector<std::string> names{"send_message", "login", "api.read", "api.write"};
  CHECK(likely_meant("send_mesage", names) == std::vector<std::string>{"send_message"});
  CHECK(likely_meant("Send_Message", names) == std::vector<std::string>{"send_message"});
  CHECK(likely_meant("LOGIN", names) == std::vector<std::string>{"login"});
  CHECK(likely_meant("lgoin", names) == std::vector<std::string>{"login"});
  CHECK(likely_meant("api.reed", names) == std::vector<std::string>{"api.read"});
  CHECK(likely_meant("api.rite", names) == std::vector<std::string>{"api.write"});
  // Equally close: both, in the order given.
  CHECK(likely_meant("api.rea", {"api.read", "api.reap", "api.real"}) ==
        std::vector<std::string>{"api.read", "api.reap", "api.real"});
  CHECK(likely_meant("api.ree", {"api.rep", "api.reed"}) == std::vector<std::string>{"api.rep", "api.reed"});
  CHECK(likely_meant("login", names).empty());  // not a typo
  CHECK(likely_meant("payments", names).empty());
  CHECK(likely_meant("lo", names).empty());
  CHECK(likely_meant("", names).empty());
  CHECK(likely_meant("send", {}).empty());
}

TEST_CASE("an unknown limit's error offers the limits likely meant, through every call",
          "[engine][names]") {
  const Backend backend = each_backend();
  CAPTURE(to_string(backend));
  EngineOn on(backend);
  Engine& engine = on.engine;
  engine.define(make_limit("send_message"));
  engine.define(make_limit("login", Algorithm::token_bucket));
  engine.consume("send_message", "u1");
  const std::string before = on.database.dump();

  const std::vector<std::pair<const char*, std::function<void(const std::string&)>>> calls{
      {"consume", [&](const std::string& name) { engine.consume(name, "u1"); }},
      {"check", [&](const std::string& name) { engine.check(name, "u1"); }},
      {"record", [&](const std::string& name) { engine.record(name, "u1"); }},
      {"reset", [&](const std::string& name) { engine.reset(name, "u1"); }},
      {"refund", [&](const std::string& name) { engine.refund(name, "u1", 1); }},
      {"usage", [&](const std::string& name) { engine.usage(name); }},
      {"owner_usage", [&](const std::string& name) { engine.owner_usage(name, "u1"); }},
      {"consume_many",
       [&](const std::string& name) { engine.consume_many({{"login", "u1", 1}, {name, "u1", 1}}); }},
      {"check_many", [&](const std::string& name) { engine.check_many({{name, "u1", 1}}); }},
      {"consume_all",
       [&](const std::string& name) { engine.consume_all({"login", name}, "u1"); }},
      {"set_override",
       [&](const std::string& name) {
         Override override;
         override.limit = name;
         override.owner = "u1";
         override.policy = Policy::exempt;
         engine.set_override(override);
       }},
  };
  for (const auto& [call, run] : calls) {
    CAPTURE(call);
    const Error typo = error_of([&] { run("send_mesage"); });
    CHECK(typo.code() == ErrorCode::unknown_limit);
    CHECK(typo.limit() == "send_mesage");
    CHECK(typo.meant() == std::vector<std::string>{"send_message"});
    CHECK(std::string(typo.what()) ==
          "unknown limit 'send_mesage': did you mean 'send_message'? (Engine::list gives the "
          "limits there are)");

    const Error cased = error_of([&] { run("LOGIN"); });
    CHECK(cased.meant() == std::vector<std::string>{"login"});
    CHECK_THAT(cased.what(), Catch::Contains("did you mean 'login'?"));

    const Error unlike = error_of([&] { run("payments"); });
    CHECK(unlike.code() == ErrorCode::unknown_limit);
    CHECK(unlike.meant().empty());
    CHECK(std::string(unlike.what()) ==
          "unknown limit 'payments': define it first (Engine::define); Engine::list gives the "
          "limits there are");
    // The library speaks of its own API: no tool's command in its messages.
    for (const Error& error : {typo, cased, unlike}) {
      CHECK_THAT(error.what(), !Catch::Contains("quotactl"));
    }
  }
  CHECK(on.database.dump() == before);
  // The engine works on after the errors (on PostgreSQL: no transaction left aborted).
  CHECK(engine.consume("send_message", "u1").allowed);
}

}  // namespace quota::test
