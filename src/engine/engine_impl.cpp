#include "engine/engine_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "idempotency.h"
#include "migrations.h"
#include "open_store.h"

namespace quota {

namespace detail {

namespace {

Limit read_limit(const Row& row) {
  Limit limit;
  limit.name = text_of(row.at(0));
  limit.algorithm = parse_algorithm(text_of(row.at(1))).value_or(Algorithm::sliding_log);
  limit.maximum = integer_of(row.at(2));
  limit.period = std::chrono::milliseconds(integer_of(row.at(3)));
  if (!detail::is_null(row.at(4))) limit.burst = integer_of(row.at(4));
  limit.shadow = integer_of(row.at(5)) != 0;
  if (!detail::is_null(row.at(6))) limit.block = std::chrono::milliseconds(integer_of(row.at(6)));
  if (!detail::is_null(row.at(7))) limit.calendar = parse_calendar(text_of(row.at(7)));
  limit.utc_offset = std::chrono::duration_cast<std::chrono::minutes>(
      std::chrono::milliseconds(integer_of(row.at(8))));
  if (!detail::is_null(row.at(9))) limit.anchor_ms = integer_of(row.at(9));
  return limit;
}

constexpr const char* kSelectLimits =
    "SELECT name, algorithm, maximum, period_ms, burst, shadow, block_ms, calendar, "
    "utc_offset_ms, anchor_ms FROM quota_limits";

}  // namespace

// `meant`: the stored limits the caller likely meant (quota::likely_meant), when known.
Error unknown_limit(std::string_view name, std::vector<std::string> meant) {
  std::string message = fmt::format("unknown limit '{}'", name);
  if (meant.empty()) {
    message += ": define it first (Engine::define); Engine::list gives the limits there are";
  } else {
    message += ": did you mean ";
    for (std::size_t i = 0; i < meant.size(); ++i) {
      if (i > 0) message += i + 1 == meant.size() ? " or " : ", ";
      message += fmt::format("'{}'", meant[i]);
    }
    message += "? (Engine::list gives the limits there are)";
  }
  return Error(ErrorCode::unknown_limit, message, name, std::move(meant));
}

// A failure of the database itself rather than of the request: what fail_open answers.
bool is_store_failure(ErrorCode code) {
  return code == ErrorCode::busy || code == ErrorCode::io || code == ErrorCode::not_a_database;
}

Error not_concurrency(std::string_view limit, Algorithm algorithm, std::string_view call) {
  return Error(ErrorCode::invalid_argument,
               fmt::format("limit '{}' is {}, not a concurrency limit: {} works on limits "
                           "defined with the concurrency algorithm; use consume on a rate limit",
                           limit, to_string(algorithm), call));
}

// The owners of `limit` with a row of state: only the table of the limit's algorithm holds
// its owners (a change of algorithm discards the others' rows).
std::vector<std::string> owners_of(Store& store, StatementKind kind, std::string_view limit) {
  std::vector<std::string> names;
  for (const Row& row :
       store.query(fmt::format("SELECT owner FROM {} WHERE limit_name = ?1", state_table(kind)),
                   {Value(std::string(limit))})) {
    names.push_back(text_of(row.at(0)));
  }
  return names;
}

std::vector<Limit> list_locked(Store& store) {
  std::vector<Limit> limits;
  for (const Row& row : store.query(std::string(kSelectLimits) + " ORDER BY name", {})) {
    limits.push_back(read_limit(row));
  }
  return limits;
}

std::optional<Limit> get_locked(Store& store, std::string_view name) {
  const std::vector<Row> rows =
      store.query(std::string(kSelectLimits) + " WHERE name = ?1", {Value(std::string(name))});
  if (rows.empty()) return std::nullopt;
  return read_limit(rows.front());
}

}  // namespace detail

namespace {

using detail::integer_of;
using detail::is_store_failure;
using detail::Operation;
using detail::OperationSavepoint;
using detail::owners_of;
using detail::Row;
using detail::text_of;
using detail::unknown_limit;
using detail::Value;

// Every request of a batch call, validated before any runs; the message names the bad one.
void validate_batch(const std::vector<BatchRequest>& requests) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      validate_limit_name(requests[i].limit);
      validate_owner(requests[i].owner);
      validate_cost(requests[i].cost);
    } catch (const Error& error) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("request {} of the batch (counting from 0): {}; nothing was run", i,
                              error.what()));
    }
  }
}

// Whether `a` decides a consume_all over `b`: a denial over an allowance, a longer wait
// over a shorter one (-1, never, is the longest), fewer units left among allowances.
bool decides_over(const Result& a, const Result& b) {
  if (a.allowed != b.allowed) return !a.allowed;
  if (!a.allowed) {
    if (b.retry_after_ms < 0) return false;
    return a.retry_after_ms < 0 || a.retry_after_ms > b.retry_after_ms;
  }
  return a.remaining < b.remaining;
}

// Sleeps for `duration` unless `stop` is requested first (or was already); false when
// stopped.
bool sleep_unless_stopped(std::chrono::milliseconds duration, const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  // The predicate is never true: only the time or a stop request ends the wait.
  wake.wait_for(lock, stop, duration, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace

Error Engine::Impl::suggesting(const Error& error) {
  std::vector<std::string> names;
  try {
    for (Limit& limit : list_locked(*store)) names.push_back(std::move(limit.name));
  } catch (const std::exception&) {
    return error;
  }
  return unknown_limit(error.limit(), likely_meant(error.limit(), names));
}

void Engine::Impl::tell_watchers() {
  if (detail::WatchHub* watching = hub_signal.load(std::memory_order_acquire)) watching->poke();
}

namespace {

// A keyed request's transaction (src/idempotency.h): on SQLite it holds the write lock from
// its start, so that the key's lookup and the request see one state; inside the
// application's open transaction, a savepoint of it. Rolled back unless committed.
class KeyedTransaction {
 public:
  explicit KeyedTransaction(detail::Store& store) : store_(store) {
    store_.begin_exclusive(detail::Exclusive::requests);
  }
  KeyedTransaction(const KeyedTransaction&) = delete;
  KeyedTransaction& operator=(const KeyedTransaction&) = delete;
  ~KeyedTransaction() {
    if (open_) store_.rollback();
  }
  // A replay commits nothing: a claim written before another place's row was found is
  // undone.
  void end(const detail::StoredAnswer& answer) {
    open_ = false;
    if (answer.result.replayed) {
      store_.rollback();
    } else {
      store_.commit();
    }
  }

 private:
  detail::Store& store_;
  bool open_ = true;
};

// A keyed request's answer, and to `held` (when asked) the lease it took or replays.
Result answered(detail::StoredAnswer answer, detail::Held* held) {
  if (held && !answer.leases.empty()) {
    held->lease = std::move(answer.leases.front().lease);
    held->expires_at_ms = answer.leases.front().expires_at_ms;
  }
  return answer.result;
}

}  // namespace

Result Engine::Impl::decide(Operation operation, std::string_view limit, std::string_view owner,
                            std::int64_t cost, std::optional<std::string_view> key,
                            detail::Held* held) {
  const detail::Measured measured(counters, counted_as(operation, held && held->only_concurrency));
  Result result = counted(measured, [&] {
    return decide<Result>(
        [&] {
          if (grouping && !key && !held) return grouped(operation, limit, owner, cost);
          std::lock_guard lock(mutex);
          if (held && held->only_concurrency) require_concurrency(limit);
          // The lease goes out only with the answer that took it: never with a fail_open one.
          detail::Held taken;
          taken.only_concurrency = held && held->only_concurrency;
          detail::Held* const taking = held ? &taken : nullptr;
          if (!key) {
            Result decided = run_with_hooks(operation, limit, owner, cost, std::nullopt, taking);
            if (held) *held = std::move(taken);
            return decided;
          }
          const char* asked = operation == Operation::record ? "record"
                              : taken.only_concurrency      ? "acquire"
                                                            : "consume";
          const std::string request = detail::request_text(asked, cost);
          const std::vector<detail::KeyPlace> places{{limit, owner}};
          // A replay is answered from the key's row alone, before any transaction: the write
          // lock, the limit's statement, its hooks and the watches are for a request that
          // decides, at its own time under the lock.
          if (std::optional<detail::StoredAnswer> found =
                  detail::find_replay(*store, places, *key, request, now())) {
            return answered(std::move(*found), held);
          }
          KeyedTransaction transaction(*store);
          const std::int64_t at = now();
          detail::StoredAnswer answer = detail::run_keyed(
              *store, places, *key, request, at, options.idempotency_ttl.count(), [&] {
                detail::Held took;
                took.only_concurrency = taken.only_concurrency;
                detail::StoredAnswer decided{
                    {}, {}, run_with_hooks(operation, limit, owner, cost, at, &took)};
                if (!took.lease.empty()) {
                  decided.leases.push_back({std::string(limit), std::string(owner),
                                            std::move(took.lease), took.expires_at_ms});
                }
                return decided;
              });
          transaction.end(answer);
          return answered(std::move(answer), held);
        },
        1);
  });
  counters.decided(measured.operation(), limit, result, measured.elapsed());
  // The watches look again after a write, with the lock released.
  if (operation != Operation::check && !result.replayed) tell_watchers();
  return result;
}

Decision Engine::Impl::consume_all_keyed(const std::vector<Charge>& charges, std::int64_t cost,
                                         std::string_view key) {
  const detail::Measured measured(counters, detail::Counted::consume);
  std::vector<detail::KeyPlace> places;
  places.reserve(charges.size());
  for (const Charge& charge : charges) places.push_back({charge.limit, charge.owner});
  const std::string request = detail::request_text(charges, cost);
  Decision decision = counted(measured, [&] {
    // A replay: from the keys' rows, before any transaction (as decide's).
    std::optional<detail::StoredAnswer> found =
        guarded([&] { return detail::find_replay(*store, places, key, request, now()); });
    if (found) {
      return Decision{std::move(found->decided_by), found->result, std::move(found->leases)};
    }
    return writing([&] {
      KeyedTransaction transaction(*store);
      const detail::StoredAnswer answer = detail::run_keyed(
          *store, places, key, request, now(), options.idempotency_ttl.count(), [&] {
            Decision decided = *consume_all(charges, cost);
            return detail::StoredAnswer{{}, std::move(decided.limit), decided.result,
                                        std::move(decided.leases)};
          });
      transaction.end(answer);
      return Decision{answer.decided_by, answer.result, answer.leases};
    });
  });
  counters.decided(measured.operation(), decision.limit, decision.result, measured.elapsed());
  return decision;
}

Result Engine::Impl::grouped(Operation operation, std::string_view limit, std::string_view owner,
                             std::int64_t cost) {
  Pending mine{operation, limit, owner, cost, std::nullopt, nullptr, false};
  std::unique_lock queue_lock(queue_mutex);
  queue.push_back(&mine);
  for (;;) {
    queue_changed.wait(queue_lock, [&] { return mine.done || !leading; });
    if (mine.done) break;
    leading = true;
    const auto count = static_cast<std::ptrdiff_t>(std::min(queue.size(), kGroupCount));
    std::vector<Pending*> batch(queue.begin(), queue.begin() + count);
    queue.erase(queue.begin(), queue.begin() + count);
    queue_lock.unlock();
    std::size_t ran = 0;
    {
      std::lock_guard lock(mutex);
      ran = run_group(batch);
    }
    counters.grouped(ran);
    queue_lock.lock();
    for (std::size_t i = 0; i < ran; ++i) batch[i]->done = true;
    // What the time bound left over goes back first, in its order.
    queue.insert(queue.begin(), batch.begin() + static_cast<std::ptrdiff_t>(ran), batch.end());
    leading = false;
    queue_changed.notify_all();
  }
  queue_lock.unlock();
  if (mine.error) std::rethrow_exception(mine.error);
  return *mine.result;
}

std::size_t Engine::Impl::run_group(std::vector<Pending*>& batch) noexcept {
  const auto settle = [](Pending& pending, auto&& function) {
    try {
      pending.result = function();
    } catch (...) {
      pending.error = std::current_exception();
    }
  };
  const auto fail_all = [&](std::size_t count, const std::exception_ptr& error) {
    for (std::size_t i = 0; i < count; ++i) {
      batch[i]->result.reset();
      batch[i]->error = error;
    }
  };
  if (batch.size() == 1) {
    Pending& pending = *batch.front();
    settle(pending, [&] {
      return run_with_hooks(pending.operation, pending.limit, pending.owner, pending.cost);
    });
    return 1;
  }
  const auto started = std::chrono::steady_clock::now();
  // The batch's rows in one order, whatever the order of arrival (a request's only
  // neighbours in time are requests of other threads): two batches of different processes
  // then lock PostgreSQL's rows in the same order and never deadlock; requests for the
  // same owner of the same limit keep their order.
  std::stable_sort(batch.begin(), batch.end(), [](const Pending* a, const Pending* b) {
    return std::tie(a->limit, a->owner) < std::tie(b->limit, b->owner);
  });
  const detail::Capabilities can = store->capabilities();
  try {
    store->begin_exclusive(detail::Exclusive::requests);
  } catch (...) {
    fail_all(batch.size(), std::current_exception());
    return batch.size();
  }
  std::size_t ran = 0;
  for (; ran < batch.size(); ++ran) {
    if (can.single_writer && ran > 0 && std::chrono::steady_clock::now() - started > kGroupTime)
      break;
    Pending& pending = *batch[ran];
    settle(pending, [&] {
      if (can.atomic_statements) {
        return run_with_hooks(pending.operation, pending.limit, pending.owner, pending.cost);
      }
      return run_in_savepoint(pending);
    });
    if (pending.error && !store->in_transaction()) {
      // The database ended the transaction itself (SQLite does on a full disk or an I/O
      // error): the requests before this one were rolled back with it.
      fail_all(ran + 1, pending.error);
      return ran + 1;
    }
  }
  try {
    store->commit();
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    store->rollback();
    fail_all(ran, error);
  }
  return ran;
}

Result Engine::Impl::run_in_savepoint(const Pending& pending) {
  // A limit redefined with another algorithm by another connection: the statement of the
  // old one failed, which a store without atomic statements undoes only back to the
  // savepoint.
  OperationSavepoint savepoint(*store);
  for (int attempt = 0;; ++attempt) {
    try {
      const Result result =
          run_with_hooks(pending.operation, pending.limit, pending.owner, pending.cost);
      savepoint.release();
      return result;
    } catch (const Error& error) {
      if (attempt > 0 || error.code() != ErrorCode::unknown_limit) throw;
      savepoint.roll_back();
      forget_kind(pending.limit);
    }
  }
}

void Engine::Impl::start() {
  store->retry_while_busy([&] { start_once(); });
  store->started();
}

void Engine::Impl::start_once() {
  store->probe();
  // Every refusal comes before the store prepares for writing (SQLite's switch to WAL
  // rewrites the file's header): a database this build will not use is left exactly as it
  // was.
  const detail::SchemaStatus status = detail::read_schema_status(*store);
  detail::require_usable(status);
  if (!status.pending.empty() && (!options.migrate || options.read_only)) {
    throw Error(ErrorCode::not_migrated,
                fmt::format("the database is at schema version {} and needs migrations up "
                            "to {}: run `quotactl migrate` (or open with migrate enabled)",
                            status.version, detail::latest_version(*store)));
  }
  if (options.read_only) return;
  store->prepare_for_writing();
  std::vector<int> applied;
  if (!status.pending.empty()) detail::apply_pending(*store, options.clock(), applied);
}

void Engine::Impl::forget_kind(std::string_view name) {
  if (const auto found = kinds.find(name); found != kinds.end()) kinds.erase(found);
  if (const auto found = shapes.find(name); found != shapes.end()) shapes.erase(found);
}

void Engine::Impl::forget_overridden(std::string_view limit) {
  if (limit == kEveryLimit) {
    kinds.clear();
    shapes.clear();
  } else {
    forget_kind(limit);
  }
}

std::optional<detail::StatementKind> Engine::Impl::statement_kind(std::string_view name,
                                                                  bool refresh) {
  const auto found = kinds.find(name);
  if (found != kinds.end()) {
    if (!refresh) return found->second;
    forget_kind(name);
  }
  const std::string key(name);
  // Plain: no shadow mode, block or calendar, and no override of the limit or of '*'; the
  // flag that migration 0010's triggers keep, which the plain statements guard on. Flat: not
  // plain, but no override (migration 0016's flag, the flat statements' guard) or calendar;
  // overridden: an override concerns it, and no calendar (the flat statements with overrides).
  const std::vector<Row> rows = store->query(
      "SELECT algorithm, calendar, CASE WHEN plain THEN 1 ELSE 0 END, "
      "CASE WHEN overridden THEN 1 ELSE 0 END "
      "FROM quota_limits WHERE name = ?1",
      {Value(key)});
  if (rows.empty()) return std::nullopt;
  const auto algorithm = parse_algorithm(text_of(rows.front().at(0)));
  if (!algorithm) return std::nullopt;
  const detail::StatementKind kind =
      detail::kind_of(*algorithm, !detail::is_null(rows.front().at(1)));
  kinds.emplace(key, kind);
  if (integer_of(rows.front().at(2)) == 1) {
    shapes.emplace(key, detail::Shape::plain);
  } else if (detail::is_null(rows.front().at(1))) {
    shapes.emplace(key, integer_of(rows.front().at(3)) == 0 ? detail::Shape::flat
                                                            : detail::Shape::overridden);
  }
  return kind;
}

Result Engine::Impl::run(Operation operation, std::string_view limit, std::string_view owner,
                         std::int64_t cost, detail::Held* held) {
  // On the server's clock a lone statement reads the time itself (its :now is NULL), so
  // that it costs no round trip of its own.
  return run_at(operation, limit, owner, cost,
                options.server_clock ? std::nullopt : std::optional<std::int64_t>(now()), held);
}

void Engine::Impl::require_concurrency(std::string_view limit) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto kind = statement_kind(limit, attempt > 0);
    if (!kind) throw unknown_limit(limit);
    if (*kind == detail::StatementKind::concurrency) return;
    if (attempt > 0) throw detail::not_concurrency(limit, detail::stored_algorithm(*kind), "acquire_lease");
  }
}

std::int64_t Engine::Impl::now() {
  if (options.server_clock) {
    return integer_of(
        store->query(fmt::format("SELECT {}", store->dialect().database_now), {}).at(0).at(0));
  }
  const std::int64_t now = options.clock();
  if (now < 0) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("the clock returned {}: times are Unix milliseconds >= 0", now));
  }
  return now;
}

Result Engine::Impl::run_at(Operation operation, std::string_view limit, std::string_view owner,
                            std::int64_t cost, std::optional<std::int64_t> now,
                            detail::Held* held) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto kind = statement_kind(limit, attempt > 0);
    if (!kind) throw unknown_limit(limit);
    const bool leasing = *kind == detail::StatementKind::concurrency;
    if (held && held->only_concurrency && !leasing) {
      // Redefined by another connection since the caller's look.
      if (attempt == 0) continue;
      throw detail::not_concurrency(limit, detail::stored_algorithm(*kind), "acquire_lease");
    }
    if (operation == Operation::refund && *kind == detail::StatementKind::concurrency) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("refund does not apply to concurrency limit '{}': release the "
                              "lease (Engine::release_lease) to free its units",
                              limit));
    }
    // A concurrency limit's consume and record answer their lease after the Result's columns
    // (its plain statement as its general one).
    const auto answer = [&](const Row& row) {
      const bool taking = operation == Operation::consume || operation == Operation::record;
      if (held && leasing && taking && !detail::is_null(row.at(7))) {
        held->lease = text_of(row.at(7));
        held->expires_at_ms = integer_of(row.at(8));
      }
      return detail::result_of(row);
    };
    try {
      // "unknown limit": the limit was redefined, or is no longer plain (read again below).
      const std::optional<Row> row =
          run_specialised_first(operation, *kind, limit, {limit, owner, cost, now});
      if (row) return answer(*row);
    } catch (const Error& error) {
      if (error.code() != ErrorCode::unknown_limit) throw;
    }
  }
  throw unknown_limit(limit);
}

std::optional<detail::StatementKind> Engine::Impl::specialised_kind(Operation operation,
                                                                    detail::StatementKind kind,
                                                                    std::string_view limit) const {
  const auto found = shapes.find(limit);
  if (found == shapes.end()) return std::nullopt;
  return detail::specialised_kind(operation, kind, found->second);
}

std::optional<Row> Engine::Impl::run_specialised_first(Operation operation,
                                                       detail::StatementKind kind,
                                                       std::string_view limit,
                                                       const detail::StatementRequest& request) {
  // A specialised statement refused ("unknown limit": no longer this shape) inside a
  // transaction would abort it where a failed statement aborts the transaction (PostgreSQL):
  // there, inside one, the general statement runs alone.
  const auto specialised = specialised_kind(operation, kind, limit);
  if (specialised && (store->capabilities().atomic_statements || !store->in_transaction())) {
    if (std::optional<Row> row = store->run(operation, *specialised, request)) return row;
  }
  return store->run(operation, kind, request);
}

std::optional<std::pair<Usage, Result>> Engine::Impl::reading_at(detail::StatementKind kind,
                                                                 std::string_view limit,
                                                                 std::string_view owner,
                                                                 std::int64_t cost,
                                                                 std::int64_t now) {
  // Engine::usage and the watches read as Engine::check does.
  const std::optional<Row> row =
      run_specialised_first(Operation::check, kind, limit, {limit, owner, cost, now});
  if (!row) return std::nullopt;
  const Result result = detail::result_of(*row);
  Usage usage{std::string(limit),     std::string(owner),    integer_of(row->at(7)),
              result.remaining,       result.denied,         result.reset_at_ms,
              integer_of(row->at(8)), integer_of(row->at(9))};
  // An exempt owner's used is 0: the check's answer says so (src/sql/fragments.cpp,
  // answer.used), as the quota_usage view does.
  if (!detail::is_null(row->at(10))) usage.blocked_until_ms = integer_of(row->at(10));
  return std::pair{std::move(usage), result};
}

std::optional<Usage> Engine::Impl::usage_at(detail::StatementKind kind, std::string_view limit,
                                            std::string_view owner, std::int64_t now) {
  auto reading = reading_at(kind, limit, owner, 1, now);
  if (!reading) return std::nullopt;
  return std::move(reading->first);
}

const Hooks* Engine::Impl::hooks_of(std::string_view limit) const {
  if (hooks.empty()) return nullptr;
  const auto found = hooks.find(limit);
  return found == hooks.end() ? nullptr : &found->second;
}

Result Engine::Impl::hook_denial(const Request& request) {
  Result result =
      run_at(Operation::check, request.limit, request.owner, request.cost, request.now_ms);
  result.allowed = false;
  result.reason = Reason::hook_denied;
  result.retry_after_ms = -1;
  result.shadow_denied = false;
  return result;
}

void Engine::Impl::after_decision(const Hooks& limit_hooks,
                                  const std::function<void(const Request&, const Result&)>& after,
                                  const Request& request, const Result& result) {
  if (!result.allowed && limit_hooks.on_exceeded) limit_hooks.on_exceeded(request, result);
  if (after) after(request, result);
}

Result Engine::Impl::run_with_hooks(Operation operation, std::string_view limit,
                                    std::string_view owner, std::int64_t cost,
                                    std::optional<std::int64_t> at, detail::Held* held) {
  const bool consuming = operation == Operation::consume;
  const Hooks* limit_hooks =
      consuming || operation == Operation::record ? hooks_of(limit) : nullptr;
  if (!limit_hooks) {
    return at ? run_at(operation, limit, owner, cost, at, held)
              : run(operation, limit, owner, cost, held);
  }
  const Request request{limit, owner, cost, at ? *at : now()};
  OperationSavepoint savepoint(*store);
  bool refused = false;
  if (consuming) {
    refused = limit_hooks->before_consume && !limit_hooks->before_consume(request);
  } else if (limit_hooks->before_record) {
    limit_hooks->before_record(request);
  }
  const Result result = refused ? hook_denial(request)
                                : run_at(operation, limit, owner, cost, request.now_ms, held);
  after_decision(*limit_hooks, consuming ? limit_hooks->after_consume : limit_hooks->after_record,
                 request, result);
  savepoint.release();
  return result;
}

std::vector<Result> Engine::Impl::run_many(Operation operation,
                                           const std::vector<BatchRequest>& requests) {
  std::vector<std::size_t> order(requests.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(requests[a].limit, requests[a].owner) <
           std::tie(requests[b].limit, requests[b].owner);
  });
  // On the server's clock each statement reads the time itself, as a lone one does.
  const std::optional<std::int64_t> at =
      options.server_clock ? std::nullopt : std::optional<std::int64_t>(now());
  if (requests.size() == 1) {
    // One statement is a transaction of its own (with hooks, run_with_hooks makes the
    // savepoint): nothing to begin or commit around it.
    return {run_with_hooks(operation, requests[0].limit, requests[0].owner, requests[0].cost, at)};
  }
  bool plain = true;
  std::vector<detail::Step> steps;
  steps.reserve(requests.size());
  for (const std::size_t i : order) {
    const BatchRequest& request = requests[i];
    const auto kind = statement_kind(request.limit, false);
    if (!kind) throw unknown_limit(request.limit);
    if (operation != Operation::check && hooks_of(request.limit)) plain = false;
    // A plain or flat limit's own statement, as a lone request runs it
    // (run_specialised_first): the store runs the general one after it for an owner without
    // state.
    steps.push_back({operation, specialised_kind(operation, *kind, request.limit).value_or(*kind),
                     {request.limit, request.owner, request.cost, at}});
  }
  std::vector<Result> results(requests.size());
  if (plain && run_all_at_once(steps, order, results)) return results;
  if (plain) {
    // Looked up afresh by run_at below: PostgreSQL cannot run a statement again in the
    // transaction where it failed.
    for (const BatchRequest& request : requests) forget_kind(request.limit);
  }
  store->begin_exclusive(detail::Exclusive::requests);
  try {
    for (const std::size_t i : order) {
      const BatchRequest& request = requests[i];
      results[i] = run_with_hooks(operation, request.limit, request.owner, request.cost, at);
    }
    store->commit();
  } catch (...) {
    store->rollback();
    throw;
  }
  return results;
}

bool Engine::Impl::run_all_at_once(const std::vector<detail::Step>& steps,
                                   const std::vector<std::size_t>& order,
                                   std::vector<Result>& results) {
  try {
    const std::vector<std::optional<Row>> rows = store->run_all(steps);
    std::size_t answered = 0;
    for (; answered < rows.size() && rows[answered]; ++answered) {
      results[order[answered]] = detail::result_of(*rows[answered]);
    }
    return answered == rows.size();
  } catch (const Error& error) {
    if (error.code() != ErrorCode::unknown_limit) throw;
    return false;
  }
}

std::vector<Result> Engine::Impl::decide_many(Operation operation,
                                              const std::vector<BatchRequest>& requests) {
  validate_batch(requests);
  if (requests.empty()) return {};
  const detail::Measured measured(counters, counted_as(operation, false));
  std::vector<Result> results = counted(measured, [&] {
    return decide<std::vector<Result>>(
        [&] {
          std::lock_guard lock(mutex);
          return run_many(operation, requests);
        },
        requests.size());
  });
  // One batch, one duration and one lock: the clock is read once, not once per request.
  counters.decided_all(measured.operation(), results,
                       [&](std::size_t i) { return std::string_view(requests[i].limit); },
                       measured.elapsed());
  if (operation != Operation::check) tell_watchers();
  return results;
}

std::optional<Decision> Engine::Impl::consume_all(const std::vector<Charge>& charges,
                                                  std::int64_t cost, bool final) {
  const std::int64_t at = now();
  OperationSavepoint savepoint(*store);
  for (const Charge& charge : charges) {
    const Hooks* limit_hooks = hooks_of(charge.limit);
    const Request request{charge.limit, charge.owner, charge.cost.value_or(cost), at};
    if (limit_hooks && limit_hooks->before_consume && !limit_hooks->before_consume(request)) {
      Decision decision{std::string(charge.limit), hook_denial(request)};
      after_decision(*limit_hooks, limit_hooks->after_consume, request, decision.result);
      savepoint.release();
      return decision;
    }
  }
  // The limits are charged in one order whatever the call's (by limit, then owner), so that
  // two calls naming them in other orders never wait on each other's rows (a deadlock on
  // PostgreSQL); the answer reads them in the call's order.
  std::vector<std::size_t> order(charges.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(charges[a].limit, charges[a].owner) <
           std::tie(charges[b].limit, charges[b].owner);
  });
  std::vector<Result> results(charges.size());
  std::vector<std::optional<LeaseGrant>> taken(charges.size());
  std::size_t deciding = 0;
  // Each round decides over every limit. A denial is undone and then counted by the deciding
  // limit's consume alone; on PostgreSQL the undoing frees the rows' locks, so that consume
  // may meet units another connection gave back meanwhile and allow: it is undone too, and
  // the next round decides over every limit again. Only another connection's change starts
  // a round (SQLite's write lock, held throughout, leaves one round).
  for (;;) {
    for (const std::size_t i : order) {
      detail::Held held;
      results[i] = run_at(Operation::consume, charges[i].limit, charges[i].owner,
                          charges[i].cost.value_or(cost), at, &held);
      taken[i].reset();
      if (!held.lease.empty()) {
        taken[i] = LeaseGrant{std::string(charges[i].limit), std::string(charges[i].owner),
                              std::move(held.lease), held.expires_at_ms};
      }
    }
    deciding = 0;
    for (std::size_t i = 1; i < charges.size(); ++i) {
      if (decides_over(results[i], results[deciding])) deciding = i;
    }
    if (results[deciding].allowed) break;
    // A denial holds nothing: the rollback deletes the leases taken.
    savepoint.roll_back();
    if (!final) {
      savepoint.release();
      return std::nullopt;
    }
    const Result denial = run_at(Operation::consume, charges[deciding].limit,
                                 charges[deciding].owner, charges[deciding].cost.value_or(cost), at);
    if (!denial.allowed) {
      results[deciding] = denial;
      break;
    }
    savepoint.roll_back();
  }
  std::vector<LeaseGrant> leases;
  if (results[deciding].allowed) {
    for (std::optional<LeaseGrant>& lease : taken) {
      if (lease) leases.push_back(std::move(*lease));
    }
  }
  const bool allowed = results[deciding].allowed;
  for (std::size_t i = 0; i < charges.size(); ++i) {
    if (!allowed && i != deciding) continue;
    if (const Hooks* limit_hooks = hooks_of(charges[i].limit)) {
      after_decision(*limit_hooks, limit_hooks->after_consume,
                     {charges[i].limit, charges[i].owner, charges[i].cost.value_or(cost), at},
                     results[i]);
    }
  }
  savepoint.release();
  return Decision{std::string(charges[deciding].limit), results[deciding], std::move(leases)};
}

Decision Engine::Impl::check_all(const std::vector<Charge>& charges, std::int64_t cost) {
  const std::int64_t at = now();
  std::vector<Result> results;
  std::size_t deciding = 0;
  for (std::size_t i = 0; i < charges.size(); ++i) {
    results.push_back(run_at(Operation::check, charges[i].limit, charges[i].owner,
                             charges[i].cost.value_or(cost), at));
    if (decides_over(results[i], results[deciding])) deciding = i;
  }
  return {std::string(charges[deciding].limit), results[deciding]};
}

Decision Engine::Impl::acquire_all(const std::vector<Charge>& charges, std::int64_t cost,
                                   std::chrono::milliseconds max_wait,
                                   const std::stop_token& stop) {
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  while (!stop.stop_requested()) {
    std::optional<Decision> attempt = writing([&] { return consume_all(charges, cost, false); });
    if (attempt) return std::move(*attempt);
    const Decision probe = guarded([&] { return check_all(charges, cost); });
    const std::int64_t wait = probe.result.allowed ? 0 : probe.result.retry_after_ms;
    if (wait < 0) break;
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(wait) > deadline) break;
    // Allowed by the time of the check (time passed, or another client gave units back):
    // the next attempt comes at once.
    if (wait > 0 && !sleep_unless_stopped(std::chrono::milliseconds(wait), stop)) break;
    if (wait == 0 && std::chrono::steady_clock::now() >= deadline) break;
  }
  return *writing([&] { return consume_all(charges, cost); });
}

// What the watch thread reads through: a connection of its own to the same database (a
// private Impl on it), or for an in-memory database the Engine's own, under its lock.
class Engine::Impl::Reader final : public detail::WatchReader {
 public:
  explicit Reader(Impl& shared) : impl_(shared), own_connection_(false) {}
  explicit Reader(std::unique_ptr<Impl> own)
      : own_(std::move(own)), impl_(*own_), own_connection_(true) {}

  std::int64_t now() override {
    return impl_.options.server_clock ? impl_.guarded([&] { return impl_.now(); }) : impl_.now();
  }
  std::string marker() override {
    if (!own_connection_) return {};
    return impl_.guarded([&] {
      const detail::Value value =
          impl_.store->query(std::string(impl_.store->dialect().change_marker), {}).at(0).at(0);
      return std::holds_alternative<std::int64_t>(value) ? std::to_string(integer_of(value))
                                                         : text_of(value);
    });
  }
  std::optional<detail::StatementKind> kind(std::string_view limit) override {
    return impl_.guarded([&] { return impl_.statement_kind(limit, true); });
  }
  std::vector<std::string> owners(detail::StatementKind kind, std::string_view limit) override {
    return impl_.guarded([&] { return owners_of(*impl_.store, kind, limit); });
  }
  std::optional<std::pair<Usage, Result>> read(detail::StatementKind kind, std::string_view limit,
                                               std::string_view owner, std::int64_t cost,
                                               std::int64_t at) override {
    return impl_.guarded([&] { return impl_.reading_at(kind, limit, owner, cost, at); });
  }

 private:
  std::unique_ptr<Impl> own_;
  Impl& impl_;
  bool own_connection_;
};

detail::WatchHub& Engine::Impl::watch_hub() {
  std::lock_guard lock(hub_mutex);
  if (hub) return *hub;
  const std::optional<detail::Location> location = guarded([&] { return store->watch_location(); });
  std::unique_ptr<detail::WatchReader> reader;
  if (!location) {
    reader = std::make_unique<Reader>(*this);
  } else {
    detail::StoreSettings settings;
    settings.purpose = detail::StoreSettings::Purpose::reader;
    settings.busy_timeout = options.busy_timeout;
    reader = std::make_unique<Reader>(
        std::make_unique<Impl>(detail::open_store(*location, settings), options));
  }
  hub = std::make_unique<detail::WatchHub>(std::move(reader), options.watch_interval);
  hub_signal.store(hub.get(), std::memory_order_release);
  return *hub;
}

}  // namespace quota
