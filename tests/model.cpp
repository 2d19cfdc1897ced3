#include "model.h"

#include <algorithm>
#include <limits>
#include <ostream>
#include <stdexcept>

namespace quota::test {
namespace {

// Division rounding down or up, also for negative numerators (denominators are positive).
Wide floor_div(Wide numerator, Wide denominator) {
  const Wide quotient = numerator / denominator;
  return quotient * denominator > numerator ? quotient - 1 : quotient;
}
Wide ceil_div(Wide numerator, Wide denominator) { return -floor_div(-numerator, denominator); }

std::int64_t narrow(Wide value) {
  if (value > std::numeric_limits<std::int64_t>::max() ||
      value < std::numeric_limits<std::int64_t>::min()) {
    throw std::logic_error("model: a figure beyond 64 bits");
  }
  return static_cast<std::int64_t>(value);
}

// The first `count` moments after t at which counter.used() drops, found by binary search:
// usage never grows while nothing happens, and at reset_at it is zero.
std::vector<std::int64_t> drops_after(const Counter& counter, const Limit& limit, std::int64_t t,
                                      int count) {
  std::vector<std::int64_t> times;
  for (std::int64_t from = t; count-- > 0;) {
    const std::int64_t used = counter.used(limit, from);
    if (used == 0) break;
    std::int64_t low = from, high = counter.reset_at(limit, from);  // used(high) == 0
    while (high - low > 1) {
      const std::int64_t middle = low + (high - low) / 2;
      (counter.used(limit, middle) < used ? high : low) = middle;
    }
    times.push_back(high);
    from = high;
  }
  return times;
}

std::vector<std::int64_t> sorted_unique(std::vector<std::int64_t> times) {
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  return times;
}

}  // namespace

bool Counter::fits(const Limit& limit, std::int64_t t, std::int64_t cost) const {
  return used(limit, t) + cost <= limit.capacity();
}

// ---- sliding_log ----------------------------------------------------------------------------

std::int64_t SlidingLogCounter::used(const Limit& limit, std::int64_t t) const {
  std::int64_t sum = 0;
  for (const Event& event : events) {
    if (event.at > t - limit.period.count()) sum += event.cost;
  }
  return sum;
}

void SlidingLogCounter::add(const Limit&, std::int64_t t, std::int64_t cost) {
  events.push_back({t, cost});
}

std::vector<std::int64_t> SlidingLogCounter::changes_after(const Limit& limit,
                                                           std::int64_t t) const {
  std::vector<std::int64_t> times;
  for (const Event& event : events) {
    const std::int64_t expiry = event.at + limit.period.count();
    if (expiry > t) times.push_back(expiry);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  return times;
}

void SlidingLogCounter::take(const Limit& limit, std::int64_t t, std::int64_t cost) {
  for (auto event = events.rbegin(); event != events.rend() && cost > 0; ++event) {
    if (event->at <= t - limit.period.count()) break;
    const std::int64_t given = std::min(cost, event->cost);
    event->cost -= given;
    cost -= given;
  }
  std::erase_if(events, [](const Event& event) { return event.cost == 0; });
}

std::int64_t SlidingLogCounter::reset_at(const Limit& limit, std::int64_t t) const {
  std::optional<std::int64_t> newest;
  for (const Event& event : events) {
    if (event.at > t - limit.period.count()) newest = std::max(newest.value_or(event.at), event.at);
  }
  return newest ? *newest + limit.period.count() : t;
}

// ---- fixed_window ---------------------------------------------------------------------------

std::int64_t FixedWindowCounter::used(const Limit& limit, std::int64_t t) const {
  const auto found = windows.find(t / limit.period.count());
  return found == windows.end() ? 0 : found->second;
}

void FixedWindowCounter::add(const Limit& limit, std::int64_t t, std::int64_t cost) {
  windows[t / limit.period.count()] += cost;
}

void FixedWindowCounter::take(const Limit& limit, std::int64_t t, std::int64_t cost) {
  std::int64_t& count = windows[t / limit.period.count()];
  count -= std::min(count, cost);
}

std::vector<std::int64_t> FixedWindowCounter::changes_after(const Limit& limit,
                                                            std::int64_t t) const {
  const std::int64_t period = limit.period.count();
  return {(t / period + 1) * period};
}

std::int64_t FixedWindowCounter::reset_at(const Limit& limit, std::int64_t t) const {
  const std::int64_t period = limit.period.count();
  return used(limit, t) > 0 ? (t / period + 1) * period : t;
}

// ---- sliding_window -------------------------------------------------------------------------

Wide SlidingWindowCounter::weight(const Limit& limit, std::int64_t t) const {
  const std::int64_t period = limit.period.count();
  const std::int64_t k = t / period;
  const std::int64_t e = t - k * period;
  auto count = [&](std::int64_t window) {
    const auto found = windows.find(window);
    return found == windows.end() ? Wide{0} : found->second;
  };
  return count(k) * period + count(k - 1) * (period - e);
}

std::int64_t SlidingWindowCounter::used(const Limit& limit, std::int64_t t) const {
  return narrow(ceil_div(weight(limit, t), limit.period.count()));
}

bool SlidingWindowCounter::fits(const Limit& limit, std::int64_t t, std::int64_t cost) const {
  const Wide period = limit.period.count();
  return cost <= limit.maximum && weight(limit, t) + cost * period <= limit.maximum * period;
}

void SlidingWindowCounter::add(const Limit& limit, std::int64_t t, std::int64_t cost) {
  windows[t / limit.period.count()] += cost;
}

void SlidingWindowCounter::take(const Limit& limit, std::int64_t t, std::int64_t cost) {
  Wide& count = windows[t / limit.period.count()];
  count -= std::min(count, Wide{cost});
}

std::vector<std::int64_t> SlidingWindowCounter::changes_after(const Limit& limit,
                                                              std::int64_t t) const {
  const std::int64_t period = limit.period.count();
  std::vector<std::int64_t> times = drops_after(*this, limit, t, 3);
  times.push_back((t / period + 1) * period);
  times.push_back((t / period + 2) * period);
  return sorted_unique(times);
}

std::int64_t SlidingWindowCounter::reset_at(const Limit& limit, std::int64_t t) const {
  const std::int64_t period = limit.period.count();
  const std::int64_t k = t / period;
  const auto cur = windows.find(k);
  const auto prev = windows.find(k - 1);
  if (cur != windows.end() && cur->second > 0) return (k + 2) * period;
  if (prev != windows.end() && prev->second > 0) return (k + 1) * period;
  return t;
}

// ---- token_bucket ---------------------------------------------------------------------------

Wide TokenBucketCounter::level_at(const Limit& limit, std::int64_t t) const {
  const Wide full = Wide{limit.capacity()} * limit.period.count();
  if (!level) return full;
  return std::min(full, *level + Wide{limit.maximum} * (t - then));
}

std::int64_t TokenBucketCounter::used(const Limit& limit, std::int64_t t) const {
  return narrow(limit.capacity() - floor_div(level_at(limit, t), limit.period.count()));
}

bool TokenBucketCounter::fits(const Limit& limit, std::int64_t t, std::int64_t cost) const {
  return cost <= limit.capacity() && level_at(limit, t) >= Wide{cost} * limit.period.count();
}

void TokenBucketCounter::touch(const Limit& limit, std::int64_t t) {
  level = level_at(limit, t);
  then = t;
}

void TokenBucketCounter::add(const Limit& limit, std::int64_t t, std::int64_t cost) {
  touch(limit, t);
  *level -= Wide{cost} * limit.period.count();
}

void TokenBucketCounter::take(const Limit& limit, std::int64_t t, std::int64_t cost) {
  touch(limit, t);
  const Wide full = Wide{limit.capacity()} * limit.period.count();
  *level = std::min(full, *level + Wide{std::min(cost, limit.capacity())} * limit.period.count());
}

std::vector<std::int64_t> TokenBucketCounter::changes_after(const Limit& limit,
                                                            std::int64_t t) const {
  std::vector<std::int64_t> times = drops_after(*this, limit, t, 3);
  if (reset_at(limit, t) > t) times.push_back(reset_at(limit, t));
  return sorted_unique(times);
}

std::int64_t TokenBucketCounter::reset_at(const Limit& limit, std::int64_t t) const {
  const Wide full = Wide{limit.capacity()} * limit.period.count();
  const Wide now = level_at(limit, t);
  return now < full ? narrow(t + ceil_div(full - now, limit.maximum)) : t;
}

// ---- concurrency ----------------------------------------------------------------------------

std::int64_t ConcurrencyCounter::used(const Limit&, std::int64_t t) const {
  std::int64_t sum = 0;
  for (const Held& lease : leases) {
    if (lease.expires_at > t) sum += lease.cost;
  }
  return sum;
}

void ConcurrencyCounter::add(const Limit& limit, std::int64_t t, std::int64_t cost) {
  leases.push_back({0, cost, t + limit.period.count(), t});
}

void ConcurrencyCounter::take(const Limit&, std::int64_t, std::int64_t) {
  throw std::logic_error("model: a concurrency limit has no refund");
}

std::vector<std::int64_t> ConcurrencyCounter::changes_after(const Limit&, std::int64_t t) const {
  std::vector<std::int64_t> times;
  for (const Held& lease : leases) {
    if (lease.expires_at > t) times.push_back(lease.expires_at);
  }
  return sorted_unique(times);
}

std::int64_t ConcurrencyCounter::reset_at(const Limit&, std::int64_t t) const {
  std::int64_t last = t;
  for (const Held& lease : leases) last = std::max(last, lease.expires_at);
  return last;
}

// ---- Model ----------------------------------------------------------------------------------

std::unique_ptr<Counter> Model::new_counter(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::sliding_log:
      return std::make_unique<SlidingLogCounter>();
    case Algorithm::fixed_window:
      return std::make_unique<FixedWindowCounter>();
    case Algorithm::sliding_window:
      return std::make_unique<SlidingWindowCounter>();
    case Algorithm::token_bucket:
      return std::make_unique<TokenBucketCounter>();
    case Algorithm::concurrency:
      return std::make_unique<ConcurrencyCounter>();
  }
  throw std::logic_error("the model has no counter for this algorithm");
}

void Model::define(const Limit& limit) {
  const auto found = limits_.find(limit.name);
  if (found != limits_.end() && found->second.algorithm != limit.algorithm) {
    std::erase_if(owners_, [&](const auto& entry) { return entry.first.first == limit.name; });
  }
  limits_[limit.name] = limit;
}

bool Model::remove(const std::string& name) {
  std::erase_if(owners_, [&](const auto& entry) { return entry.first.first == name; });
  std::erase_if(keys_, [&](const auto& entry) { return std::get<0>(entry.first) == name; });
  std::erase_if(overrides_, [&](const auto& entry) { return entry.first.first == name; });
  return limits_.erase(name) > 0;
}

const Model::OwnerState* Model::find(const std::string& limit, const std::string& owner) const {
  const auto found = owners_.find({limit, owner});
  return found == owners_.end() ? nullptr : &found->second;
}

Model::OwnerState& Model::state(const std::string& limit, const std::string& owner) {
  OwnerState& state = owners_[{limit, owner}];
  if (!state.counter) state.counter = new_counter(limits_.at(limit).algorithm);
  return state;
}

std::int64_t Model::time_of(const OwnerState* state, std::int64_t now) const {
  if (state && state->remembered) return std::max(now, *state->remembered);
  return now;
}

bool Model::fits(const Limit& limit, const Counter& counter, std::int64_t t, std::int64_t cost) {
  return cost <= limit.capacity() && counter.fits(limit, t, cost);
}

Model::Rule Model::rule_for(const std::string& limit, const std::string& owner) const {
  Rule rule{limits_.at(limit), std::nullopt};
  auto found = overrides_.find({limit, owner});
  if (found == overrides_.end()) found = overrides_.find({"*", owner});
  if (found == overrides_.end()) return rule;
  const Override& override = found->second;
  rule.policy = override.policy;
  if (override.policy != Policy::maximum) return rule;
  const std::int64_t period = rule.limit.period.count();
  const Algorithm algorithm = rule.limit.algorithm;
  rule.limit.maximum = *override.maximum;
  if (algorithm == Algorithm::sliding_window || algorithm == Algorithm::token_bucket) {
    rule.limit.maximum = std::min(rule.limit.maximum, kProductBound / period);
  }
  if (algorithm == Algorithm::token_bucket) {
    rule.limit.burst = std::min(override.burst.value_or(*override.maximum), kBucketBound / period);
  }
  return rule;
}

bool Model::verdict(const Rule& rule, const OwnerState& state, std::int64_t t, std::int64_t cost) {
  if (rule.policy == Policy::exempt) return true;
  if (rule.policy == Policy::deny) return false;
  return fits(rule.limit, *state.counter, t, cost);
}

std::optional<std::int64_t> Model::block_at(const Rule& rule, const OwnerState& state,
                                            std::int64_t t) {
  if (!rule.limit.block || rule.limit.shadow || rule.policy == Policy::exempt) {
    return std::nullopt;
  }
  if (!state.blocked_until || *state.blocked_until <= t) return std::nullopt;
  return state.blocked_until;
}

void Model::set_override(const Override& override) {
  overrides_[{override.limit, override.owner}] = override;
}

void Model::remove_override(const std::string& limit, const std::string& owner) {
  overrides_.erase({limit, owner});
}

std::int64_t Model::wait(const Limit& limit, const Counter& counter, std::int64_t t,
                         std::int64_t cost) {
  std::int64_t low = 0;                                // does not fit at t + low
  std::int64_t high = counter.reset_at(limit, t) - t;  // nothing used: fits at t + high
  if (high < 1 || !fits(limit, counter, t + high, cost)) {
    throw std::logic_error("model: a fitting cost does not fit once usage is back to zero");
  }
  while (high - low > 1) {
    const std::int64_t middle = low + (high - low) / 2;
    (fits(limit, counter, t + middle, cost) ? high : low) = middle;
  }
  return high;
}

Result Model::answer(const Rule& rule, const OwnerState& state, std::int64_t t, std::int64_t cost,
                     bool allowed, std::optional<std::int64_t> block) const {
  const Limit& limit = rule.limit;
  const Counter& counter = *state.counter;
  Result result;
  result.allowed = allowed && !block;
  result.denied = state.denied;
  result.remaining = std::max<std::int64_t>(limit.capacity() - counter.used(limit, t), 0);
  if (rule.policy == Policy::exempt) result.remaining = limit.capacity();
  if (rule.policy == Policy::deny) result.remaining = 0;
  result.reset_at_ms = counter.reset_at(limit, t);
  if (result.allowed) {
    result.reason = Reason::ok;
    result.retry_after_ms = 0;
  } else if (rule.policy == Policy::deny) {
    result.reason = Reason::owner_denied;
    result.retry_after_ms = -1;
  } else if (block) {
    // The longer of the block's wait and the algorithm's own (never: never).
    result.reason = Reason::blocked;
    result.remaining = 0;
    const std::int64_t own = allowed                   ? 0
                             : cost > limit.capacity() ? -1
                                                       : wait(limit, counter, t, cost);
    result.retry_after_ms = own < 0 ? -1 : std::max(*block - t, own);
  } else if (cost > limit.capacity()) {
    result.reason = Reason::cost_exceeds_capacity;
    result.retry_after_ms = -1;
  } else {
    result.reason = Reason::rate_limited;
    result.retry_after_ms = wait(limit, counter, t, cost);
  }
  return result;
}

Result Model::from_caller(Result result, std::int64_t t, std::int64_t now) {
  if (result.retry_after_ms > 0) result.retry_after_ms += t - now;
  return result;
}

Result Model::check(const std::string& limit, const std::string& owner, std::int64_t cost,
                    std::int64_t now) const {
  const Rule rule = rule_for(limit, owner);
  const OwnerState* existing = find(limit, owner);
  const std::int64_t t = time_of(existing, now);
  if (existing) {
    return from_caller(answer(rule, *existing, t, cost, verdict(rule, *existing, t, cost),
                              block_at(rule, *existing, t)),
                       t, now);
  }
  OwnerState fresh;
  fresh.counter = new_counter(rule.limit.algorithm);
  return from_caller(answer(rule, fresh, t, cost, verdict(rule, fresh, t, cost), std::nullopt), t,
                     now);
}

Result Model::consume(const std::string& limit, const std::string& owner, std::int64_t cost,
                      std::int64_t now) {
  const Rule rule = rule_for(limit, owner);
  OwnerState& owner_state = state(limit, owner);
  const std::int64_t t = time_of(&owner_state, now);
  const std::optional<std::int64_t> block = block_at(rule, owner_state, t);
  const bool allowed = verdict(rule, owner_state, t, cost);  // the algorithm's, without the block
  owner_state.counter->touch(rule.limit, t);
  if (allowed && !block && rule.policy != Policy::exempt) {
    owner_state.counter->add(rule.limit, t, cost);
  } else if (!allowed || block) {
    ++(rule.limit.shadow ? owner_state.shadow_denied : owner_state.denied);
  }
  owner_state.remembered = t;
  // A denial as rate_limited starts a block; a blocked consume leaves the block as it was.
  const bool rate_limited =
      !allowed && !block && rule.policy != Policy::deny && cost <= rule.limit.capacity();
  const bool starts_block = rate_limited && rule.limit.block && !rule.limit.shadow;
  if (block) {
    owner_state.blocked_until = block;
  } else if (starts_block) {
    owner_state.blocked_until = t + rule.limit.block->count();
  } else {
    owner_state.blocked_until.reset();
  }
  Result result = answer(rule, owner_state, t, cost, allowed, block);
  // The denial that starts a block waits for it too.
  if (starts_block) {
    result.retry_after_ms = std::max(result.retry_after_ms, rule.limit.block->count());
  }
  if (!result.allowed && rule.limit.shadow) {
    result.allowed = true;
    result.shadow_denied = true;
  }
  return from_caller(result, t, now);
}

Result Model::record(const std::string& limit, const std::string& owner, std::int64_t cost,
                     std::int64_t now) {
  const Rule rule = rule_for(limit, owner);
  OwnerState& owner_state = state(limit, owner);
  const std::int64_t t = time_of(&owner_state, now);
  const std::optional<std::int64_t> block = block_at(rule, owner_state, t);
  const bool allowed = verdict(rule, owner_state, t, cost);
  owner_state.counter->touch(rule.limit, t);
  if (rule.policy != Policy::exempt) owner_state.counter->add(rule.limit, t, cost);
  owner_state.remembered = t;
  owner_state.blocked_until = block;  // a record never starts a block
  return from_caller(answer(rule, owner_state, t, cost, allowed, block), t, now);
}

Result Model::refund(const std::string& limit, const std::string& owner, std::int64_t cost,
                     std::int64_t now) {
  const Rule rule = rule_for(limit, owner);
  OwnerState& owner_state = state(limit, owner);
  const std::int64_t t = time_of(&owner_state, now);
  const std::optional<std::int64_t> block = block_at(rule, owner_state, t);
  owner_state.counter->touch(rule.limit, t);
  owner_state.counter->take(rule.limit, t, cost);
  owner_state.remembered = t;
  owner_state.blocked_until = block;  // a refund leaves a block as it is
  return from_caller(answer(rule, owner_state, t, 1, verdict(rule, owner_state, t, 1), block), t,
                     now);
}

Result Model::reset(const std::string& limit, const std::string& owner, std::int64_t now) {
  const Rule rule = rule_for(limit, owner);
  owners_.erase({limit, owner});
  // The owner's idempotency keys on the limit go with its state.
  std::erase_if(keys_, [&](const auto& entry) {
    return std::get<0>(entry.first) == limit && std::get<1>(entry.first) == owner;
  });
  Result result;
  result.allowed = true;
  result.reason = Reason::ok;
  result.remaining = rule.limit.capacity();
  result.retry_after_ms = 0;
  result.reset_at_ms = now;
  result.denied = 0;
  return result;
}

LeaseAnswer Model::acquire(const std::string& limit, const std::string& owner, std::int64_t cost,
                           std::int64_t now) {
  auto& leases = static_cast<ConcurrencyCounter&>(*state(limit, owner).counter).leases;
  const std::size_t before = leases.size();
  LeaseAnswer answer{consume(limit, owner, cost, now)};
  if (leases.size() > before) {
    leases.back().id = ++last_lease_;
    answer.lease = leases.back().id;
    answer.expires_at_ms = leases.back().expires_at;
  }
  return answer;
}

std::optional<Model::Found> Model::find_lease(std::int64_t id) {
  if (id == 0) return std::nullopt;
  for (auto& [key, owner_state] : owners_) {
    auto* counter = dynamic_cast<ConcurrencyCounter*>(owner_state.counter.get());
    if (!counter) continue;
    for (ConcurrencyCounter::Held& held : counter->leases) {
      if (held.id == id) return Found{key, &held};
    }
  }
  return std::nullopt;
}

LeaseAnswer Model::renew(std::int64_t lease, std::optional<std::int64_t> ttl_ms,
                         std::int64_t now) {
  const std::optional<Found> found = find_lease(lease);
  LeaseAnswer answer;
  if (!found || found->held->expires_at <= now) {
    answer.result.allowed = false;
    answer.result.reason = Reason::lease_expired;
    answer.result.remaining = 0;
    answer.result.retry_after_ms = -1;
    answer.result.reset_at_ms = now;
    answer.result.denied = 0;
    return answer;
  }
  const auto& [limit, owner] = found->key;
  found->held->expires_at = now + ttl_ms.value_or(limits_.at(limit).period.count());
  // The owner's figures after the renewal, as a check of cost 1 sees them.
  const Result seen = check(limit, owner, 1, now);
  answer.result.allowed = true;
  answer.result.reason = Reason::ok;
  answer.result.remaining = seen.remaining;
  answer.result.retry_after_ms = 0;
  answer.result.reset_at_ms = seen.reset_at_ms;
  answer.result.denied = seen.denied;
  answer.lease = lease;
  answer.expires_at_ms = found->held->expires_at;
  return answer;
}

bool Model::release(std::int64_t lease, std::int64_t now) {
  const std::optional<Found> found = find_lease(lease);
  if (!found) return false;
  const bool held = found->held->expires_at > now;
  auto& leases = static_cast<ConcurrencyCounter&>(*owners_.at(found->key).counter).leases;
  std::erase_if(leases, [&](const ConcurrencyCounter::Held& each) { return each.id == lease; });
  return held;
}

std::vector<LeaseInfo> Model::leases(const std::string& limit, std::int64_t now) const {
  std::vector<LeaseInfo> list;
  for (const auto& [key, owner_state] : owners_) {
    if (key.first != limit) continue;
    const auto* counter = dynamic_cast<const ConcurrencyCounter*>(owner_state.counter.get());
    if (!counter) continue;
    for (const ConcurrencyCounter::Held& held : counter->leases) {
      if (held.expires_at > now) {
        list.push_back({std::to_string(held.id), key.second, held.cost, held.expires_at,
                        held.acquired_at});
      }
    }
  }
  std::sort(list.begin(), list.end(), [](const LeaseInfo& a, const LeaseInfo& b) {
    return std::tie(a.owner, a.expires_at_ms, a.lease) < std::tie(b.owner, b.expires_at_ms, b.lease);
  });
  return list;
}

std::optional<LeaseAnswer> Model::keyed(const std::string& limit, const std::string& owner,
                                        const std::string& key, const std::string& request,
                                        std::int64_t now,
                                        const std::function<LeaseAnswer()>& decide) {
  const auto found = keys_.find({limit, owner, key});
  if (found != keys_.end() && found->second.expires_at > now) {
    if (found->second.request != request) return std::nullopt;
    LeaseAnswer replay = found->second.answer;
    replay.result.replayed = true;
    return replay;
  }
  const LeaseAnswer answer = decide();
  keys_[{limit, owner, key}] = {request, answer, now + idempotency_ttl_ms_};
  return answer;
}

std::optional<Result> Model::consume(const std::string& limit, const std::string& owner,
                                     std::int64_t cost, std::int64_t now,
                                     const std::string& key) {
  const auto answer = keyed(limit, owner, key, "consume " + std::to_string(cost), now,
                            [&] { return LeaseAnswer{consume(limit, owner, cost, now)}; });
  if (!answer) return std::nullopt;
  return answer->result;
}

std::optional<Result> Model::record(const std::string& limit, const std::string& owner,
                                    std::int64_t cost, std::int64_t now, const std::string& key) {
  const auto answer = keyed(limit, owner, key, "record " + std::to_string(cost), now,
                            [&] { return LeaseAnswer{record(limit, owner, cost, now)}; });
  if (!answer) return std::nullopt;
  return answer->result;
}

std::vector<Usage> Model::usage(const std::string& limit, std::int64_t now) const {
  std::vector<Usage> rows;
  for (const auto& [key, owner_state] : owners_) {
    if (key.first != limit) continue;
    const Rule rule = rule_for(limit, key.second);
    const std::int64_t t = time_of(&owner_state, now);
    // An exempt owner uses no quota, whatever it recorded before its exemption.
    const std::int64_t used =
        rule.policy == Policy::exempt ? 0 : owner_state.counter->used(rule.limit, t);
    if (used == 0 && owner_state.denied == 0 && owner_state.shadow_denied == 0) continue;
    std::int64_t remaining = std::max<std::int64_t>(rule.limit.capacity() - used, 0);
    if (rule.policy == Policy::exempt) remaining = rule.limit.capacity();
    if (rule.policy == Policy::deny) remaining = 0;
    const std::optional<std::int64_t> block = block_at(rule, owner_state, t);
    if (block && rule.policy != Policy::exempt) remaining = 0;
    rows.push_back({limit, key.second, used, remaining, owner_state.denied,
                    owner_state.counter->reset_at(rule.limit, t), owner_state.shadow_denied,
                    rule.limit.capacity(), block});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Usage& a, const Usage& b) {
    return a.used != b.used ? a.used > b.used : a.owner < b.owner;
  });
  return rows;
}

std::vector<std::int64_t> Model::changes_after(const std::string& limit, const std::string& owner,
                                               std::int64_t now) const {
  const OwnerState* existing = find(limit, owner);
  if (!existing) return {};
  return existing->counter->changes_after(rule_for(limit, owner).limit, time_of(existing, now));
}

std::int64_t Model::evaluation_time(const std::string& limit, const std::string& owner,
                                    std::int64_t now) const {
  return time_of(find(limit, owner), now);
}

bool same_usage(const std::vector<Usage>& actual, const std::vector<Usage>& expected) {
  if (actual.size() != expected.size()) return false;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i].owner != expected[i].owner || actual[i].used != expected[i].used ||
        actual[i].remaining != expected[i].remaining || actual[i].denied != expected[i].denied ||
        actual[i].reset_at_ms != expected[i].reset_at_ms ||
        actual[i].capacity != expected[i].capacity ||
        actual[i].blocked_until_ms != expected[i].blocked_until_ms) {
      return false;
    }
  }
  return true;
}

}  // namespace quota::test

namespace quota {

std::ostream& operator<<(std::ostream& out, const Result& result) {
  return out << "allowed=" << result.allowed << " reason=" << to_string(result.reason)
             << " remaining=" << result.remaining << " retry_after_ms=" << result.retry_after_ms
             << " reset_at_ms=" << result.reset_at_ms << " denied=" << result.denied
             << " shadow_denied=" << result.shadow_denied;
}

}  // namespace quota
