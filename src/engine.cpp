#include "quota/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <set>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "gc.h"
#include "location.h"
#include "migrations.h"
#include "open_store.h"
#include "quota/postgresql.h"
#include "quota/sqlite.h"
#include "statements.h"
#include "store.h"
#include "watch.h"

namespace quota {

std::int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

using detail::Operation;

// `meant`: the stored limits the caller likely meant (quota::likely_meant), when known.
Error unknown_limit(std::string_view name, std::vector<std::string> meant = {}) {
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

using detail::integer_of;
using detail::Row;
using detail::text_of;
using detail::Value;

Result read_result(const Row& row) {
  Result result;
  result.allowed = integer_of(row.at(0)) != 0;
  result.reason = parse_reason(text_of(row.at(1))).value_or(Reason::rate_limited);
  result.remaining = integer_of(row.at(2));
  result.retry_after_ms = integer_of(row.at(3));
  result.reset_at_ms = integer_of(row.at(4));
  result.denied = integer_of(row.at(5));
  result.shadow_denied = integer_of(row.at(6)) != 0;
  return result;
}

// A limit's name, or kEveryLimit where an override or an anchor may name every limit.
void validate_limit_or_every(std::string_view name) {
  if (name != kEveryLimit) validate_limit_name(name);
}

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

// The owners of `limit` with a row of state: only the table of the limit's algorithm holds
// its owners (a change of algorithm discards the others' rows).
std::vector<std::string> owners_of(detail::Store& store, detail::StatementKind kind,
                                   std::string_view limit) {
  std::vector<std::string> names;
  for (const Row& row : store.query(fmt::format("SELECT owner FROM {} WHERE limit_name = ?1",
                                                detail::state_table(kind)),
                                    {Value(std::string(limit))})) {
    names.push_back(text_of(row.at(0)));
  }
  return names;
}

std::vector<Limit> list_locked(detail::Store& store) {
  std::vector<Limit> limits;
  for (const Row& row : store.query(std::string(kSelectLimits) + " ORDER BY name", {})) {
    limits.push_back(read_limit(row));
  }
  return limits;
}

std::optional<Limit> get_locked(detail::Store& store, std::string_view name) {
  const std::vector<Row> rows =
      store.query(std::string(kSelectLimits) + " WHERE name = ?1", {Value(std::string(name))});
  if (rows.empty()) return std::nullopt;
  return read_limit(rows.front());
}

// A savepoint of one operation: rolled back unless released, so that a hook that throws
// (or any other failure) leaves nothing of the operation behind. Inside the application's
// open transaction it nests; otherwise it is the transaction.
class OperationSavepoint {
 public:
  explicit OperationSavepoint(detail::Store& store) : store_(store) {
    store_.savepoint("quota_operation");
  }
  ~OperationSavepoint() {
    if (open_) store_.abandon("quota_operation");
  }
  OperationSavepoint(const OperationSavepoint&) = delete;
  OperationSavepoint& operator=(const OperationSavepoint&) = delete;

  // Undoes everything since the savepoint began and keeps it open.
  void roll_back() { store_.rollback_to("quota_operation"); }
  void release() {
    store_.release("quota_operation");
    open_ = false;
  }

 private:
  detail::Store& store_;
  bool open_ = true;
};

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

struct Engine::Impl {
  Impl(std::unique_ptr<detail::Store> engine_store, Options engine_options)
      : store(std::move(engine_store)), options(std::move(engine_options)) {
    if (!options.clock) options.clock = system_clock_ms;
  }
  ~Impl() {
    // Every watch ends before the connection its reader may share goes.
    if (hub) hub->stop();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::unique_ptr<detail::Store> store;
  Options options;
  std::mutex mutex;  // one operation at a time on the connection
  // limit name -> its statements' kind (src/statements.h); std::less<> finds a string_view
  // without building a string
  std::map<std::string, detail::StatementKind, std::less<>> kinds;
  // the limits of `kinds` read as plain (no override, shadow mode, block or calendar):
  // their consume and record run the plain statements first (src/statements.h)
  std::set<std::string, std::less<>> plain_limits;
  // limit name -> its hooks (set_hooks); empty for most engines, so no lookup costs much
  std::map<std::string, Hooks, std::less<>> hooks;

  // Engine::watch's thread, started by the first watch; hub_signal is what an operation that
  // writes looks at, without a lock, to tell it (nullptr while nobody watches).
  class Reader;
  std::mutex hub_mutex;
  std::unique_ptr<detail::WatchHub> hub;
  std::atomic<detail::WatchHub*> hub_signal{nullptr};

  template <typename Function>
  auto guarded(Function&& function) -> decltype(function()) {
    std::lock_guard lock(mutex);
    try {
      return function();
    } catch (const Error& error) {
      if (error.code() != ErrorCode::unknown_limit || error.limit().empty()) throw;
      throw suggesting(error);
    }
  }

  // An unknown_limit error that also offers the stored limits the caller likely meant, looked
  // up once the failed statement's transaction has ended (the lock held); `error` as it is
  // when the lookup fails.
  Error suggesting(const Error& error) {
    std::vector<std::string> names;
    try {
      for (Limit& limit : list_locked(*store)) names.push_back(std::move(limit.name));
    } catch (const std::exception&) {
      return error;
    }
    return unknown_limit(error.limit(), likely_meant(error.limit(), names));
  }

  // guarded, for an operation that may write: the watches look again after it, with the
  // lock released.
  template <typename Function>
  auto writing(Function&& function) -> decltype(function()) {
    struct Tell {
      Impl& impl;
      ~Tell() { impl.tell_watchers(); }
    } tell{*this};
    return guarded(std::forward<Function>(function));
  }

  void tell_watchers() {
    if (detail::WatchHub* watching = hub_signal.load(std::memory_order_acquire)) watching->poke();
  }

  detail::WatchHub& watch_hub();

  // Runs one of the operations that answer whether a request may proceed (consume, check,
  // record) under Options::failure_policy: the one place where a failure of the database
  // may become an answer. `run` is called without the lock and takes it itself.
  template <typename Answer, typename Function>
  Answer decide(Function&& run, std::size_t requests) {
    std::optional<Error> failure;
    try {
      return run();
    } catch (const detail::TransactionConflict&) {
      throw;  // asks for the transaction to run again, not for a verdict
    } catch (const Error& error) {
      if (error.code() == ErrorCode::unknown_limit && !error.limit().empty()) {
        std::lock_guard lock(mutex);
        throw suggesting(error);
      }
      if (options.failure_policy == FailurePolicy::fail_closed || !is_store_failure(error.code())) {
        throw;
      }
      failure = error;
    }
    if (options.on_error) options.on_error(*failure);
    Result answer;
    answer.reason = Reason::store_unavailable;
    answer.reset_at_ms = options.clock();
    if constexpr (std::is_same_v<Answer, Result>) {
      return answer;
    } else {
      return Answer(requests, answer);
    }
  }

  Result decide(Operation operation, std::string_view limit, std::string_view owner,
                std::int64_t cost) {
    Result result = decide<Result>(
        [&] {
          if (grouping) return grouped(operation, limit, owner, cost);
          std::lock_guard lock(mutex);
          return run_with_hooks(operation, limit, owner, cost);
        },
        1);
    // The watches look again after a write, with the lock released.
    if (operation != Operation::check) tell_watchers();
    return result;
  }

  // ---------------------------------------------------------------------------------------
  // Group commit (Options::group_commit). A request that arrives while another thread leads
  // a batch waits in `queue`; when no batch runs, the oldest waiting thread leads the next:
  // it takes up to kGroupCount requests, runs them in one transaction and commits, then
  // marks them done and wakes their threads. Each request's answer (or error) is read by its
  // own thread after that commit.

  struct Pending {
    Operation operation;
    std::string_view limit;
    std::string_view owner;
    std::int64_t cost;
    std::optional<Result> result;
    std::exception_ptr error;
    bool done = false;
  };

  static constexpr std::size_t kGroupCount = 32;
  // SQLite's write lock excludes every other writer for the whole batch, so a batch there
  // takes no more requests once it has run for kGroupTime. PostgreSQL's row locks exclude
  // only the writers of the batch's own rows: the count bounds a batch there.
  static constexpr std::chrono::microseconds kGroupTime{1000};

  bool grouping = false;
  std::mutex queue_mutex;
  std::condition_variable queue_changed;
  std::deque<Pending*> queue;
  bool leading = false;

  Result grouped(Operation operation, std::string_view limit, std::string_view owner,
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

  // Runs `batch` (at least one request) and answers the first requests of it that it ran,
  // returning how many (at least one). One request runs alone, as without group commit.
  // Several run in one transaction, each in a savepoint of its own where its statement is
  // not atomic by itself (a limit with hooks, or PostgreSQL, where a failed statement
  // aborts the whole transaction): a request that fails undoes only itself. The batch takes
  // no more requests once it has run for kGroupTime; a failed commit fails every request.
  std::size_t run_group(std::vector<Pending*>& batch) noexcept {
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
        // A limit redefined with another algorithm by another connection: the statement
        // of the old one failed, which PostgreSQL undoes only back to the savepoint.
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

  void start() {
    store->retry_while_busy([&] { start_once(); });
    store->started();
  }

  void start_once() {
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

  void forget_kind(std::string_view name) {
    if (const auto found = kinds.find(name); found != kinds.end()) kinds.erase(found);
    if (const auto found = plain_limits.find(name); found != plain_limits.end())
      plain_limits.erase(found);
  }

  // After a change to the overrides of `limit` ('*': of every limit): whether a limit is
  // plain is read again at its next request.
  void forget_overridden(std::string_view limit) {
    if (limit == kEveryLimit) {
      kinds.clear();
      plain_limits.clear();
    } else {
      forget_kind(limit);
    }
  }

  // The limit's statements' kind (src/statements.h), from the cache or the database; nullopt
  // when there is no limit.
  std::optional<detail::StatementKind> statement_kind(std::string_view name, bool refresh) {
    const auto found = kinds.find(name);
    if (found != kinds.end()) {
      if (!refresh) return found->second;
      forget_kind(name);
    }
    const std::string key(name);
    // Plain: no shadow mode, block or calendar, and no override of the limit or of '*'.
    const std::vector<Row> rows = store->query(
        "SELECT algorithm, calendar, CASE WHEN NOT shadow AND block_ms IS NULL "
        "AND calendar IS NULL AND NOT EXISTS (SELECT 1 FROM quota_overrides "
        "WHERE limit_name = ?1 OR limit_name = '*') THEN 1 ELSE 0 END "
        "FROM quota_limits WHERE name = ?1",
        {Value(key)});
    if (rows.empty()) return std::nullopt;
    const auto algorithm = parse_algorithm(text_of(rows.front().at(0)));
    if (!algorithm) return std::nullopt;
    const detail::StatementKind kind =
        detail::kind_of(*algorithm, !detail::is_null(rows.front().at(1)));
    kinds.emplace(key, kind);
    if (integer_of(rows.front().at(2)) == 1) plain_limits.insert(key);
    return kind;
  }

  // Runs `operation`'s one statement. The statement of each algorithm only matches limits
  // of that algorithm, so a limit redefined by another connection is noticed (no row, or
  // "unknown limit") and the statement of its new algorithm is run instead.
  Result run(Operation operation, std::string_view limit, std::string_view owner,
             std::int64_t cost) {
    // On the server's clock a lone statement reads the time itself (its :now is NULL), so
    // that it costs no round trip of its own.
    return run_at(operation, limit, owner, cost,
                  options.server_clock ? std::nullopt : std::optional<std::int64_t>(now()));
  }

  // Now: Options::clock, or the database's own clock (Options::server_clock).
  std::int64_t now() {
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

  Result run_at(Operation operation, std::string_view limit, std::string_view owner,
                std::int64_t cost, std::optional<std::int64_t> now) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const auto kind = statement_kind(limit, attempt > 0);
      if (!kind) throw unknown_limit(limit);
      try {
        // A plain limit's statement first; it answers nothing for an owner without state,
        // whose first request the general statement makes, and fails with "unknown limit"
        // when the limit or the owner is no longer plain (read again below).
        const auto plain = detail::plain_kind(operation, *kind);
        if (plain && plain_limits.find(limit) != plain_limits.end()) {
          const std::optional<Row> row = store->run(operation, *plain, {limit, owner, cost, now});
          if (row) return read_result(*row);
        }
        const std::optional<Row> row = store->run(operation, *kind, {limit, owner, cost, now});
        if (row) return read_result(*row);
      } catch (const Error& error) {
        if (error.code() != ErrorCode::unknown_limit) throw;
      }
    }
    throw unknown_limit(limit);
  }

  // `owner`'s usage of `limit` at `now` and the check of `cost` then, by the limit's check
  // statement (which changes nothing); nullopt when the statement finds no such limit.
  std::optional<std::pair<Usage, Result>> reading_at(detail::StatementKind kind,
                                                     std::string_view limit,
                                                     std::string_view owner, std::int64_t cost,
                                                     std::int64_t now) {
    const std::optional<Row> row = store->run(Operation::check, kind, {limit, owner, cost, now});
    if (!row) return std::nullopt;
    const Result result = read_result(*row);
    Usage usage{std::string(limit),     std::string(owner),    integer_of(row->at(7)),
                result.remaining,       result.denied,         result.reset_at_ms,
                integer_of(row->at(8)), integer_of(row->at(9))};
    // An exempt owner uses no quota (docs/concepts.md): its answers say the whole capacity
    // remains, and so does its usage, whatever it recorded before the exemption (kept, and
    // counted again if the exemption goes). Only such an owner is answered the whole capacity
    // with anything in use: for every other, used + remaining is the capacity, or in debt
    // more than it with nothing remaining.
    if (usage.remaining == usage.capacity && usage.used > 0) usage.used = 0;
    if (!detail::is_null(row->at(10))) usage.blocked_until_ms = integer_of(row->at(10));
    return std::pair{std::move(usage), result};
  }

  std::optional<Usage> usage_at(detail::StatementKind kind, std::string_view limit,
                                std::string_view owner, std::int64_t now) {
    auto reading = reading_at(kind, limit, owner, 1, now);
    if (!reading) return std::nullopt;
    return std::move(reading->first);
  }

  // ---------------------------------------------------------------------------------------
  // Hooks (docs/).   An operation on a limit without hooks runs its one statement and
  // nothing else; with hooks, it runs inside a savepoint so that a hook that throws takes
  // the whole operation back.

  const Hooks* hooks_of(std::string_view limit) const {
    if (hooks.empty()) return nullptr;
    const auto found = hooks.find(limit);
    return found == hooks.end() ? nullptr : &found->second;
  }

  // A consume that before_consume refused: the figures of a check, nothing written.
  Result hook_denial(const Request& request) {
    Result result =
        run_at(Operation::check, request.limit, request.owner, request.cost, request.now_ms);
    result.allowed = false;
    result.reason = Reason::hook_denied;
    result.retry_after_ms = -1;
    result.shadow_denied = false;
    return result;
  }

  // on_exceeded (on a denial), then `after`.
  static void after_decision(const Hooks& limit_hooks,
                             const std::function<void(const Request&, const Result&)>& after,
                             const Request& request, const Result& result) {
    if (!result.allowed && limit_hooks.on_exceeded) limit_hooks.on_exceeded(request, result);
    if (after) after(request, result);
  }

  // consume and record with the limit's hooks (if any); the other operations have none. A
  // limit without hooks runs its statement alone; with hooks, the before hook (which may
  // refuse a consume), the statement and the after hooks share one savepoint.
  // `at`: the batch's time (consume_many), or none: now.
  Result run_with_hooks(Operation operation, std::string_view limit, std::string_view owner,
                        std::int64_t cost, std::optional<std::int64_t> at = std::nullopt) {
    const bool consuming = operation == Operation::consume;
    const Hooks* limit_hooks =
        consuming || operation == Operation::record ? hooks_of(limit) : nullptr;
    if (!limit_hooks) {
      return at ? run_at(operation, limit, owner, cost, at) : run(operation, limit, owner, cost);
    }
    const Request request{limit, owner, cost, at ? *at : now()};
    OperationSavepoint savepoint(*store);
    bool refused = false;
    if (consuming) {
      refused = limit_hooks->before_consume && !limit_hooks->before_consume(request);
    } else if (limit_hooks->before_record) {
      limit_hooks->before_record(request);
    }
    const Result result =
        refused ? hook_denial(request) : run_at(operation, limit, owner, cost, request.now_ms);
    after_decision(*limit_hooks, consuming ? limit_hooks->after_consume : limit_hooks->after_record,
                   request, result);
    savepoint.release();
    return result;
  }

  // consume_many, check_many, record_many (validated): in one transaction, every request
  // or none, run in the order of (limit, owner) (requests of one owner of one limit in the
  // order given), so that batches of different connections lock PostgreSQL's rows in one
  // order and never deadlock; answers in the order given. Without hooks the store runs them
  // all at once (PostgreSQL: one round trip); a limit redefined with another algorithm
  // meanwhile sends them through run_at, which notices it.
  std::vector<Result> run_many(Operation operation, const std::vector<BatchRequest>& requests) {
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
      return {
          run_with_hooks(operation, requests[0].limit, requests[0].owner, requests[0].cost, at)};
    }
    bool plain = true;
    std::vector<detail::Step> steps;
    steps.reserve(requests.size());
    for (const std::size_t i : order) {
      const BatchRequest& request = requests[i];
      const auto kind = statement_kind(request.limit, false);
      if (!kind) throw unknown_limit(request.limit);
      if (operation != Operation::check && hooks_of(request.limit)) plain = false;
      steps.push_back({operation, *kind, {request.limit, request.owner, request.cost, at}});
    }
    std::vector<Result> results(requests.size());
    if (plain) {
      try {
        const std::vector<std::optional<Row>> rows = store->run_all(steps);
        std::size_t answered = 0;
        for (; answered < rows.size() && rows[answered]; ++answered) {
          results[order[answered]] = read_result(*rows[answered]);
        }
        if (answered == rows.size()) return results;
      } catch (const Error& error) {
        if (error.code() != ErrorCode::unknown_limit) throw;
      }
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

  std::vector<Result> decide_many(Operation operation, const std::vector<BatchRequest>& requests) {
    validate_batch(requests);
    if (requests.empty()) return {};
    std::vector<Result> results = decide<std::vector<Result>>(
        [&] {
          std::lock_guard lock(mutex);
          return run_many(operation, requests);
        },
        requests.size());
    if (operation != Operation::check) tell_watchers();
    return results;
  }

  // consume_all: every limit's before_consume first, then every consume in one savepoint;
  // on a denial, everything is rolled back and the deciding limit alone is consumed again,
  // which denies again (same state, same time) and so counts the denial.
  // `final` false: a waiting attempt of acquire, whose denial is rolled back entirely and
  // answered as nullopt (no denial counted, no block started, no after hook or on_exceeded
  // called); a hook's refusal is final all the same.
  std::optional<Decision> consume_all(const std::vector<Charge>& charges, std::int64_t cost,
                                      bool final = true) {
    const std::int64_t at = now();
    OperationSavepoint savepoint(*store);
    for (const Charge& charge : charges) {
      const Hooks* limit_hooks = hooks_of(charge.limit);
      const Request request{charge.limit, charge.owner, cost, at};
      if (limit_hooks && limit_hooks->before_consume && !limit_hooks->before_consume(request)) {
        Decision decision{std::string(charge.limit), hook_denial(request)};
        after_decision(*limit_hooks, limit_hooks->after_consume, request, decision.result);
        savepoint.release();
        return decision;
      }
    }
    std::vector<Result> results;
    std::size_t deciding = 0;
    for (std::size_t i = 0; i < charges.size(); ++i) {
      results.push_back(run_at(Operation::consume, charges[i].limit, charges[i].owner, cost, at));
      if (decides_over(results[i], results[deciding])) deciding = i;
    }
    const bool allowed = results[deciding].allowed;
    if (!allowed) {
      savepoint.roll_back();
      if (!final) {
        savepoint.release();
        return std::nullopt;
      }
      results[deciding] =
          run_at(Operation::consume, charges[deciding].limit, charges[deciding].owner, cost, at);
    }
    for (std::size_t i = 0; i < charges.size(); ++i) {
      if (!allowed && i != deciding) continue;
      if (const Hooks* limit_hooks = hooks_of(charges[i].limit)) {
        after_decision(*limit_hooks, limit_hooks->after_consume,
                       {charges[i].limit, charges[i].owner, cost, at}, results[i]);
      }
    }
    savepoint.release();
    return Decision{std::string(charges[deciding].limit), results[deciding]};
  }

  // The check of every charge at one time, and the one that decides as consume_all would:
  // the wait acquire sleeps for. Writes nothing.
  Decision check_all(const std::vector<Charge>& charges, std::int64_t cost) {
    const std::int64_t at = now();
    std::vector<Result> results;
    std::size_t deciding = 0;
    for (std::size_t i = 0; i < charges.size(); ++i) {
      results.push_back(run_at(Operation::check, charges[i].limit, charges[i].owner, cost, at));
      if (decides_over(results[i], results[deciding])) deciding = i;
    }
    return {std::string(charges[deciding].limit), results[deciding]};
  }

  // Engine::acquire_all (validated): each attempt is a consume_all whose denial is undone;
  // between attempts it sleeps for the checked wait (the algorithm's, or a block's that
  // holds, never one that the attempt itself would have started). The answer that ends the
  // wait is a lone consume_all's: an allowance, or the one denial that counts.
  Decision acquire_all(const std::vector<Charge>& charges, std::int64_t cost,
                       std::chrono::milliseconds max_wait, const std::stop_token& stop) {
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
};

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
  const std::optional<detail::Location> location =
      guarded([&] { return store->watch_location(); });
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
  return detail::EngineAccess::make(detail::open_store(location, settings), std::move(options),
                                    true);
}

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
    return impl_->store->execute("DELETE FROM quota_limits WHERE name = ?1",
                                 {Value(std::string(name))}) > 0;
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
  return impl_->writing([&] { return impl_->run(Operation::reset, limit, owner, 1); });
}

std::vector<std::string> Engine::reset_everywhere(std::string_view owner) {
  validate_owner(owner);
  return impl_->writing([&] {
    OperationSavepoint savepoint(*impl_->store);
    std::vector<std::string> names;
    for (Limit& limit : list_locked(*impl_->store)) {
      impl_->run(Operation::reset, limit.name, owner, 1);
      names.push_back(std::move(limit.name));
    }
    savepoint.release();
    return names;
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
  // Under the failure policy, as consume is: a failure of the database may be the answer.
  return impl_->decide<Result>(
      [&] { return impl_->acquire_all(charges, cost, max_wait, stop).result; }, 1);
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
  return impl_->acquire_all(charges, cost, max_wait, stop);
}

Decision Engine::consume_all(const std::vector<std::string_view>& limits, std::string_view owner,
                             std::int64_t cost) {
  return consume_all(charges_of(limits, owner), cost);
}

Decision Engine::consume_all(const std::vector<Charge>& charges, std::int64_t cost) {
  validate_charges(charges, cost, "consume_all");
  return *impl_->writing([&] { return impl_->consume_all(charges, cost); });
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
      if (override.maximum) {
        Limit as_owner_sees_it = *limit;
        as_owner_sees_it.maximum = *override.maximum;
        if (limit->algorithm == Algorithm::token_bucket) {
          as_owner_sees_it.burst = override.burst.value_or(*override.maximum);
        } else {
          as_owner_sees_it.burst = override.burst;
        }
        try {
          validate_limit(as_owner_sees_it);
        } catch (const Error& error) {
          throw Error(ErrorCode::invalid_argument,
                      fmt::format("the override for owner '{}' does not fit limit '{}': {}",
                                  override.owner, override.limit, error.what()));
        }
      }
    }
    const auto optional_integer = [](const std::optional<std::int64_t>& value) {
      return value ? Value(*value) : Value();
    };
    impl_->forget_overridden(override.limit);
    impl_->store->execute(
        "INSERT INTO quota_overrides (limit_name, owner, policy, maximum, burst) "
        "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (limit_name, owner) DO UPDATE SET "
        "policy = excluded.policy, maximum = excluded.maximum, burst = excluded.burst",
        {Value(override.limit), Value(override.owner),
         Value(std::string(to_string(override.policy))), optional_integer(override.maximum),
         optional_integer(override.burst)});
  });
}

bool Engine::remove_override(std::string_view limit, std::string_view owner) {
  validate_limit_or_every(limit);
  validate_owner(owner);
  return impl_->writing([&] {
    impl_->forget_overridden(limit);
    return impl_->store->execute("DELETE FROM quota_overrides WHERE limit_name = ?1 AND owner = ?2",
                                 {Value(std::string(limit)), Value(std::string(owner))}) > 0;
  });
}

std::vector<Override> Engine::overrides(std::optional<std::string_view> limit) {
  if (limit) validate_limit_or_every(*limit);
  return impl_->guarded([&] {
    std::vector<Override> found;
    // The cast gives the parameter a type where it may be NULL: PostgreSQL cannot infer one
    // from `?1 IS NULL` and refuses the statement otherwise.
    for (const Row& row : impl_->store->query(
             "SELECT limit_name, owner, policy, maximum, burst FROM quota_overrides "
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
    const std::vector<Row> found = impl_->store->query(
        "SELECT l.name, l.algorithm, l.calendar FROM quota_limits AS l WHERE EXISTS ("
        "SELECT 1 FROM quota_overrides AS o WHERE o.owner = ?1 "
        "AND (o.limit_name = l.name OR o.limit_name = '*')) "
        "OR EXISTS (SELECT 1 FROM quota_anchors AS n WHERE n.owner = ?1 "
        "AND (n.limit_name = l.name OR (n.limit_name = '*' AND l.calendar IS NOT NULL))) "
        "OR l.name IN (SELECT limit_name FROM quota_windows WHERE owner = ?1 "
        "UNION ALL SELECT limit_name FROM quota_log_owners WHERE owner = ?1 "
        "UNION ALL SELECT limit_name FROM quota_buckets WHERE owner = ?1) "
        "ORDER BY l.name",
        {Value(std::string(owner))});
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
  return detail::collect_garbage(locked, now, batch_rows, progress);
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
