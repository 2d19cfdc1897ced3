// Concurrency leases (include/quota/lease.h): Engine::acquire_lease, renew_lease,
// release_lease, leases, and the RAII quota::Lease. The SQL is src/sql/lease_statements.cpp's.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "engine/engine_impl.h"
#include "quota/lease.h"
#include "shown.h"
#include "sql/lease_statements.h"

namespace quota {

using detail::integer_of;
using detail::Operation;
using detail::Row;
using detail::StatementKind;
using detail::text_of;
using detail::Value;

// A lease id as acquire_lease issues it: 32 hex digits in lower case (SQLite's
// lower(hex(randomblob(16))), PostgreSQL's uuid without dashes). Anything else is invalid
// input, the same on both backends, rather than a lease that is not held.
void validate_lease_id(std::string_view lease) {
  const bool issued = lease.size() == 32 && std::all_of(lease.begin(), lease.end(), [](char c) {
                        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                      });
  if (!issued) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid lease id '{}': a lease id is the 32 hex digits (0-9 a-f) "
                            "that acquire_lease returned",
                            detail::bounded(lease)));
  }
}

namespace {

void validate_ttl(std::chrono::milliseconds ttl) {
  if (ttl < kLeaseTtlMin || ttl > kLeaseTtlMax) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("invalid lease TTL {} ms: use 1 s to 1 day (1000 to {} ms)",
                            ttl.count(), kLeaseTtlMax.count()));
  }
}

// acquire_lease's answer: the decision's Result and the lease it took (none: empty, 0).
LeaseResult with_lease(const Result& result, detail::Held& held) {
  LeaseResult answer;
  static_cast<Result&>(answer) = result;
  answer.lease = std::move(held.lease);
  answer.expires_at_ms = answer.lease.empty() ? 0 : held.expires_at_ms;
  return answer;
}

}  // namespace

LeaseResult Engine::Impl::decide_with_lease(Operation operation, std::string_view limit,
                                            std::string_view owner, std::int64_t cost,
                                            std::optional<std::string_view> key,
                                            bool only_concurrency) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  if (key) validate_idempotency_key(*key);
  detail::Held held;  // a lease only from a concurrency limit
  held.only_concurrency = only_concurrency;
  const Result result = decide(operation, limit, owner, cost, key, &held);
  return with_lease(result, held);
}

LeaseResult Engine::acquire_lease(std::string_view limit, std::string_view owner,
                                  std::int64_t cost) {
  return impl_->decide_with_lease(Operation::consume, limit, owner, cost, std::nullopt, true);
}

LeaseResult Engine::acquire_lease(std::string_view limit, std::string_view owner,
                                  std::int64_t cost, std::string_view idempotency_key) {
  return impl_->decide_with_lease(Operation::consume, limit, owner, cost, idempotency_key, true);
}

LeaseResult Engine::consume_with_lease(std::string_view limit, std::string_view owner,
                                       std::int64_t cost) {
  return impl_->decide_with_lease(Operation::consume, limit, owner, cost, std::nullopt, false);
}

LeaseResult Engine::consume_with_lease(std::string_view limit, std::string_view owner,
                                       std::int64_t cost, std::string_view idempotency_key) {
  return impl_->decide_with_lease(Operation::consume, limit, owner, cost, idempotency_key,
                                  false);
}

LeaseResult Engine::record_with_lease(std::string_view limit, std::string_view owner,
                                      std::int64_t cost) {
  return impl_->decide_with_lease(Operation::record, limit, owner, cost, std::nullopt, false);
}

LeaseResult Engine::record_with_lease(std::string_view limit, std::string_view owner,
                                      std::int64_t cost, std::string_view idempotency_key) {
  return impl_->decide_with_lease(Operation::record, limit, owner, cost, idempotency_key, false);
}

LeaseResult Engine::renew_lease(std::string_view lease,
                                std::optional<std::chrono::milliseconds> ttl) {
  validate_lease_id(lease);
  if (ttl) validate_ttl(*ttl);
  const detail::Measured measured(impl_->counters, detail::Counted::renew);
  std::string limit;  // the lease's, when it is held
  LeaseResult renewed = Impl::counted(measured, [&] {
    return impl_->writing([&] {
      const Value now = impl_->options.server_clock ? Value() : Value(impl_->now());
      const std::vector<Row> rows =
          impl_->store->query(detail::sql::renew_statement(impl_->store->dialect()),
                              {Value(std::string(lease)),
                               ttl ? Value(std::int64_t{ttl->count()}) : Value(), now});
      LeaseResult result;
      if (rows.empty()) {
        result.allowed = false;
        result.reason = Reason::lease_expired;
        result.retry_after_ms = -1;
        result.reset_at_ms = detail::is_null(now) ? impl_->now() : integer_of(now);
        return result;
      }
      const Row& row = rows.front();
      result.lease = text_of(row.at(2));
      result.expires_at_ms = integer_of(row.at(6));
      // The owner's figures after the renewal, by its limit's check (which writes nothing).
      limit = text_of(row.at(3));
      const std::string owner = text_of(row.at(4));
      const std::optional<Row> check = impl_->store->run(
          Operation::check, StatementKind::concurrency,
          {limit, owner, 1,
           detail::is_null(now) ? std::nullopt : std::optional<std::int64_t>(integer_of(now))});
      if (check) {
        result.remaining = integer_of(check->at(2));
        result.reset_at_ms = integer_of(check->at(4));
        result.denied = integer_of(check->at(5));
      } else {
        result.reset_at_ms = result.expires_at_ms;
      }
      return result;
    });
  });
  impl_->counters.decided(measured.operation(), limit, renewed, measured.elapsed());
  return renewed;
}

bool Engine::release_lease(std::string_view lease) {
  validate_lease_id(lease);
  return impl_->writing([&] {
    const Value now = impl_->options.server_clock ? Value() : Value(impl_->now());
    const std::vector<Row> rows = impl_->store->query(
        detail::sql::release_statement(impl_->store->dialect()), {Value(std::string(lease)), now});
    return !rows.empty() && integer_of(rows.front().at(0)) != 0;
  });
}

std::vector<LeaseInfo> Engine::leases(std::string_view limit,
                                      std::optional<std::string_view> owner) {
  validate_limit_name(limit);
  if (owner) validate_owner(*owner);
  return impl_->guarded([&] {
    const std::string name(limit);
    if (impl_->store->query(detail::sql::concurrency_limit_query(), {Value(name)}).empty()) {
      const std::optional<Limit> found = detail::get_locked(*impl_->store, limit);
      if (!found) throw detail::unknown_limit(limit);
      throw detail::not_concurrency(limit, found->algorithm, "leases");
    }
    const std::vector<Row> rows = impl_->store->query(
        detail::sql::lease_list_query(),
        {Value(name), owner ? Value(std::string(*owner)) : Value(), Value(impl_->now())});
    std::vector<LeaseInfo> leases;
    leases.reserve(rows.size());
    for (const Row& row : rows) {
      leases.push_back({text_of(row.at(0)), text_of(row.at(1)), integer_of(row.at(2)),
                        integer_of(row.at(3)), integer_of(row.at(4))});
    }
    return leases;
  });
}

std::map<std::string, LeasesHeld, std::less<>> Engine::leases_held() const {
  return impl_->guarded([&] {
    std::map<std::string, LeasesHeld, std::less<>> held;
    for (const Row& row :
         impl_->store->query(detail::sql::leases_held_query(), {Value(impl_->now())})) {
      held[text_of(row.at(0))] = {static_cast<std::uint64_t>(integer_of(row.at(1))),
                                  static_cast<std::uint64_t>(integer_of(row.at(2)))};
    }
    return held;
  });
}

// ---------------------------------------------------------------------------------------
// quota::Lease

Lease::Lease(Engine& engine, std::string_view limit, std::string_view owner, std::int64_t cost)
    : engine_(&engine), result_(engine.acquire_lease(limit, owner, cost)) {}

Lease::Lease(Engine& engine, std::string_view limit, std::string_view owner, std::int64_t cost,
             std::string_view idempotency_key)
    : engine_(&engine), result_(engine.acquire_lease(limit, owner, cost, idempotency_key)) {}

Lease::Lease(Lease&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)), result_(std::move(other.result_)) {
  other.result_.lease.clear();
}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Lease released(std::move(*this));  // this one's lease goes when `released` does
    engine_ = std::exchange(other.engine_, nullptr);
    result_ = std::move(other.result_);
    other.result_.lease.clear();
  }
  return *this;
}

Lease::~Lease() {
  if (!held()) return;
  try {
    engine_->release_lease(result_.lease);
  } catch (...) {
    // Never from a destructor: the lease expires at its TTL all the same.
  }
}

LeaseResult Lease::renew(std::optional<std::chrono::milliseconds> ttl) {
  if (!held()) {
    throw Error(ErrorCode::invalid_argument,
                "this Lease holds nothing (denied, moved from or released): acquire a new one");
  }
  LeaseResult renewed = engine_->renew_lease(result_.lease, ttl);
  if (renewed.allowed) result_ = renewed;
  return renewed;
}

bool Lease::release() {
  if (!held()) return false;
  const bool was_held = engine_->release_lease(result_.lease);
  result_.lease.clear();
  engine_ = nullptr;
  return was_held;
}

}  // namespace quota
