// A reference model of docs/concepts.md (operations, algorithms, clock), written from it and
// independently of the SQL: plain containers, no cleverness, so that it is obviously right.
// The property tests run the engine and this model side by side and compare every field.
//
// How it works. Each (limit, owner) has an OwnerState: the remembered time (the latest time
// an operation that writes has seen), the denied counter, and a Counter that knows one
// algorithm's usage. Every operation is evaluated at t = max(request time, remembered time);
// its retry_after_ms is measured from the request's time (the wait at t, plus t - request time).
// Everything the Result reports is derived from a few questions put to the Counter:
//   used(t)            the usage at t, as the docs' table defines it (`remaining` is the
//                      capacity minus that, for every algorithm);
//   fits(t, cost)      the docs' "allowed" inequality, in exact integers;
//   reset_at(t)        when usage is back to zero, per the docs' table.
// retry_after is not a formula: usage never grows while nothing happens, so "the request
// fits at t + d" is false up to some d and true from then on (at reset_at at the latest),
// and a binary search over d finds the smallest. changes_after(t) lists the moments after t
// at which usage drops (events expiring, windows ending, tokens becoming whole), for tests
// that aim at boundaries.
//
// Arithmetic is done in 128 bits, so that the model stays exact at the largest
// configurations the engine accepts, where the engine must take care not to overflow.
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

// 128-bit integers for exact products such as count x period_ms (__extension__ keeps
// -Wpedantic quiet about the GCC/Clang type).
__extension__ typedef __int128 Wide;

// One algorithm's usage for one owner.
class Counter {
 public:
  virtual ~Counter() = default;
  // Units in use at t (never called with a t earlier than the latest write).
  virtual std::int64_t used(const Limit& limit, std::int64_t t) const = 0;
  // Whether `cost` more units (cost <= capacity) are allowed at t. By default: used + cost
  // <= capacity.
  virtual bool fits(const Limit& limit, std::int64_t t, std::int64_t cost) const;
  // An operation that writes (consume, allowed or denied, or record) evaluated the state at t.
  virtual void touch(const Limit&, std::int64_t) {}
  // Records `cost` units at t.
  virtual void add(const Limit& limit, std::int64_t t, std::int64_t cost) = 0;
  // Gives back up to `cost` units at t (a refund), never below zero.
  virtual void take(const Limit& limit, std::int64_t t, std::int64_t cost) = 0;
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
  // The newest events first.
  void take(const Limit& limit, std::int64_t t, std::int64_t cost) override;
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
  void take(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const override;
  std::int64_t reset_at(const Limit& limit, std::int64_t t) const override;

  std::map<std::int64_t, std::int64_t> windows;  // window index -> units recorded in it
};

// sliding_window: a count per epoch-aligned window, like fixed_window, estimated as
// cur + prev * (P - e) / P; kept exactly as the "weight" cur * P + prev * (P - e).
class SlidingWindowCounter : public Counter {
 public:
  std::int64_t used(const Limit& limit, std::int64_t t) const override;
  bool fits(const Limit& limit, std::int64_t t, std::int64_t cost) const override;
  void add(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  // From the current window only.
  void take(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const override;
  std::int64_t reset_at(const Limit& limit, std::int64_t t) const override;

  // cur * P + prev * (P - e) at t: the estimate times P.
  Wide weight(const Limit& limit, std::int64_t t) const;

  std::map<std::int64_t, Wide> windows;  // window index -> units recorded in it
};

// token_bucket: capacity B = burst (default maximum), refilled by M tokens per P. The level
// is tokens * P, an integer, so a refill of M * (elapsed ms) loses nothing. The limit's
// numbers are those of the moment of evaluation: after a redefinition the level is clamped
// to the new capacity and refills at the new rate from the latest write on.
class TokenBucketCounter : public Counter {
 public:
  std::int64_t used(const Limit& limit, std::int64_t t) const override;
  bool fits(const Limit& limit, std::int64_t t, std::int64_t cost) const override;
  void touch(const Limit& limit, std::int64_t t) override;
  void add(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  // Tokens back, up to the capacity.
  void take(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const override;
  std::int64_t reset_at(const Limit& limit, std::int64_t t) const override;

  // Tokens * P at t: min(B * P, level + M * (t - then)); full for an owner never written.
  Wide level_at(const Limit& limit, std::int64_t t) const;

  std::optional<Wide> level;  // tokens * P at `then`; empty: never written (full)
  std::int64_t then = 0;      // when `level` was computed (the latest write)
};

class Model {
 public:
  // Same algorithm: state kept, new numbers apply (the model does not follow a change of
  // period: windows and a bucket's level are kept in units of the old one). Other
  // algorithm: the limit's state goes.
  void define(const Limit& limit);
  // Removes the limit and its state; false when there was none.
  bool remove(const std::string& name);

  // The operations (docs/) at request time `now`. The limit must be defined.
  Result check(const std::string& limit, const std::string& owner, std::int64_t cost,
               std::int64_t now) const;
  Result consume(const std::string& limit, const std::string& owner, std::int64_t cost,
                 std::int64_t now);
  Result record(const std::string& limit, const std::string& owner, std::int64_t cost,
                std::int64_t now);
  Result reset(const std::string& limit, const std::string& owner, std::int64_t now);
  Result refund(const std::string& limit, const std::string& owner, std::int64_t cost,
                std::int64_t now);

  // Policies (docs/): overrides (limit or "*") and, through Limit::shadow, shadow mode.
  void set_override(const Override& override);
  void remove_override(const std::string& limit, const std::string& owner);

  // Owners with usage, denials or shadow denials at `now`, most used first, then by owner
  // (Engine::usage).
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
    std::int64_t shadow_denied = 0;
    std::unique_ptr<Counter> counter;
    std::optional<std::int64_t> blocked_until;  // the end of the latest block, if any
  };

  // The limit as `owner` sees it (an override's numbers, bounded as the SQL bounds them)
  // and the override's policy, if any.
  struct Rule {
    Limit limit;
    std::optional<Policy> policy;
  };
  Rule rule_for(const std::string& limit, const std::string& owner) const;
  // Is a request of `cost` allowed at t, as if enforcing, by the override and the algorithm
  // (a block, block_at, comes on top)?
  static bool verdict(const Rule& rule, const OwnerState& state, std::int64_t t, std::int64_t cost);
  // The end of the owner's block if one holds at t (Limit::block: never in shadow mode, never
  // on a limit without a block), whatever the owner's policy.
  static std::optional<std::int64_t> block_at(const Rule& rule, const OwnerState& state,
                                              std::int64_t t);

  static std::unique_ptr<Counter> new_counter(Algorithm algorithm);
  const OwnerState* find(const std::string& limit, const std::string& owner) const;
  OwnerState& state(const std::string& limit, const std::string& owner);
  std::int64_t time_of(const OwnerState* state, std::int64_t now) const;
  // The Result for `state` at t, once the operation has written what it writes; `allowed` is
  // verdict() before it, `block` the block that held when it began.
  Result answer(const Rule& rule, const OwnerState& state, std::int64_t t, std::int64_t cost,
                bool allowed, std::optional<std::int64_t> block) const;
  static bool fits(const Limit& limit, const Counter& counter, std::int64_t t, std::int64_t cost);
  // `result`, evaluated at t, as answered to a caller whose time is `now` (<= t): a finite
  // wait is measured from the caller's time, t - now longer; 0 and -1 stay.
  static Result from_caller(Result result, std::int64_t t, std::int64_t now);
  // The smallest d >= 1 at which a request of `cost` (which does not fit at t) fits at t + d.
  static std::int64_t wait(const Limit& limit, const Counter& counter, std::int64_t t,
                           std::int64_t cost);

  std::map<std::string, Limit> limits_;
  std::map<std::pair<std::string, std::string>, OwnerState> owners_;
  std::map<std::pair<std::string, std::string>, Override> overrides_;
};

// Whether two usage listings (Engine::usage, Model::usage) agree in every field.
bool same_usage(const std::vector<Usage>& actual, const std::vector<Usage>& expected);

}  // namespace quota::test

namespace quota {
// "allowed=1 reason=ok remaining=1 retry_after_ms=0 reset_at_ms=6000 denied=0", so that
// Catch prints Results readably.
std::ostream& operator<<(std::ostream& out, const Result& result);
}  // namespace quota
