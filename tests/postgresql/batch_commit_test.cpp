// A commit that fails on PostgreSQL (a deferred constraint trigger refuses it at COMMIT): every
// request of the batch fails, under group commit and in a batch call, and nothing of it is
// kept; with fail_open, every one is answered store_unavailable.
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "support.h"

namespace quota::test {
namespace {

constexpr std::int64_t T = 1'700'000'000'000;
constexpr std::int64_t kDay = 86'400'000;

// Owner "poison" of any fixed window makes the transaction fail at its commit, whatever else
// it holds.
void refuse_poison_at_commit(const TestDatabase& database) {
  database.exec(
      "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN RAISE EXCEPTION 'poison refused at commit'; END $$");
  database.exec(
      "CREATE CONSTRAINT TRIGGER refuse_poison AFTER INSERT OR UPDATE ON quota_windows "
      "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.owner = 'poison') "
      "EXECUTE FUNCTION refuse_poison()");
}

TEST_CASE("a batch whose commit fails fails every request of it, or answers each per policy",
          "[postgresql][batch]") {
  const bool fail_open = GENERATE(false, true);
  CAPTURE(fail_open);
  TestDatabase database(Backend::postgresql);
  ManualClock clock;
  clock.set(T);
  Options options = options_with(clock);
  if (fail_open) options.failure_policy = FailurePolicy::fail_open;
  // on_error runs on the threads of the requests (group commit): what it is told is kept under
  // a lock and checked on this thread, since Catch's assertions are not thread-safe.
  std::mutex reports_mutex;
  std::vector<std::string> reports;
  options.on_error = [&](const Error& error) {
    const std::lock_guard lock(reports_mutex);
    reports.emplace_back(error.what());
  };
  const auto reported = [&] {
    const std::lock_guard lock(reports_mutex);
    for (const std::string& report : reports) {
      CHECK_THAT(report, Catch::Contains("poison refused at commit"));
    }
    return static_cast<int>(reports.size());
  };
  Engine engine = Engine::open(database.location(), options);
  engine.define(make_limit("win", Algorithm::fixed_window, 100, kDay));
  engine.define(make_limit("slow", Algorithm::fixed_window, 100, kDay));
  refuse_poison_at_commit(database);
  engine.consume("win", "rkept");
  const std::string before = database.dump();

  SECTION("a batch call") {
    const std::vector<BatchRequest> requests = {
        {"win", "a", 1}, {"win", "poison", 1}, {"win", "rkept", 1}};
    if (fail_open) {
      const std::vector<Result> answers = engine.consume_many(requests);
      REQUIRE(answers.size() == 3);
      for (const Result& answer : answers) {
        CHECK(answer.allowed);
        CHECK(answer.reason == Reason::store_unavailable);
      }
      CHECK(reported() == 1);
    } else {
      try {
        engine.consume_many(requests);
        FAIL("no error");
      } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::io);
        CHECK_THAT(error.what(), Catch::Contains("poison refused at commit"));
      }
    }
    CHECK(database.dump() == before);
  }

  SECTION("group commit: the poison request leads a batch of requests that queued") {
    // The holder's batch runs alone and commits; the queued requests form the next batch,
    // which runs them in the order of (limit, owner): poison first.
    const std::vector<std::string> owners = {"poison", "q1", "q2", "q3", "rkept"};
    std::vector<BatchRequest> requests;
    for (const std::string& owner : owners) requests.push_back({"win", owner, 1});
    const std::vector<Outcome> outcomes =
        queue_behind_a_slow_request(engine, requests, std::chrono::milliseconds(500));
    std::vector<std::optional<Result>> answers;
    std::vector<std::string> errors;
    for (const Outcome& outcome : outcomes) {
      answers.push_back(outcome.result);
      errors.push_back(outcome.error);
    }
    int failed = 0;
    for (std::size_t i = 0; i < owners.size(); ++i) {
      CAPTURE(owners[i]);
      const bool refused = fail_open ? answers[i] && answers[i]->reason == Reason::store_unavailable
                                     : !errors[i].empty();
      if (refused) {
        ++failed;
        if (!fail_open) CHECK_THAT(errors[i], Catch::Contains("poison refused at commit"));
        if (owners[i] != "rkept") CHECK(engine.owner_usage("win", owners[i]).used == 0);
      } else {
        // In a later batch (the batch's time bound): answered, and kept.
        REQUIRE(answers[i]);
        CHECK(answers[i]->allowed);
        CHECK(answers[i]->reason == Reason::ok);
        CHECK(engine.owner_usage("win", owners[i]).used == (owners[i] == "rkept" ? 2 : 1));
      }
    }
    CHECK((!errors[0].empty() || fail_open));
    CHECK(failed >= 2);  // the poison request and at least one of its batch
    if (fail_open) CHECK(reported() == failed);
  }
}

}  // namespace
}  // namespace quota::test
