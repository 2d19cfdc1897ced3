// Engine::Impl: the engine's state and policy behind the public Engine (include/quota/engine.h),
// declared here as LevelDB declares DBImpl in db_impl.h. It names no driver: it reaches the
// database only through the Store of src/store.h, opened by src/open_store.h
// (tests/core/include_graph_test.cpp keeps it so).
//
// src/engine/engine.cpp holds the public methods, which validate and then call in here;
// src/engine/engine_impl.cpp the policy: the lock, the failure policy, group commit, the
// statements' kinds, hooks, batches, consume_all and acquire_all, and the watch's reader.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "expiry.h"
#include "metrics.h"
#include "quota/engine.h"
#include "statements.h"
#include "store.h"
#include "watch.h"

namespace quota {

namespace detail {

// `meant`: the stored limits the caller likely meant (quota::likely_meant), when known.
Error unknown_limit(std::string_view name, std::vector<std::string> meant = {});

// A failure of the database itself rather than of the request: what fail_open answers.
bool is_store_failure(ErrorCode code);

// Where a consume on a concurrency limit puts the lease it took (run_at): its id, empty when
// it took none (denied, exempt, shadow mode, not a concurrency limit), and its expiry.
// `only_concurrency`: acquire_lease's consume, which refuses a limit of another algorithm.
struct Held {
  bool only_concurrency = false;
  std::string lease;
  std::int64_t expires_at_ms = 0;
};

// The refusal of a lease call (`call`) on a limit that is not a concurrency limit.
Error not_concurrency(std::string_view limit, Algorithm algorithm, std::string_view call);

// Every stored limit, by name; the limit `name`, or nullopt.
std::vector<Limit> list_locked(Store& store);
std::optional<Limit> get_locked(Store& store, std::string_view name);

// The owners of `limit` with a row of state: only the table of the limit's statements' kind
// holds its owners (a change of algorithm discards the others' rows).
std::vector<std::string> owners_of(Store& store, StatementKind kind, std::string_view limit);

// A savepoint of one operation: rolled back unless released, so that a hook that throws
// (or any other failure) leaves nothing of the operation behind. Inside the application's
// open transaction it nests; otherwise it is the transaction.
class OperationSavepoint {
 public:
  explicit OperationSavepoint(Store& store) : store_(store) { store_.savepoint("quota_operation"); }
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
  Store& store_;
  bool open_ = true;
};

}  // namespace detail

// Hidden: a nested class takes its enclosing class's visibility, and Engine is exported
// (QUOTA_API), but nothing of Impl is part of the shared library's interface
// (tests/embedding: package.exports).
#if defined(__GNUC__)
#define QUOTA_ENGINE_IMPL_HIDDEN __attribute__((visibility("hidden")))
#else
#define QUOTA_ENGINE_IMPL_HIDDEN
#endif
struct QUOTA_ENGINE_IMPL_HIDDEN Engine::Impl {
  Impl(std::unique_ptr<detail::Store> engine_store, Options engine_options)
      : store(std::move(engine_store)), options(std::move(engine_options)) {
    if (!options.clock) options.clock = system_clock_ms;
    if (options.idempotency_ttl < std::chrono::seconds(1) ||
        options.idempotency_ttl > std::chrono::hours(24 * 30)) {
      throw Error(ErrorCode::invalid_argument,
                  "Options::idempotency_ttl must be from 1 second to 30 days (default 24 hours)");
    }
  }
  ~Impl() {
    expiry.reset();  // before the counters it reports to
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
  // the limits of `kinds` read as plain (no override, shadow mode, block or calendar), flat
  // (shadow mode or a block, but no override or calendar) or overridden (an override, no
  // calendar): their consume and record run the plain or flat statements first
  // (src/statements.h, Shape); a limit not here is general
  std::map<std::string, detail::Shape, std::less<>> shapes;
  // limit name -> its hooks (set_hooks); empty for most engines, so no lookup costs much
  std::map<std::string, Hooks, std::less<>> hooks;
  detail::Counters counters{options.busy_timeout};  // Engine::metrics()
  // Options::expire_interval's background gc (Engine::open only); nullptr when off.
  std::unique_ptr<detail::Expiry> expiry;

  // Engine::watch's thread, started by the first watch; hub_signal is what an operation that
  // writes looks at, without a lock, to tell it (nullptr while nobody watches).
  class Reader;
  std::mutex hub_mutex;
  std::unique_ptr<detail::WatchHub> hub;
  std::atomic<detail::WatchHub*> hub_signal{nullptr};

  // What Engine::metrics() counts a decision of `operation` as: an acquire_lease (`lease`)
  // apart from a consume.
  static detail::Counted counted_as(detail::Operation operation, bool lease) {
    if (operation == detail::Operation::check) return detail::Counted::check;
    if (operation == detail::Operation::record) return detail::Counted::record;
    return lease ? detail::Counted::acquire : detail::Counted::consume;
  }

  // `function()`, with an Error it throws counted in Engine::metrics().
  template <typename Function>
  static auto counted(const detail::Measured& measured, Function&& function)
      -> decltype(function()) {
    try {
      return function();
    } catch (const Error& error) {
      measured.counters().failed(measured.operation(), error.code(), measured.elapsed());
      throw;
    }
  }

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
  Error suggesting(const Error& error);

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

  void tell_watchers();

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
      if (options.failure_policy == FailurePolicy::fail_closed ||
          !detail::is_store_failure(error.code())) {
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

  // consume, check, record and acquire_lease (validated): one request under the failure
  // policy, with the limit's hooks, counted in Engine::metrics and told to the watches.
  // `key`: an idempotency key (src/idempotency.h): the key's lookup, the request and its
  // stored answer run in one transaction of their own (a savepoint of the application's).
  // `held`: acquire_lease's consume, which answers the lease it took there (nothing on a
  // fail_open answer). A request with a key or a lease never joins a group commit.
  Result decide(detail::Operation operation, std::string_view limit, std::string_view owner,
                std::int64_t cost, std::optional<std::string_view> key = std::nullopt,
                detail::Held* held = nullptr);
  // acquire_lease, consume_with_lease and record_with_lease: validates, decides, and answers
  // the lease taken (only_concurrency: acquire's, which refuses any other algorithm).
  LeaseResult decide_with_lease(detail::Operation operation, std::string_view limit,
                                std::string_view owner, std::int64_t cost,
                                std::optional<std::string_view> key, bool only_concurrency);
  // consume_all with an idempotency key, the same way (validated).
  Decision consume_all_keyed(const std::vector<Charge>& charges, std::int64_t cost,
                             std::string_view key);

  // ---------------------------------------------------------------------------------------
  // Group commit (Options::group_commit). A request that arrives while another thread leads
  // a batch waits in `queue`; when no batch runs, the oldest waiting thread leads the next:
  // it takes up to kGroupCount requests, runs them in one transaction and commits, then
  // marks them done and wakes their threads. Each request's answer (or error) is read by its
  // own thread after that commit.

  struct Pending {
    detail::Operation operation;
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

  Result grouped(detail::Operation operation, std::string_view limit, std::string_view owner,
                 std::int64_t cost);

  // Runs `batch` (at least one request) and answers the first requests of it that it ran,
  // returning how many (at least one). One request runs alone, as without group commit.
  // Several run in one transaction, each in a savepoint of its own where its statement is
  // not atomic by itself (a limit with hooks, or PostgreSQL, where a failed statement
  // aborts the whole transaction): a request that fails undoes only itself. The batch takes
  // no more requests once it has run for kGroupTime; a failed commit fails every request.
  std::size_t run_group(std::vector<Pending*>& batch) noexcept;
  // One request of a batch on a store whose failed statement aborts the transaction: in a
  // savepoint of its own, run again once if its limit was redefined meanwhile.
  Result run_in_savepoint(const Pending& pending);

  // Opening: the schema read, refused or migrated (start_once), again while the database
  // answers busy without waiting; then what the store does once started.
  void start();
  void start_once();

  void forget_kind(std::string_view name);

  // After a change to the overrides of `limit` ('*': of every limit): whether a limit is
  // plain is read again at its next request.
  void forget_overridden(std::string_view limit);

  // The limit's statements' kind (src/statements.h), from the cache or the database; nullopt
  // when there is no limit.
  std::optional<detail::StatementKind> statement_kind(std::string_view name, bool refresh);

  // Runs `operation`'s one statement. The statement of each algorithm only matches limits
  // of that algorithm, so a limit redefined by another connection is noticed (no row, or
  // "unknown limit") and the statement of its new algorithm is run instead.
  // `held`: see run_at.
  Result run(detail::Operation operation, std::string_view limit, std::string_view owner,
             std::int64_t cost, detail::Held* held = nullptr);

  // acquire_lease's check that `limit` is a concurrency limit (read again once when the
  // cache says it is not); throws unknown_limit or not_concurrency.
  void require_concurrency(std::string_view limit);

  // Now: Options::clock, or the database's own clock (Options::server_clock).
  std::int64_t now();

  // `held`: where a consume of a concurrency limit puts the lease it took (a limit of another
  // algorithm leaves it empty, or with held->only_concurrency throws not_concurrency).
  Result run_at(detail::Operation operation, std::string_view limit, std::string_view owner,
                std::int64_t cost, std::optional<std::int64_t> now, detail::Held* held = nullptr);

  // The statement of (operation, kind) for `request`: a plain or flat limit's own statement
  // first (src/statements.h, specialised_kind), then the general one when it answered no row
  // (a consume or record for an owner without state; a check of a limit no longer plain). A
  // plain or flat consume or record of a limit that no longer has that shape throws
  // ErrorCode::unknown_limit instead.
  std::optional<detail::Row> run_specialised_first(detail::Operation operation,
                                                   detail::StatementKind kind,
                                                   std::string_view limit,
                                                   const detail::StatementRequest& request);
  // The plain or flat kind that `limit`, as last read, runs first for `operation`, or nullopt.
  std::optional<detail::StatementKind> specialised_kind(detail::Operation operation,
                                                        detail::StatementKind kind,
                                                        std::string_view limit) const;

  // `owner`'s usage of `limit` at `now` and the check of `cost` then, by the limit's check
  // statement (which changes nothing); nullopt when the statement finds no such limit.
  std::optional<std::pair<Usage, Result>> reading_at(detail::StatementKind kind,
                                                     std::string_view limit, std::string_view owner,
                                                     std::int64_t cost, std::int64_t now);

  std::optional<Usage> usage_at(detail::StatementKind kind, std::string_view limit,
                                std::string_view owner, std::int64_t now);

  // ---------------------------------------------------------------------------------------
  // Hooks (docs/).   An operation on a limit without hooks runs its one statement and
  // nothing else; with hooks, it runs inside a savepoint so that a hook that throws takes
  // the whole operation back.

  const Hooks* hooks_of(std::string_view limit) const;

  // A consume that before_consume refused: the figures of a check, nothing written.
  Result hook_denial(const Request& request);

  // on_exceeded (on a denial), then `after`.
  static void after_decision(const Hooks& limit_hooks,
                             const std::function<void(const Request&, const Result&)>& after,
                             const Request& request, const Result& result);

  // consume and record with the limit's hooks (if any); the other operations have none. A
  // limit without hooks runs its statement alone; with hooks, the before hook (which may
  // refuse a consume), the statement and the after hooks share one savepoint.
  // `at`: the batch's time (consume_many), or none: now.
  // `held`: see run_at (a consume that before_consume refused takes no lease).
  Result run_with_hooks(detail::Operation operation, std::string_view limit, std::string_view owner,
                        std::int64_t cost, std::optional<std::int64_t> at = std::nullopt,
                        detail::Held* held = nullptr);

  // consume_many, check_many, record_many (validated): in one transaction, every request
  // or none, run in the order of (limit, owner) (requests of one owner of one limit in the
  // order given), so that batches of different connections lock PostgreSQL's rows in one
  // order and never deadlock; answers in the order given. Without hooks the store runs them
  // all at once (PostgreSQL: one round trip); a limit redefined with another algorithm
  // meanwhile sends them through run_at, which notices it.
  std::vector<Result> run_many(detail::Operation operation,
                               const std::vector<BatchRequest>& requests);
  // run_many's steps (in the order `order`) by the store at once, each answer into
  // results[order[i]]; false when a limit was redefined meanwhile (no row, or "unknown
  // limit"), and the batch must run through run_at.
  bool run_all_at_once(const std::vector<detail::Step>& steps,
                       const std::vector<std::size_t>& order, std::vector<Result>& results);

  std::vector<Result> decide_many(detail::Operation operation,
                                  const std::vector<BatchRequest>& requests);

  // consume_all: every limit's before_consume first, then every consume in one savepoint;
  // on a denial, everything is rolled back and the deciding limit alone is consumed again,
  // to count the denial; when that consume allows (another connection gave units back in
  // between), it is rolled back as well and every limit is decided again. So an answer is
  // allowed only when every limit was charged in it. An allowance
  // answers the leases its concurrency limits took (Decision::leases); a denial none.
  // `final` false: a waiting attempt of acquire, whose denial is rolled back entirely and
  // answered as nullopt (no denial counted, no block started, no after hook or on_exceeded
  // called); a hook's refusal is final all the same.
  std::optional<Decision> consume_all(const std::vector<Charge>& charges, std::int64_t cost,
                                      bool final = true);

  // The check of every charge at one time, and the one that decides as consume_all would:
  // the wait acquire sleeps for. Writes nothing.
  Decision check_all(const std::vector<Charge>& charges, std::int64_t cost);

  // Engine::acquire_all (validated): each attempt is a consume_all whose denial is undone;
  // between attempts it sleeps for the checked wait (the algorithm's, or a block's that
  // holds, never one that the attempt itself would have started). The answer that ends the
  // wait is a lone consume_all's: an allowance, or the one denial that counts.
  Decision acquire_all(const std::vector<Charge>& charges, std::int64_t cost,
                       std::chrono::milliseconds max_wait, const std::stop_token& stop);
};

}  // namespace quota
