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
// Concurrency limits (SPEC §13) are one more Counter: the owner's leases, each holding its
// cost until its expiry; used(t) is the units of the leases unexpired at t, so remaining,
// retry_after_ms (the wait until enough held units expire) and reset_at_ms (the last expiry)
// come from the same questions as for the rate algorithms. acquire, renew and release add
// what leases have beyond a counter: ids (the model's own numbers; a test maps them to the
// engine's random ids), renewal and release.
//
// Idempotency keys (SPEC §14) wrap any request: keyed() answers a repeat of the key's request
// within Options::idempotency_ttl of its first from the stored answer (replayed, charging
// nothing), a different request under the key as a conflict, and otherwise decides it and
// stores its answer.
//
// Arithmetic is done in 128 bits, so that the model stays exact at the largest
// configurations the engine accepts, where the engine must take care not to overflow.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "quota/engine.h"
#include "quota/lease.h"
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

// concurrency: the owner's leases. A lease holds its cost while t < expires_at; the model
// keeps expired leases (only release and reset delete one), since a request whose time is
// behind the owner's remembered time may still see them unexpired.
class ConcurrencyCounter : public Counter {
 public:
  std::int64_t used(const Limit& limit, std::int64_t t) const override;
  // A new lease of `cost` until t + TTL (the limit's period), with id 0 (Model names it).
  void add(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  // Leases have no refund (refund refuses a concurrency limit).
  void take(const Limit& limit, std::int64_t t, std::int64_t cost) override;
  // The expiries after t.
  std::vector<std::int64_t> changes_after(const Limit& limit, std::int64_t t) const override;
  // The last expiry of the leases unexpired at t; t when there is none.
  std::int64_t reset_at(const Limit& limit, std::int64_t t) const override;

  struct Held {
    std::int64_t id;  // the model's number; 0: taken by consume or record, which name none
    std::int64_t cost;
    std::int64_t expires_at;
    std::int64_t acquired_at;
  };
  std::vector<Held> leases;  // in the order taken
};

// acquire's and renew's answer: the Result and the lease (the model's id, 0 when none was
// taken) with its expiry (0 when none).
struct LeaseAnswer {
  Result result;
  std::int64_t lease = 0;
  std::int64_t expires_at_ms = 0;
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
  // Forgets the owner's state, leases and idempotency keys on the limit.
  Result reset(const std::string& limit, const std::string& owner, std::int64_t now);
  Result refund(const std::string& limit, const std::string& owner, std::int64_t cost,
                std::int64_t now);

  // Concurrency limits (SPEC §13). acquire is consume, naming the lease it takes. renew moves
  // an unexpired lease's expiry to now + ttl (default: its limit's TTL); an unknown or
  // expired one answers lease_expired. release frees it; true when it was held (unexpired
  // at now). Both judge expiry at the request's time, not the owner's remembered time.
  LeaseAnswer acquire(const std::string& limit, const std::string& owner, std::int64_t cost,
                      std::int64_t now);
  LeaseAnswer renew(std::int64_t lease, std::optional<std::int64_t> ttl_ms, std::int64_t now);
  bool release(std::int64_t lease, std::int64_t now);
  // The unexpired leases of a limit at `now` (the request's time) as Engine::leases lists
  // them, by owner, expiry and id; each one's `lease` is the model's id in decimal ("0" for
  // one taken by consume or record).
  std::vector<LeaseInfo> leases(const std::string& limit, std::int64_t now) const;

  // Idempotency keys (SPEC §14). `request` names what was asked ("consume 1", "record 5",
  // "acquire 2": the engine's request text); `decide` runs it when the key is new or expired.
  // Returns the stored answer with replayed set for a repeat of the same request within the
  // key's lifetime (measured from the first request's time), nullopt for another request
  // under a live key (idempotency_conflict, nothing changed). A keyed acquire is
  // keyed(limit, owner, key, its request text, now, [&] { return acquire(...); }): the stored
  // answer keeps the lease's id and expiry, so a replay names the lease the first one took.
  std::optional<LeaseAnswer> keyed(const std::string& limit, const std::string& owner,
                                   const std::string& key, const std::string& request,
                                   std::int64_t now, const std::function<LeaseAnswer()>& decide);
  std::optional<Result> consume(const std::string& limit, const std::string& owner,
                                std::int64_t cost, std::int64_t now, const std::string& key);
  std::optional<Result> record(const std::string& limit, const std::string& owner,
                               std::int64_t cost, std::int64_t now, const std::string& key);
  void set_idempotency_ttl(std::int64_t ms) { idempotency_ttl_ms_ = ms; }

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

  // The lease `id` and its owner's key, if the model holds it (expired or not).
  struct Found {
    std::pair<std::string, std::string> key;
    ConcurrencyCounter::Held* held;
  };
  std::optional<Found> find_lease(std::int64_t id);
  std::int64_t last_lease_ = 0;

  struct StoredKey {
    std::string request;
    LeaseAnswer answer;
    std::int64_t expires_at;
  };
  // (limit, owner, key) -> the first answer.
  std::map<std::tuple<std::string, std::string, std::string>, StoredKey> keys_;
  std::int64_t idempotency_ttl_ms_ = 86'400'000;
};

// Whether two usage listings (Engine::usage, Model::usage) agree in every field.
bool same_usage(const std::vector<Usage>& actual, const std::vector<Usage>& expected);

}  // namespace quota::test

namespace quota {
// "allowed=1 reason=ok remaining=1 retry_after_ms=0 reset_at_ms=6000 denied=0", so that
// Catch prints Results readably.
std::ostream& operator<<(std::ostream& out, const Result& result);
}  // namespace quota
