#include "quota/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "apply.h"
#include "engine/engine_impl.h"
#include "gc.h"
#include "idempotency.h"
#include "location.h"
#include "migrations.h"
#include "open_store.h"
#include "quota/postgresql.h"
#include "quota/sqlite.h"
#include "sql/families.h"

namespace quota {

std::int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

using detail::get_locked;
using detail::integer_of;
using detail::list_locked;
using detail::Operation;
using detail::OperationSavepoint;
using detail::owners_of;
using detail::Row;
using detail::text_of;
using detail::unknown_limit;
using detail::Value;

// Deletes every row that names `owner` on `limit` from the registry's tables (its state of
// every algorithm, its leases, its idempotency keys); the number of rows deleted.
std::int64_t forget(detail::Store& store, std::string_view limit, std::string_view owner) {
  std::int64_t deleted = 0;
  for (const detail::sql::StateTable* table : detail::sql::owner_tables()) {
    deleted += store.execute(detail::sql::forget_owner(*table),
                             {Value(std::string(limit)), Value(std::string(owner))});
  }
  return deleted;
}

// A limit's name, or kEveryLimit where an override or an anchor may name every limit.
void validate_limit_or_every(std::string_view name) {
  if (name != kEveryLimit) validate_limit_name(name);
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

struct detail::EngineAccess {
  // `own_connection`: the engine opened the connection itself (Engine::open). Only then may it
  // group threads' requests into its own transactions; on the application's connection the
  // application owns the transactions.
  static Engine make(std::unique_ptr<detail::Store> store, Options options,
                     bool own_connection = false) {
    auto impl = std::make_unique<Engine::Impl>(std::move(store), std::move(options));
    impl->start();
    impl->grouping = own_connection && impl->options.group_commit;
    return Engine(std::move(impl));
  }
};

namespace {

// The settings of `options` that every store takes.
detail::StoreSettings store_settings(const Options& options) {
  detail::StoreSettings settings;
  settings.busy_timeout = options.busy_timeout;
  settings.restart_checkpoint = options.restart_checkpoint;
  return settings;
}

}  // namespace

Engine Engine::open(const std::string& path, Options options) {
  if (path.empty()) {
    throw Error(ErrorCode::invalid_argument,
                "no database given: pass a file name or a postgresql:// URI");
  }
  const detail::Location location = detail::classify_location(path);
  if (location.kind == detail::Location::Kind::refused) {
    throw Error(ErrorCode::invalid_argument, location.problem);
  }
  detail::StoreSettings settings = store_settings(options);
  settings.create = options.create;
  settings.read_only = options.read_only;
  settings.synchronous_full = options.synchronous_full;
  // A database in memory is this connection's alone: another connection would find another.
  const bool expiring = options.expire_interval.count() > 0 && !options.read_only &&
                        !location.in_memory;
  Engine engine = detail::EngineAccess::make(detail::open_store(location, settings), options, true);
  if (expiring) {
    // The expiry's own engine: the caller's clock (its "now") and connection settings, and
    // nothing the caller's code is called with (on_error, under fail_open) nor work beyond gc.
    Options own = options;
    own.expire_interval = std::chrono::milliseconds{0};
    own.group_commit = false;
    own.migrate = false;
    own.failure_policy = FailurePolicy::fail_closed;
    own.on_error = nullptr;
    detail::Counters& counters = engine.impl_->counters;
    engine.impl_->expiry = std::make_unique<detail::Expiry>(
        [path, own] { return Engine::open(path, own); }, options.expire_interval,
        [&counters](std::optional<std::int64_t> deleted) {
          if (deleted) counters.collected(*deleted);
          counters.expiry_ran(!deleted);
        });
  }
  return engine;
}

Metrics Engine::metrics() const { return impl_->counters.snapshot(); }

Engine sqlite::attach(SQLite::Database& database, Options options) {
  return detail::EngineAccess::make(detail::attach_store(database, store_settings(options)),
                                    std::move(options));
}

Engine postgresql::attach(pg_conn* connection, Options options) {
  return detail::EngineAccess::make(detail::attach_store(connection, store_settings(options)),
                                    std::move(options));
}

namespace {

// Writes `limit` (validated) into quota_limits. `replace`: a stored limit of that name is
// overwritten (define); otherwise it is left exactly as it is (ensure).
void store_limit(detail::Store& store, const Limit& limit, bool replace) {
  // Same algorithm: the owners' rows stay and are read with the new numbers from their
  // next operation on (a window row written under another period counts in the window
  // that holds its seen_ms). Another algorithm: quota_limits' trigger discards the state.
  // A calendar limit's owners keep the window they count until its end, unless it is
  // longer than the new unit's longest window (kCalendarInput, src/statements.cpp).
  store.execute(
      std::string("INSERT INTO quota_limits (name, algorithm, maximum, period_ms, burst, shadow, "
                  "block_ms, calendar, utc_offset_ms, anchor_ms) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6 <> 0, ?7, ?8, ?9, ?10) ON CONFLICT (name) ") +
          (replace ? "DO UPDATE SET "
                     "algorithm = excluded.algorithm, maximum = excluded.maximum, "
                     "period_ms = excluded.period_ms, burst = excluded.burst, "
                     "shadow = excluded.shadow, block_ms = excluded.block_ms, "
                     "calendar = excluded.calendar, utc_offset_ms = excluded.utc_offset_ms, "
                     "anchor_ms = excluded.anchor_ms"
                   : "DO NOTHING"),
      {Value(limit.name), Value(std::string(to_string(limit.algorithm))),
       Value(std::int64_t{limit.maximum}), Value(std::int64_t{limit.period.count()}),
       limit.algorithm == Algorithm::token_bucket ? Value(std::int64_t{limit.capacity()}) : Value(),
       Value(std::int64_t{limit.shadow ? 1 : 0}),
       limit.block ? Value(std::int64_t{limit.block->count()}) : Value(),
       limit.calendar ? Value(std::string(to_string(*limit.calendar))) : Value(),
       Value(std::int64_t{std::chrono::milliseconds(limit.utc_offset).count()}),
       limit.anchor_ms ? Value(*limit.anchor_ms) : Value()});
}

// Creates or replaces the override (validated) of (override.limit, override.owner).
void store_override(detail::Store& store, const Override& override) {
  const auto optional_integer = [](const std::optional<std::int64_t>& value) {
    return value ? Value(*value) : Value();
  };
  store.execute(
      "INSERT INTO quota_overrides (limit_name, owner, policy, maximum, burst) "
      "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (limit_name, owner) DO UPDATE SET "
      "policy = excluded.policy, maximum = excluded.maximum, burst = excluded.burst",
      {Value(override.limit), Value(override.owner),
       Value(std::string(to_string(override.policy))), optional_integer(override.maximum),
       optional_integer(override.burst)});
}

bool remove_override_locked(detail::Store& store, std::string_view limit, std::string_view owner) {
  return store.execute("DELETE FROM quota_overrides WHERE limit_name = ?1 AND owner = ?2",
                       {Value(std::string(limit)), Value(std::string(owner))}) > 0;
}

bool remove_limit_locked(detail::Store& store, std::string_view name) {
  return store.execute("DELETE FROM quota_limits WHERE name = ?1", {Value(std::string(name))}) > 0;
}

// Every override, by limit then owner; with `limit`, only that limit's (or "*"'s).
std::vector<Override> overrides_locked(detail::Store& store, std::optional<std::string_view> limit) {
  std::vector<Override> found;
  // The cast gives the parameter a type where it may be NULL: PostgreSQL cannot infer one
  // from `?1 IS NULL` and refuses the statement otherwise.
  for (const Row& row :
       store.query("SELECT limit_name, owner, policy, maximum, burst FROM quota_overrides "
                   "WHERE CAST(?1 AS text) IS NULL OR limit_name = ?1 ORDER BY limit_name, owner",
                   {limit ? Value(std::string(*limit)) : Value()})) {
    Override entry;
    entry.limit = text_of(row.at(0));
    entry.owner = text_of(row.at(1));
    entry.policy = parse_policy(text_of(row.at(2))).value_or(Policy::deny);
    if (!detail::is_null(row.at(3))) entry.maximum = integer_of(row.at(3));
    if (!detail::is_null(row.at(4))) entry.burst = integer_of(row.at(4));
    found.push_back(std::move(entry));
  }
  return found;
}

}  // namespace

void Engine::define(const Limit& limit) {
  validate_limit(limit);
  impl_->writing([&] {
    store_limit(*impl_->store, limit, true);
    // Read afresh at the next request, with whether the limit is plain.
    impl_->forget_kind(limit.name);
  });
}

Limit Engine::ensure(const Limit& limit) {
  validate_limit(limit);
  return impl_->writing([&] {
    // The insert and the read in one transaction. On PostgreSQL another connection may
    // still remove the limit between them (the insert that found it locked nothing): the
    // next round then creates it.
    for (;;) {
      OperationSavepoint savepoint(*impl_->store);
      store_limit(*impl_->store, limit, false);
      const std::optional<Limit> stored = get_locked(*impl_->store, limit.name);
      savepoint.release();
      if (!stored) continue;
      impl_->kinds[stored->name] = detail::kind_of(stored->algorithm, stored->calendar.has_value());
      return *stored;
    }
  });
}

std::vector<Change> Engine::apply(const Config& config, const ApplyOptions& options) {
  if (options.prune && config.limits.empty() && !options.allow_empty) {
    throw Error(ErrorCode::invalid_argument,
                "the configuration declares no limit, so pruning would remove every limit and "
                "its state: declare the limits, or set ApplyOptions::allow_empty (quotactl "
                "apply --allow-empty) to remove them on purpose; nothing was changed");
  }
  return impl_->writing([&] {
    detail::Store& store = *impl_->store;
    // One transaction: the plan is read and carried out under one lock that excludes every
    // other apply (and on SQLite every writer), and every change is made or none.
    store.begin_exclusive(detail::Exclusive::configuration);
    try {
      std::vector<Change> changes = detail::plan_changes(
          config, list_locked(store), overrides_locked(store, std::nullopt), options.prune);
      for (const Change& change : options.dry_run ? std::vector<Change>{} : changes) {
        if (change.limit_after) store_limit(store, *change.limit_after, true);
        if (change.kind == ChangeKind::remove && change.limit_before) {
          remove_limit_locked(store, change.limit_before->name);
        }
        if (change.override_after) store_override(store, *change.override_after);
        if (change.kind == ChangeKind::remove && change.override_before) {
          remove_override_locked(store, change.override_before->limit,
                                 change.override_before->owner);
        }
      }
      store.commit();
      // Read afresh at the next request, with whether each limit is plain.
      if (!options.dry_run && !changes.empty()) impl_->forget_overridden(kEveryLimit);
      return changes;
    } catch (...) {
      store.rollback();
      throw;
    }
  });
}

std::int64_t Engine::now() {
  return impl_->guarded([&] { return impl_->now(); });
}

std::optional<Limit> Engine::get(std::string_view name) {
  validate_limit_name(name);
  return impl_->guarded([&] { return get_locked(*impl_->store, name); });
}

std::vector<Limit> Engine::list() {
  return impl_->guarded([&] { return list_locked(*impl_->store); });
}

bool Engine::remove(std::string_view name) {
  validate_limit_name(name);
  return impl_->writing([&] {
    impl_->forget_kind(name);
    return remove_limit_locked(*impl_->store, name);
  });
}

Result Engine::check(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->decide(Operation::check, limit, owner, cost);
}

Result Engine::consume(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->decide(Operation::consume, limit, owner, cost);
}

Result Engine::record(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->decide(Operation::record, limit, owner, cost);
}

Result Engine::consume(std::string_view limit, std::string_view owner, std::int64_t cost,
                       std::string_view idempotency_key) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  validate_idempotency_key(idempotency_key);
  return impl_->decide(Operation::consume, limit, owner, cost, idempotency_key);
}

Result Engine::record(std::string_view limit, std::string_view owner, std::int64_t cost,
                      std::string_view idempotency_key) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  validate_idempotency_key(idempotency_key);
  return impl_->decide(Operation::record, limit, owner, cost, idempotency_key);
}

std::vector<Result> Engine::consume_many(const std::vector<BatchRequest>& requests) {
  return impl_->decide_many(Operation::consume, requests);
}

std::vector<Result> Engine::check_many(const std::vector<BatchRequest>& requests) {
  return impl_->decide_many(Operation::check, requests);
}

std::vector<Result> Engine::record_many(const std::vector<BatchRequest>& requests) {
  return impl_->decide_many(Operation::record, requests);
}

Result Engine::reset(std::string_view limit, std::string_view owner) {
  validate_limit_name(limit);
  validate_owner(owner);
  return impl_->writing([&] {
    OperationSavepoint savepoint(*impl_->store);
    forget(*impl_->store, limit, owner);
    const Result result = impl_->run(Operation::reset, limit, owner, 1);
    savepoint.release();
    return result;
  });
}

std::vector<std::string> Engine::reset_everywhere(std::string_view owner) {
  validate_owner(owner);
  return impl_->writing([&] {
    detail::Store& store = *impl_->store;
    // Under the write lock from the start (SQLite): the limits are read, then written.
    store.begin_exclusive(detail::Exclusive::requests);
    try {
      std::vector<std::string> names;
      for (Limit& limit : list_locked(store)) {
        const bool forgotten = forget(store, limit.name, owner) > 0;
        impl_->run(Operation::reset, limit.name, owner, 1);
        if (forgotten) names.push_back(std::move(limit.name));
      }
      store.commit();
      return names;
    } catch (...) {
      store.rollback();
      throw;
    }
  });
}

Result Engine::refund(std::string_view limit, std::string_view owner, std::int64_t cost) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  return impl_->writing([&] { return impl_->run(Operation::refund, limit, owner, cost); });
}

namespace {

// consume_all's and acquire_all's charges and cost; `call` names the call in the messages.
void validate_charges(const std::vector<Charge>& charges, std::int64_t cost, const char* call) {
  if (charges.empty()) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{} needs at least one limit: name them", call));
  }
  for (std::size_t i = 0; i < charges.size(); ++i) {
    validate_limit_name(charges[i].limit);
    const auto named_before = charges.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find_if(charges.begin(), named_before, [&](const Charge& earlier) {
          return earlier.limit == charges[i].limit;
        }) != named_before) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("limit '{}' is named twice: name each limit once", charges[i].limit));
    }
    validate_owner(charges[i].owner);
    if (charges[i].cost) {
      try {
        validate_cost(*charges[i].cost);
      } catch (const Error& error) {
        throw Error(ErrorCode::invalid_argument,
                    fmt::format("the cost of limit '{}': {}", charges[i].limit, error.what()));
      }
    }
  }
  validate_cost(cost);
}

void validate_max_wait(std::chrono::milliseconds max_wait) {
  if (max_wait.count() < 0) {
    throw Error(
        ErrorCode::invalid_argument,
        fmt::format("invalid max_wait {} ms: give 0 (do not wait) or more", max_wait.count()));
  }
}

std::vector<Charge> charges_of(const std::vector<std::string_view>& limits,
                               std::string_view owner) {
  std::vector<Charge> charges;
  charges.reserve(limits.size());
  for (std::string_view limit : limits) charges.push_back({limit, owner});
  return charges;
}

}  // namespace

Result Engine::acquire(std::string_view limit, std::string_view owner, std::int64_t cost,
                       std::chrono::milliseconds max_wait, std::stop_token stop) {
  validate_limit_name(limit);
  validate_owner(owner);
  validate_cost(cost);
  validate_max_wait(max_wait);
  const std::vector<Charge> charges{{limit, owner}};
  const detail::Measured measured(impl_->counters, detail::Counted::wait);
  // Under the failure policy, as consume is: a failure of the database may be the answer.
  const Result result = Impl::counted(measured, [&] {
    return impl_->decide<Result>(
        [&] { return impl_->acquire_all(charges, cost, max_wait, stop).result; }, 1);
  });
  impl_->counters.decided(measured.operation(), limit, result, measured.elapsed());
  return result;
}

Decision Engine::acquire_all(const std::vector<std::string_view>& limits, std::string_view owner,
                             std::int64_t cost, std::chrono::milliseconds max_wait,
                             std::stop_token stop) {
  return acquire_all(charges_of(limits, owner), cost, max_wait, std::move(stop));
}

Decision Engine::acquire_all(const std::vector<Charge>& charges, std::int64_t cost,
                             std::chrono::milliseconds max_wait, std::stop_token stop) {
  validate_charges(charges, cost, "acquire_all");
  validate_max_wait(max_wait);
  const detail::Measured measured(impl_->counters, detail::Counted::wait);
  Decision decision =
      Impl::counted(measured, [&] { return impl_->acquire_all(charges, cost, max_wait, stop); });
  impl_->counters.decided(measured.operation(), decision.limit, decision.result,
                          measured.elapsed());
  return decision;
}

Decision Engine::check_all(const std::vector<std::string_view>& limits, std::string_view owner,
                           std::int64_t cost) {
  return check_all(charges_of(limits, owner), cost);
}

Decision Engine::check_all(const std::vector<Charge>& charges, std::int64_t cost) {
  validate_charges(charges, cost, "check_all");
  const detail::Measured measured(impl_->counters, detail::Counted::check);
  Decision decision = Impl::counted(
      measured, [&] { return impl_->guarded([&] { return impl_->check_all(charges, cost); }); });
  impl_->counters.decided(measured.operation(), decision.limit, decision.result,
                          measured.elapsed());
  return decision;
}

Decision Engine::consume_all(const std::vector<std::string_view>& limits, std::string_view owner,
                             std::int64_t cost) {
  return consume_all(charges_of(limits, owner), cost);
}

Decision Engine::consume_all(const std::vector<Charge>& charges, std::int64_t cost) {
  validate_charges(charges, cost, "consume_all");
  const detail::Measured measured(impl_->counters, detail::Counted::consume);
  Decision decision = Impl::counted(
      measured, [&] { return *impl_->writing([&] { return impl_->consume_all(charges, cost); }); });
  impl_->counters.decided(measured.operation(), decision.limit, decision.result,
                          measured.elapsed());
  return decision;
}

Decision Engine::consume_all(const std::vector<std::string_view>& limits, std::string_view owner,
                             std::int64_t cost, std::string_view idempotency_key) {
  return consume_all(charges_of(limits, owner), cost, idempotency_key);
}

Decision Engine::consume_all(const std::vector<Charge>& charges, std::int64_t cost,
                             std::string_view idempotency_key) {
  validate_charges(charges, cost, "consume_all");
  validate_idempotency_key(idempotency_key);
  return impl_->consume_all_keyed(charges, cost, idempotency_key);
}

void Engine::set_hooks(std::string_view limit, Hooks hooks) {
  validate_limit_name(limit);
  impl_->guarded([&] {
    if (hooks.empty()) {
      if (const auto found = impl_->hooks.find(limit); found != impl_->hooks.end()) {
        impl_->hooks.erase(found);
      }
    } else {
      impl_->hooks.insert_or_assign(std::string(limit), std::move(hooks));
    }
  });
}

void Engine::set_override(const Override& override) {
  validate_override(override);
  impl_->writing([&] {
    if (override.limit != kEveryLimit) {
      const std::optional<Limit> limit = get_locked(*impl_->store, override.limit);
      if (!limit) throw unknown_limit(override.limit);
      detail::validate_override_fits(*limit, override);
    }
    impl_->forget_overridden(override.limit);
    store_override(*impl_->store, override);
  });
}

bool Engine::remove_override(std::string_view limit, std::string_view owner) {
  validate_limit_or_every(limit);
  validate_owner(owner);
  return impl_->writing([&] {
    impl_->forget_overridden(limit);
    return remove_override_locked(*impl_->store, limit, owner);
  });
}

std::vector<Override> Engine::overrides(std::optional<std::string_view> limit) {
  if (limit) validate_limit_or_every(*limit);
  return impl_->guarded([&] {
    return overrides_locked(*impl_->store, limit);
  });
}

void Engine::set_anchor(const Anchor& anchor) {
  validate_limit_or_every(anchor.limit);
  validate_owner(anchor.owner);
  validate_anchor(anchor.anchor_ms);
  impl_->writing([&] {
    if (anchor.limit != kEveryLimit) {
      const std::optional<Limit> limit = get_locked(*impl_->store, anchor.limit);
      if (!limit) throw unknown_limit(anchor.limit);
      if (!limit->calendar) {
        throw Error(ErrorCode::invalid_argument,
                    fmt::format("limit '{}' has no calendar period, so an anchor would place "
                                "nothing: give the limit a calendar period (day, week, month "
                                "or year) first",
                                anchor.limit));
      }
    }
    impl_->store->execute(
        "INSERT INTO quota_anchors (limit_name, owner, anchor_ms) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (limit_name, owner) DO UPDATE SET anchor_ms = excluded.anchor_ms",
        {Value(anchor.limit), Value(anchor.owner), Value(anchor.anchor_ms)});
  });
}

bool Engine::remove_anchor(std::string_view limit, std::string_view owner) {
  validate_limit_or_every(limit);
  validate_owner(owner);
  return impl_->writing([&] {
    return impl_->store->execute("DELETE FROM quota_anchors WHERE limit_name = ?1 AND owner = ?2",
                                 {Value(std::string(limit)), Value(std::string(owner))}) > 0;
  });
}

std::vector<Anchor> Engine::anchors(std::optional<std::string_view> limit) {
  if (limit) validate_limit_or_every(*limit);
  return impl_->guarded([&] {
    std::vector<Anchor> found;
    for (const Row& row : impl_->store->query(
             "SELECT limit_name, owner, anchor_ms FROM quota_anchors "
             "WHERE CAST(?1 AS text) IS NULL OR limit_name = ?1 ORDER BY limit_name, owner",
             {limit ? Value(std::string(*limit)) : Value()})) {
      found.push_back({text_of(row.at(0)), text_of(row.at(1)), integer_of(row.at(2))});
    }
    return found;
  });
}

std::vector<Usage> Engine::usage(std::string_view limit, std::size_t top, UsageOrder order) {
  validate_limit_name(limit);
  return impl_->guarded([&] {
    const auto kind = impl_->statement_kind(limit, true);
    if (!kind) throw unknown_limit(limit);
    // Every owner with state, answered by the same check statement as Engine::check, so the
    // figures are exactly the engine's at the engine's clock.
    const std::vector<std::string> names = owners_of(*impl_->store, *kind, limit);

    const std::int64_t now = impl_->now();
    std::vector<Usage> rows;
    for (const std::string& owner : names) {
      const std::optional<Usage> row = impl_->usage_at(*kind, limit, owner, now);
      if (row && (row->used > 0 || row->denied > 0 || row->shadow_denied > 0) &&
          (order != UsageOrder::blocked || row->blocked_until_ms)) {
        rows.push_back(*row);
      }
    }
    std::stable_sort(rows.begin(), rows.end(), [order](const Usage& a, const Usage& b) {
      if (order == UsageOrder::blocked && a.blocked_until_ms != b.blocked_until_ms) {
        return a.blocked_until_ms > b.blocked_until_ms;
      }
      if (order == UsageOrder::denied && a.denied != b.denied) return a.denied > b.denied;
      if (order == UsageOrder::shadow_denied && a.shadow_denied != b.shadow_denied) {
        return a.shadow_denied > b.shadow_denied;
      }
      return a.used != b.used ? a.used > b.used : a.owner < b.owner;
    });
    if (top > 0 && rows.size() > top) rows.resize(top);
    return rows;
  });
}

Usage Engine::owner_usage(std::string_view limit, std::string_view owner) {
  validate_limit_name(limit);
  validate_owner(owner);
  return impl_->guarded([&] {
    const auto kind = impl_->statement_kind(limit, true);
    if (!kind) throw unknown_limit(limit);
    const std::optional<Usage> row = impl_->usage_at(*kind, limit, owner, impl_->now());
    if (!row) throw unknown_limit(limit);
    return *row;
  });
}

std::vector<Usage> Engine::owner_usage(std::string_view owner) {
  validate_owner(owner);
  return impl_->guarded([&] {
    // The limits where the owner has state, an override or a calendar anchor, each read by
    // the owner's key; a '*' override covers every limit, a '*' anchor every calendar limit.
    static const std::string kOwnerLimits = fmt::format(
        "SELECT l.name, l.algorithm, l.calendar FROM quota_limits AS l WHERE EXISTS ("
        "SELECT 1 FROM quota_overrides AS o WHERE o.owner = ?1 "
        "AND (o.limit_name = l.name OR o.limit_name = '*')) "
        "OR EXISTS (SELECT 1 FROM quota_anchors AS n WHERE n.owner = ?1 "
        "AND (n.limit_name = l.name OR (n.limit_name = '*' AND l.calendar IS NOT NULL))) "
        "OR l.name IN ({}) ORDER BY l.name",
        detail::sql::owner_limits());
    const std::vector<Row> found = impl_->store->query(kOwnerLimits, {Value(std::string(owner))});
    const std::int64_t now = impl_->now();
    std::vector<Usage> rows;
    for (const Row& row : found) {
      const std::string limit = text_of(row.at(0));
      const auto algorithm = parse_algorithm(text_of(row.at(1)));
      if (!algorithm) continue;
      const detail::StatementKind kind = detail::kind_of(*algorithm, !detail::is_null(row.at(2)));
      if (std::optional<Usage> usage = impl_->usage_at(kind, limit, owner, now)) {
        rows.push_back(std::move(*usage));
      }
    }
    return rows;
  });
}

std::int64_t Engine::gc(std::size_t batch_rows,
                        const std::function<void(const GcProgress&)>& progress) {
  // Each batch takes the lock on its own, so that other threads' operations run between them.
  const detail::Locked locked = [this](const std::function<void(detail::Store&)>& work) {
    impl_->writing([&] { work(*impl_->store); });
  };
  const std::int64_t now = impl_->options.server_clock
                               ? impl_->guarded([&] { return impl_->now(); })
                               : impl_->options.clock();
  const std::int64_t deleted = detail::collect_garbage(locked, now, batch_rows, progress);
  impl_->counters.collected(deleted);
  return deleted;
}

namespace {

std::shared_ptr<detail::Subscription> subscription_of(std::string_view limit,
                                                      std::optional<std::string_view> owner,
                                                      WatchCallback callback) {
  validate_limit_name(limit);
  if (owner) validate_owner(*owner);
  if (!callback) {
    throw Error(ErrorCode::invalid_argument,
                "watch needs a callback: pass the function to call with the owner's usage");
  }
  auto subscription = std::make_shared<detail::Subscription>();
  subscription->limit = std::string(limit);
  if (owner) subscription->owner = std::string(*owner);
  subscription->callback = std::move(callback);
  return subscription;
}

}  // namespace

Watch Engine::watch(std::string_view limit, std::string_view owner, WatchCallback callback) {
  auto subscription = subscription_of(limit, owner, std::move(callback));
  impl_->guarded([&] {
    if (!impl_->statement_kind(limit, true)) throw unknown_limit(limit);
  });
  impl_->watch_hub().add(subscription);
  return Watch(std::move(subscription));
}

Watch Engine::watch(std::string_view limit, WatchCallback callback) {
  auto subscription = subscription_of(limit, std::nullopt, std::move(callback));
  impl_->guarded([&] {
    if (!impl_->statement_kind(limit, true)) throw unknown_limit(limit);
  });
  impl_->watch_hub().add(subscription);
  return Watch(std::move(subscription));
}

Watch::Watch() noexcept = default;
Watch::Watch(Watch&&) noexcept = default;
Watch& Watch::operator=(Watch&& other) noexcept {
  if (this != &other) {
    stop();
    subscription_ = std::move(other.subscription_);
  }
  return *this;
}
Watch::~Watch() { stop(); }

void Watch::stop() noexcept {
  if (subscription_) subscription_->end();
}

bool Watch::active() const noexcept { return subscription_ && subscription_->active(); }

std::exception_ptr Watch::failure() const {
  if (!subscription_) return nullptr;
  std::lock_guard lock(subscription_->mutex);
  return subscription_->failure;
}

int Engine::schema_version() {
  return impl_->guarded([&] { return detail::read_schema_status(*impl_->store).version; });
}

}  // namespace quota
