// A reference model of SPEC §3-§4 and the clock rule of §8, written from the SPEC alone and
// independently of the SQL: plain containers, no cleverness, so that it is obviously right.
// The property tests run the engine and this model side by side and compare every field.
//
// How it works. Each (limit, owner) has an OwnerState: the remembered time (the latest time
// an operation that writes has seen), the denied counter, and a Counter that knows one
// algorithm's usage. Every operation is evaluated at t = max(request time, remembered time).
// Everything the Result reports is derived from three questions put to the Counter:
//   used(t)            the usage at t, as the SPEC's table defines it;
//   changes_after(t)   the times after t at which usage can drop (events expiring, windows
//                      ending), so that retry_after is "the smallest of these times at which
//                      the request fits" rather than a formula copied from the engine;
//   reset_at(t)        when usage is back to zero, per the SPEC's table.
// Adding an algorithm (sliding_window, token_bucket) means adding one Counter.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quota/engine.h"
#include "quota/limit.h"
#include "quota/result.h"

namespace quota::test {

// One algorithm's usage for one owner.
class Counter {
 public:
  virtual ~Counter() = default;
  // Units in use at t (never called with a t earlier than a recorded event).
  virtual std::int64_t used(const Limit& limit, std::int64_t t) const = 0;
  // Records `cost` units at t.
  virtual void add(const Limit& limit, std::int64_t t, std::int64_t cost) = 0;
  // The times after t at which used() may become smaller, ascending.
  virtual std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const = 0;
  // When usage is back to zero if nothing else happens; t when nothing is used.
  virtual std::int64_t reset_at(const Limit& limit, std::int64_t t) const = 0;
};

// sliding_log: every recorded event counts for exactly P after it happened.
class SlidingLogCounter : public Counter {
 public:
  std::int64_t used(const Limit& limit, std::int64_t t) const override;
  void add(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const override;
  std::int64_t reset_at(const Limit& limit, std::int64_t t) const override;

  struct Event {
    std::int64_t at;
    std::int64_t cost;
  };
  std::vector<Event> events;  // in the order recorded (times never decrease)
};

// fixed_window: a count per epoch-aligned window k = floor(t / P).
class FixedWindowCounter : public Counter {
 public:
  std::int64_t used(const Limit& limit, std::int64_t t) const override;
  void add(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const override;
  std::int64_t reset_at(const Limit& limit, std::int64_t t) const override;

  std::map<std::int64_t, std::int64_t> windows;  // window index -> units recorded in it
};

class Model {
 public:
  // Same algorithm: state kept, new numbers apply. Other algorithm: the limit's state goes.
  void define(const Limit& limit);
  // Removes the limit and its state; false when there was none.
  bool remove(const std::string& name);

  // The operations of SPEC §4 at request time `now`. The limit must be defined.
  Result check(const std::string& limit, const std::string& owner, std::int64_t cost,
               std::int64_t now) const;
  Result consume(const std::string& limit, const std::string& owner, std::int64_t cost,
                 std::int64_t now);
  Result record(const std::string& limit, const std::string& owner, std::int64_t cost,
                std::int64_t now);
  Result reset(const std::string& limit, const std::string& owner, std::int64_t now);

  // Owners with usage or denials at `now`, most used first, then by owner (Engine::usage).
  std::vector<Usage> usage(const std::string& limit, std::int64_t now) const;

  // For tests that aim at boundaries: the times after the owner's evaluation time at which
  // its usage may change, and that evaluation time itself.
  std::vector<std::int64_t> changes_after(const std::string& limit, const std::string& owner,
                                          std::int64_t now) const;
  std::int64_t evaluation_time(const std::string& limit, const std::string& owner,
                               std::int64_t now) const;

  const Limit& limit(const std::string& name) const { return limits_.at(name); }
  bool has_limit(const std::string& name) const { return limits_.count(name) != 0; }

 private:
  struct OwnerState {
    std::optional<std::int64_t> remembered;  // the clock rule's latest time seen
    std::int64_t denied = 0;
    std::unique_ptr<Counter> counter;
  };

  // What the decision at t says about a request of `cost`, before anything is written.
  struct Decision {
    std::int64_t t;
    bool fits;  // cost <= capacity and used + cost <= maximum
  };

  static std::unique_ptr<Counter> new_counter(Algorithm algorithm);
  const OwnerState* find(const std::string& limit, const std::string& owner) const;
  OwnerState& state(const std::string& limit, const std::string& owner);
  std::int64_t time_of(const OwnerState* state, std::int64_t now) const;
  // The Result for `state` at t, once the operation has written what it writes.
  Result answer(const Limit& limit, const OwnerState& state, std::int64_t t, std::int64_t cost,
                bool allowed) const;
  static bool fits(const Limit& limit, const Counter& counter, std::int64_t t, std::int64_t cost);

  std::map<std::string, Limit> limits_;
  std::map<std::pair<std::string, std::string>, OwnerState> owners_;
};

}  // namespace quota::test

namespace quota {
// "allowed=1 reason=ok remaining=1 retry_after_ms=0 reset_at_ms=6000 denied=0", so that
// Catch prints Results readably.
std::ostream& operator<<(std::ostream& out, const Result& result);
}  // namespace quota
