#include "watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "statements.h"

namespace quota {
namespace detail {

namespace {

// An owner's usage only falls as time passes while nothing is written: events expire,
// windows end, buckets refill. So the first instant after `now` at which its `used` is below
// what it is at `now` can be searched for between `now` and `until` (an instant where it is
// known to be lower): a bisection of checks, each exact.
std::int64_t first_fall(const Usage& usage, std::int64_t now, std::int64_t until,
                        const Probe& probe) {
  std::int64_t same = now;  // used is still usage.used here
  std::int64_t lower = until;
  while (lower - same > 1) {
    const std::int64_t middle = same + (lower - same) / 2;
    if (probe(1, middle).first.used < usage.used) {
      lower = middle;
    } else {
      same = middle;
    }
  }
  return lower;
}

// When the owner gets a unit back. While nothing is overdrawn (used + remaining ==
// capacity: no record beyond the limit, no deny override) the next change is the instant
// that one more unit is free, which is when a check of remaining + 1 is first allowed: that
// check's retry_after_ms, exact by the statement's own contract. Otherwise (a debt that
// falls without freeing a unit) the first fall of `used`, before its reset_at_ms.
std::optional<std::int64_t> next_freed_unit(const Usage& usage, std::int64_t now,
                                            const Probe& probe) {
  if (usage.used <= 0 || usage.reset_at_ms <= now) return std::nullopt;
  if (usage.used + usage.remaining == usage.capacity) {
    if (usage.remaining >= usage.capacity) return std::nullopt;
    const std::int64_t wait = probe(usage.remaining + 1, now).second.retry_after_ms;
    if (wait > 0) return now + wait;
  }
  return first_fall(usage, now, usage.reset_at_ms, probe);
}

// fixed_window: everything counted in the window ends with it, at reset_at_ms = (k+1)·P.
std::optional<std::int64_t> next_window_end(const Usage& usage, std::int64_t now) {
  if (usage.used <= 0 || usage.reset_at_ms <= now) return std::nullopt;
  return usage.reset_at_ms;
}

// One look's reads, each made once: watches of the same limit and owner share them.
class LookCache final : public WatchReader {
 public:
  explicit LookCache(WatchReader& reader) : reader_(reader) {}
  std::int64_t now() override { return reader_.now(); }
  std::string marker() override { return reader_.marker(); }
  std::optional<StatementKind> kind(std::string_view limit) override {
    auto found = kinds_.find(limit);
    if (found == kinds_.end()) {
      found = kinds_.emplace(std::string(limit), reader_.kind(limit)).first;
    }
    return found->second;
  }
  std::vector<std::string> owners(StatementKind kind, std::string_view limit) override {
    auto found = owners_.find(limit);
    if (found == owners_.end()) {
      found = owners_.emplace(std::string(limit), reader_.owners(kind, limit)).first;
    }
    return found->second;
  }
  std::optional<std::pair<Usage, Result>> read(StatementKind kind, std::string_view limit,
                                               std::string_view owner, std::int64_t cost,
                                               std::int64_t at) override {
    Key key{std::string(limit), std::string(owner), cost, at};
    auto found = readings_.find(key);
    if (found == readings_.end()) {
      found =
          readings_.emplace(std::move(key), reader_.read(kind, limit, owner, cost, at)).first;
    }
    return found->second;
  }

 private:
  using Key = std::tuple<std::string, std::string, std::int64_t, std::int64_t>;
  WatchReader& reader_;
  std::map<std::string, std::optional<StatementKind>, std::less<>> kinds_;
  std::map<std::string, std::vector<std::string>, std::less<>> owners_;
  std::map<Key, std::optional<std::pair<Usage, Result>>> readings_;
};

}  // namespace

// One case per algorithm. A time-only change that another part of the state makes (such as
// the end of a block) is one more candidate: the earliest of them is the answer.
std::optional<std::int64_t> next_change(Algorithm algorithm, const Usage& usage, std::int64_t now,
                                        const Probe& probe) {
  std::optional<std::int64_t> at;
  switch (algorithm) {
    case Algorithm::fixed_window:
      at = next_window_end(usage, now);
      break;
    case Algorithm::sliding_log:     // the oldest live event expires (at + P)
    case Algorithm::sliding_window:  // the weighted count falls past a whole unit
    case Algorithm::token_bucket:    // the bucket regains a whole token
    case Algorithm::concurrency:     // the next lease expires
      at = next_freed_unit(usage, now, probe);
      break;
  }
  // The end of a block (Limit::block) lifts `remaining` from 0.
  if (usage.blocked_until_ms && *usage.blocked_until_ms > now &&
      (!at || *usage.blocked_until_ms < *at)) {
    at = *usage.blocked_until_ms;
  }
  return at;
}

}  // namespace detail

bool usage_differs(const Usage& a, const Usage& b) {
  if (a.used != b.used || a.remaining != b.remaining || a.denied != b.denied ||
      a.shadow_denied != b.shadow_denied || a.capacity != b.capacity ||
      a.blocked_until_ms != b.blocked_until_ms) {
    return true;
  }
  // With nothing used, reset_at_ms is the time of the reading.
  return a.used > 0 && a.reset_at_ms != b.reset_at_ms;
}

namespace detail {

// ---------------------------------------------------------------------------------------
// Subscription

bool Subscription::deliver(const Usage& usage) {
  {
    std::lock_guard lock(mutex);
    if (ended) return false;
    running = true;
    runner = std::this_thread::get_id();
  }
  std::exception_ptr thrown;
  try {
    callback(usage);
  } catch (...) {
    thrown = std::current_exception();
  }
  bool still = true;
  {
    std::lock_guard lock(mutex);
    running = false;
    if (thrown) {
      ended = true;
      if (!failure) failure = thrown;
    }
    still = !ended;
  }
  idle.notify_all();
  return still;
}

void Subscription::end(std::exception_ptr why) noexcept {
  std::unique_lock lock(mutex);
  if (!ended) {
    ended = true;
    if (why) failure = why;
  }
  const std::thread::id self = std::this_thread::get_id();
  idle.wait(lock, [&] { return !running || runner == self; });
}

bool Subscription::active() noexcept {
  std::lock_guard lock(mutex);
  return !ended;
}

// ---------------------------------------------------------------------------------------
// WatchHub

WatchHub::WatchHub(std::unique_ptr<WatchReader> reader, std::chrono::milliseconds interval)
    : reader_(std::move(reader)), interval_(std::max(interval, std::chrono::milliseconds(1))) {
  try {
    marker_ = reader_->marker();
  } catch (const Error&) {
    // read again at the first look
  }
  thread_ = std::thread([this] { run(); });
}

WatchHub::~WatchHub() { stop(); }

void WatchHub::add(std::shared_ptr<Subscription> subscription) {
  {
    std::lock_guard lock(mutex_);
    subscriptions_.push_back(std::move(subscription));
    added_ = true;
  }
  wake_.notify_one();
}

void WatchHub::poke() {
  if (poked_.exchange(true, std::memory_order_acq_rel)) return;  // already told
  {
    // Under the lock, so that the thread cannot miss it between its test and its wait.
    std::lock_guard lock(mutex_);
  }
  wake_.notify_one();
}

void WatchHub::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) {
    // A callback that destroys its own Engine is a misuse (engine.h); it must not deadlock.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
  std::vector<std::shared_ptr<Subscription>> ending;
  {
    std::lock_guard lock(mutex_);
    ending.swap(subscriptions_);
  }
  for (const auto& subscription : ending) subscription->end();
}

void WatchHub::run() {
  for (;;) {
    std::vector<std::shared_ptr<Subscription>> subscriptions;
    bool poked = false;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      std::erase_if(subscriptions_,
                    [](const auto& subscription) { return !subscription->active(); });
      added_ = false;
      subscriptions = subscriptions_;
    }
    poked = poked_.exchange(false, std::memory_order_acq_rel);
    const auto looked = std::chrono::steady_clock::now();
    const std::optional<std::int64_t> deadline = refresh(subscriptions, poked);
    subscriptions.clear();

    // Wait for the interval, or less when a change that time alone makes comes sooner.
    std::chrono::milliseconds wait = interval_;
    if (deadline) {
      try {
        const std::int64_t left = *deadline - reader_->now();
        wait = std::clamp(std::chrono::milliseconds(left), std::chrono::milliseconds(0), interval_);
      } catch (const Error&) {
        // the clock of the server failed: look again after the interval
      }
    }
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, wait, [&] { return stopping_ || added_ || poked_.load(); });
    // A write sooner than kPokeGap after the last look waits for the gap to pass, with the
    // writes that follow it meanwhile.
    if (!stopping_ && !added_ && poked_.load()) {
      wake_.wait_until(lock, looked + kPokeGap, [&] { return stopping_ || added_; });
    }
  }
}

std::optional<std::int64_t> WatchHub::refresh(
    const std::vector<std::shared_ptr<Subscription>>& subscriptions, bool poked) {
  std::int64_t now = 0;
  bool changed = poked;
  try {
    // The marker first: a commit after it is seen by the next one, whether or not the reads
    // below already see it.
    const std::string marker = reader_->marker();
    changed = changed || marker != marker_;
    marker_ = marker;
    now = reader_->now();
  } catch (const Error&) {
    for (const auto& subscription : subscriptions) subscription->stale = true;
    return std::nullopt;
  }
  std::optional<std::int64_t> earliest;
  LookCache look(*reader_);
  for (const auto& subscription : subscriptions) {
    Subscription& watch = *subscription;
    if (changed || watch.stale || (watch.next_at && *watch.next_at <= now)) {
      try {
        refresh_one(look, watch, now);
        watch.stale = false;
      } catch (const Error&) {
        watch.stale = true;  // busy or io: read again at the next look
      }
    }
    if (watch.next_at && (!earliest || *watch.next_at < *earliest)) earliest = watch.next_at;
  }
  return earliest;
}

void WatchHub::refresh_one(WatchReader& reader, Subscription& watch, std::int64_t now) {
  const auto removed = [&] {
    watch.end(std::make_exception_ptr(Error(
        ErrorCode::unknown_limit,
        fmt::format("limit '{}' was removed, which ended the watch: watch it again once it is "
                    "defined",
                    watch.limit),
        watch.limit)));
  };
  const std::optional<StatementKind> kind = reader.kind(watch.limit);
  if (!kind) return removed();

  std::set<std::string, std::less<>> owners;
  if (watch.owner) {
    owners.insert(*watch.owner);
  } else {
    for (std::string& owner : reader.owners(*kind, watch.limit)) {
      owners.insert(std::move(owner));
    }
    for (const auto& [owner, usage] : watch.delivered) owners.insert(owner);
  }

  for (const std::string& owner : owners) {
    const Probe probe = [&](std::int64_t cost, std::int64_t at) {
      auto reading = reader.read(*kind, watch.limit, owner, cost, at);
      if (!reading) {
        throw Error(ErrorCode::unknown_limit, fmt::format("limit '{}' is gone", watch.limit));
      }
      return *reading;
    };
    std::optional<std::pair<Usage, Result>> reading =
        reader.read(*kind, watch.limit, owner, 1, now);
    if (!reading) return removed();
    const Usage& usage = reading->first;
    const bool empty = usage.used == 0 && usage.denied == 0 && usage.shadow_denied == 0;
    const auto last = watch.delivered.find(owner);
    // Every owner: an owner without state is shown only to say that its state has gone.
    if (!watch.owner && empty && last == watch.delivered.end()) continue;
    const bool changed = last == watch.delivered.end() || usage_differs(last->second, usage);
    if (changed) {
      if (!watch.deliver(usage)) return;
      if (!watch.owner && empty) {
        watch.delivered.erase(owner);
        watch.next.erase(owner);
        continue;
      }
      watch.delivered.insert_or_assign(owner, usage);
    }
    const auto next = watch.next.find(owner);
    if (changed || next == watch.next.end() || next->second <= now) {
      std::optional<std::int64_t> at;
      try {
        at = next_change(stored_algorithm(*kind), usage, now, probe);
      } catch (const Error& error) {
        if (error.code() == ErrorCode::unknown_limit) return removed();
        throw;
      }
      if (at) {
        watch.next.insert_or_assign(owner, *at);
      } else {
        watch.next.erase(owner);
      }
    }
  }
  watch.next_at.reset();
  for (const auto& [owner, at] : watch.next) {
    if (!watch.next_at || at < *watch.next_at) watch.next_at = at;
  }
}

}  // namespace detail
}  // namespace quota
