// quota::Engine: the header to read first.
//
//   quota::Engine engine = quota::Engine::open("app.db");
//   engine.define({"send_message", quota::Algorithm::sliding_log, 10, std::chrono::minutes(1)});
//   quota::Result r = engine.consume("send_message", user_id);
//   if (!r.allowed) reject(r.retry_after());
//
// Thread safety: one Engine may be shared by any number of threads (operations are
// serialized on its connection). Several Engines and processes may share one database; the
// database's locking and the single-statement design keep every answer exact.
//
// An Engine on the application's own connection, so that its operations take part in the
// application's transactions: quota/sqlite.h (a SQLite::Database of SQLiteCpp) and
// quota/postgresql.h (a libpq connection). This header needs neither.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quota/config.h"
#include "quota/error.h"
#include "quota/export.h"
#include "quota/lease.h"
#include "quota/limit.h"
#include "quota/metrics.h"
#include "quota/policy.h"
#include "quota/result.h"

namespace quota {

namespace detail {
struct Subscription;
struct EngineAccess;  // how quota/sqlite.h and quota/postgresql.h make an Engine
}  // namespace detail

// Unix time in milliseconds.
using Clock = std::function<std::int64_t()>;

// The system clock (std::chrono::system_clock) in Unix milliseconds.
QUOTA_API std::int64_t system_clock_ms();

// What consume, check and record answer when the database itself fails.
enum class FailurePolicy {
  // The error reaches the caller as a quota::Error (the default).
  fail_closed,
  // The request is allowed with Reason::store_unavailable, and Options::on_error receives the
  // error. For services where refusing every request while the store is down is worse than
  // admitting some without counting them.
  fail_open,
};

struct Options {
  // Engine::open: create the file when it does not exist. Off: a missing file is an io error.
  bool create = true;
  // Apply pending migrations when opening. Off: a database that lacks migrations is refused
  // with ErrorCode::not_migrated (quotactl uses this for every command but migrate).
  bool migrate = true;
  // How long an operation waits for a lock held by another connection before failing with
  // ErrorCode::busy. The wait retries promptly (yields, then sleeps of at most 128 us) rather
  // than with SQLite's coarse default steps.
  std::chrono::milliseconds busy_timeout{5000};
  // Where "now" comes from; tests and `quotactl --now` inject a fixed or simulated clock.
  // Default: system_clock_ms.
  Clock clock;
  // Take "now" from the database's own clock instead of `clock`: on a PostgreSQL server
  // shared by hosts whose clocks disagree, the server is then the one time authority
  // (`quotactl --server-clock`). A lone operation reads the clock inside its statement;
  // consume_all, hooks, usage and gc ask the server first (one round trip more). On SQLite
  // the database's clock is this machine's. Default: off (the caller's clock, with the clock
  // rule of docs/concepts.md keeping a host whose clock is behind from granting more).
  bool server_clock = false;
  // A SQLite file's durability: PRAGMA synchronous FULL instead of NORMAL (Engine::open on a
  // file). See quota/sqlite.h. Default: off.
  bool synchronous_full = false;
  // A SQLite connection's WAL checkpoint: the engine's instead of SQLite's automatic one
  // (Engine::open on a file and quota::sqlite::attach). See quota/sqlite.h. Default: on.
  bool restart_checkpoint = true;
  // Open for reading only: the operations that only read (get, list, check, usage,
  // owner_usage) work on a database the process may not write, and the others fail with
  // ErrorCode::io naming the file. Creates and migrates nothing (a database that is missing or
  // not migrated is refused). SQLite opens the file read-only; a WAL database without a -wal
  // file, in a folder that cannot be written (where SQLite cannot make its -shm file), is read
  // as the file holds it. PostgreSQL sets default_transaction_read_only. Default: off.
  bool read_only = false;
  // What consume, check and record answer when the database fails: an I/O error, a full
  // disk, a corrupt file, or a lock held past busy_timeout (ErrorCode io, not_a_database,
  // busy). Bad input (invalid_argument, unknown_limit) is an error under either policy, and
  // so is a privilege the database refuses the connection's role (permission_denied: a
  // configuration error, not an outage), and the one busy error that asks for a retry rather
  // than a verdict: a write refused to a snapshot that another connection has moved past
  // (docs/embedding.md). The other operations (define, get, list, remove, reset, usage, gc,
  // opening) always fail closed. A fail-open answer is allowed, reason store_unavailable,
  // remaining 0, retry_after_ms 0, denied 0, reset_at_ms the clock's now; nothing was
  // recorded. Default: fail_closed.
  FailurePolicy failure_policy = FailurePolicy::fail_closed;
  // Called with the error that a fail_open answer replaced (never under fail_closed, where the
  // caller gets it), on the calling thread with no lock held, so it may log or use the Engine.
  // An exception it throws reaches the caller instead of the answer. Default: none.
  std::function<void(const Error&)> on_error;
  // Engine::watch: how often the watcher asks the database whether another connection (another
  // Engine, another process) has committed a change: `PRAGMA data_version` on SQLite, the
  // server's current snapshot on PostgreSQL, one cheap query each. A change through this
  // Engine, and a change that time alone makes, do not wait for it. Default: 25 ms, so that
  // another process's change is shown well within 100 ms.
  std::chrono::milliseconds watch_interval{25};
  // Group commit: when threads sharing this Engine call consume, check or record while
  // another of its operations runs, the next thread to get the connection runs every waiting
  // request in one transaction (each decided on its own, in the order of (limit, owner) and
  // for one owner of one limit in arrival order, in a savepoint of its own where it needs
  // one) and commits once; each caller gets its own answer after that commit, never before.
  // A batch holds at most 32 requests, and on SQLite stops taking more after 1 ms, so that
  // other processes get the write lock promptly. A lone request runs as without it. A hook of
  // a grouped request runs on the thread that leads the batch. Only on a connection the
  // engine opened (Engine::open): an Engine on the application's connection never groups,
  // since the application owns its transactions. Default: on (figures: docs/performance.md).
  bool group_commit = true;
  // Expiry without a scheduler: an Engine opened with Engine::open (on a file or a server;
  // not on a database in memory (":memory:", "file::memory:", a "file:" URI with
  // mode=memory), not read_only, not on the application's connection) deletes expired
  // state in the background every this long, the work of Engine::gc in the same bounded
  // batches, on a connection of its own on a thread of its own, so that state keyed by
  // client addresses stays bounded without a cron job. "Now" is Options::clock's. Several
  // engines and processes may do it at once on one database. Destroying the Engine stops it
  // promptly (within one batch). Engine::metrics() counts its passes and deletions; a pass
  // that fails (busy, a server away) is counted and tried again at the next interval. Its
  // connection takes these Options' clock and connection settings, never on_error.
  // 0 turns it off. Default: 1 minute.
  std::chrono::milliseconds expire_interval{60'000};
  // How long an idempotency key's answer is kept (consume, record and consume_all with a
  // key): a retry with the key within this time of the first request is answered from it.
  // 1 second to 30 days. Default: 24 hours.
  std::chrono::milliseconds idempotency_ttl{86'400'000};
};

// The current configuration and state of an owner for a limit.
struct Usage {
  std::string limit;
  std::string owner;
  std::int64_t used = 0;       // per the algorithm (see docs/concepts.md)
  std::int64_t remaining = 0;  // capacity - used, >= 0
  std::int64_t denied = 0;     // denied consumes since created or reset
  std::int64_t reset_at_ms = 0;
  std::int64_t shadow_denied = 0;  // would-be denials in shadow mode since created or reset
  // The owner's capacity: the limit's maximum (a token bucket's burst), or its override's.
  std::int64_t capacity = 0;
  // While the owner is locked out (Limit::block): when the block ends (Unix ms). Empty when
  // it is not blocked now (never blocked, the block is over, or the limit has no block or is
  // in shadow mode).
  std::optional<std::int64_t> blocked_until_ms = std::nullopt;
};

// Whether two readings of an owner's usage show something different: what Engine::watch
// calls back on. reset_at_ms counts only while something is used (with nothing used it is
// the time of the reading).
QUOTA_API bool usage_differs(const Usage& a, const Usage& b);

// How far Engine::gc has got, reported after each batch.
struct GcProgress {
  std::int64_t deleted = 0;   // rows deleted so far
  std::int64_t examined = 0;  // rows of state examined so far
  // Rows of state there were when gc began: where `examined` ends, give or take the rows
  // that other connections add or delete meanwhile.
  std::int64_t total = 0;
};

// What Engine::watch calls with an owner's usage: first with the usage when the watch
// begins, then whenever it changes.
using WatchCallback = std::function<void(const Usage&)>;

// A watch of Engine::watch: the watch lasts as long as this handle (or until stop()).
// Movable, not copyable.
class QUOTA_API Watch {
 public:
  Watch() noexcept;
  Watch(Watch&&) noexcept;
  Watch& operator=(Watch&&) noexcept;  // ends the watch it held
  ~Watch();                            // stop()

  // Ends the watch: no call of its callback begins after stop() returns. A call running on
  // another thread is waited for; from inside the callback itself, stop() returns at once
  // and that call is the last. Safe at any time, also after the Engine is gone.
  void stop() noexcept;
  // Whether the watch is still on: false after stop(), after its callback threw, after its
  // limit was removed, and once its Engine is gone.
  bool active() const noexcept;
  // What ended the watch, if anything did but stop(): the exception its callback threw, or
  // the quota::Error (unknown_limit) when its limit was removed.
  std::exception_ptr failure() const;

 private:
  friend class Engine;
  // Inline, so that the shared library exports nothing that names the internal type.
  explicit Watch(std::shared_ptr<detail::Subscription> subscription) noexcept
      : subscription_(std::move(subscription)) {}
  std::shared_ptr<detail::Subscription> subscription_;
};

class QUOTA_API Engine {
 public:
  // Opens (and by default creates and migrates) the database at `path`: a SQLite file, in WAL
  // mode (":memory:" gives a private in-memory database), or a PostgreSQL server named by a
  // postgresql:// or postgres:// URI (docs/sharing-limits-across-hosts.md). Throws Error.
  static Engine open(const std::string& path, Options options = {});

  // The application's own connection: quota::sqlite::attach (quota/sqlite.h) and
  // quota::postgresql::attach (quota/postgresql.h).

  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  // Creates or updates a limit. Same algorithm: state is kept and the new numbers apply
  // from now on. Different algorithm: the limit's state is discarded. Throws Error
  // (invalid_argument) for a bad name or out-of-range numbers, changing nothing.
  void define(const Limit& limit);
  // Defines `limit` only when no limit of its name exists, and returns the limit as the
  // database holds it: `limit` when it was just created, otherwise the stored definition,
  // whatever it is, unchanged. The call for an application that declares its limits at
  // start-up: the database is the source of truth once a limit exists, so a restart does not
  // undo what an operator changed since (`quotactl limit set`); define overwrites. Throws
  // Error (invalid_argument) for an invalid `limit`, whether or not one is stored.
  Limit ensure(const Limit& limit);
  // Makes the database's limits and overrides those that `config` declares (quota/config.h;
  // `quotactl apply`), in one transaction: creates what is missing and changes what differs
  // (as define and set_override do: a limit whose algorithm changes loses its state), and
  // with ApplyOptions::prune removes every other limit and override. Returns the changes, in
  // the order they are made; with ApplyOptions::dry_run makes none of them. Applies at once
  // on one database (any connections, any hosts) run one after the other, each planning from
  // what the one before left: the database ends as one config declares it, never a mix; a
  // wait beyond Options::busy_timeout throws busy. Throws Error(invalid_argument) for a
  // prune to a config without limits unless ApplyOptions::allow_empty, and Error (busy, io,
  // ...) otherwise, having changed nothing.
  std::vector<Change> apply(const Config& config, const ApplyOptions& options = {});
  std::optional<Limit> get(std::string_view name);
  std::vector<Limit> list();  // by name
  // Removes the limit and its state; false when there was no such limit.
  bool remove(std::string_view name);

  // Would a consume of `cost` be allowed now? Never writes.
  Result check(std::string_view limit, std::string_view owner, std::int64_t cost = 1);
  // Atomic check-and-record: records `cost` only when allowed; a denial increments the
  // owner's denied counter.
  Result consume(std::string_view limit, std::string_view owner, std::int64_t cost = 1);
  // Records `cost` even beyond the limit; allowed says whether usage is within the limit.
  Result record(std::string_view limit, std::string_view owner, std::int64_t cost = 1);
  // consume and record with an idempotency key (1 to 255 bytes; docs/concepts.md,
  // "Retries"): the first request with the key is decided as above and its answer stored
  // with the key in the same transaction; a request with the same limit, owner and key
  // within Options::idempotency_ttl is answered with that answer, `replayed` set, and
  // charges nothing (no state written, no hook called). The same key used for another
  // operation or cost throws Error (idempotency_conflict), changing nothing. A keyed request
  // never joins a group commit. Exact across threads, processes and hosts.
  Result consume(std::string_view limit, std::string_view owner, std::int64_t cost,
                 std::string_view idempotency_key);
  Result record(std::string_view limit, std::string_view owner, std::int64_t cost,
                std::string_view idempotency_key);
  // Forgets the owner's state for the limit (usage, denied, remembered time), its leases and
  // its idempotency keys there (a retried request is then charged anew).
  Result reset(std::string_view limit, std::string_view owner);
  // Forgets the owner on every limit at once, in one transaction (the right to be forgotten;
  // "unlock this user everywhere"): as reset does on each, so that no row of state or keys
  // names the owner (its overrides and anchors, an operator's configuration, stay). Returns
  // the names of the limits where something was forgotten, by name; empty for an owner with
  // nothing anywhere. Throws Error (invalid_argument) for a bad owner.
  std::vector<std::string> reset_everywhere(std::string_view owner);
  // Gives back up to `cost` units of usage (an action failed after its consume): never below
  // zero; a sliding_log returns its newest events first, a sliding_window takes from the
  // current window only, a token bucket gets the tokens back up to its capacity. Answers
  // like a check of cost 1 afterwards. Writes the owner's remembered time like a consume.
  Result refund(std::string_view limit, std::string_view owner, std::int64_t cost = 1);

  // Concurrency limits (Algorithm::concurrency; quota/lease.h). acquire_lease takes `cost`
  // units as one lease when the units held by the owner's unexpired leases plus `cost` fit the
  // owner's capacity, in one statement; denied, retry_after_ms is the wait until enough held
  // units expire (-1 for a cost above the capacity) and no lease is taken. consume, check,
  // record and reset work on a concurrency limit too (consume takes a lease whose id it does
  // not return: consume_with_lease below answers it; record takes one even over the
  // capacity: record_with_lease answers it; reset releases every lease of the owner). Throws
  // Error: invalid_argument (bad name, owner or cost; a limit that is not a concurrency limit),
  // unknown_limit.
  // It is decided as consume is: under Options::failure_policy (a fail_open allowance,
  // Reason::store_unavailable, holds no lease: its id is empty), with the limit's hooks
  // (before_consume may refuse it), counted in metrics() and seen by watch.
  LeaseResult acquire_lease(std::string_view limit, std::string_view owner,
                            std::int64_t cost = 1);
  // acquire_lease with an idempotency key (as consume's): a retry within
  // Options::idempotency_ttl answers the first acquire's lease (same id and expires_at_ms),
  // `replayed` set, and takes nothing; the key used for another request throws Error
  // (idempotency_conflict). Throws Error (invalid_argument) for a bad key.
  LeaseResult acquire_lease(std::string_view limit, std::string_view owner, std::int64_t cost,
                            std::string_view idempotency_key);
  // consume (with an idempotency key: consume's, in the same key space), answering also the
  // lease it took when `limit` is a concurrency limit (lease and expires_at_ms; "" and 0 on
  // any other algorithm, or when none was taken): for a caller that does not know the
  // limit's algorithm and must be able to release what it took, as quotactl's consume.
  LeaseResult consume_with_lease(std::string_view limit, std::string_view owner,
                                 std::int64_t cost = 1);
  LeaseResult consume_with_lease(std::string_view limit, std::string_view owner, std::int64_t cost,
                                 std::string_view idempotency_key);
  // record (with an idempotency key: record's), answering also the lease it took on a
  // concurrency limit, which record takes even over the capacity (allowed false then, the
  // lease held all the same): "" and 0 on any other algorithm or for an exempt owner.
  LeaseResult record_with_lease(std::string_view limit, std::string_view owner,
                                std::int64_t cost = 1);
  LeaseResult record_with_lease(std::string_view limit, std::string_view owner, std::int64_t cost,
                                std::string_view idempotency_key);
  // Moves an unexpired lease's expiry to now + `ttl` (default: its limit's TTL; 1 s to 1
  // day). An unknown, released or expired lease answers allowed false, reason lease_expired,
  // retry_after_ms -1. Throws Error (invalid_argument) for a lease id not of the form
  // acquire_lease issues (validate_lease_id, quota/lease.h) or a bad ttl.
  LeaseResult renew_lease(std::string_view lease,
                          std::optional<std::chrono::milliseconds> ttl = std::nullopt);
  // Frees the lease at once; true when it was held (unexpired), false when there was nothing
  // to free (unknown, released before, or expired): releasing twice is harmless. Throws Error
  // (invalid_argument) for a lease id not of the form acquire_lease issues.
  bool release_lease(std::string_view lease);
  // The unexpired leases of a concurrency limit (of `owner` only, when given), by owner and
  // expiry. Throws Error: unknown_limit, invalid_argument (not a concurrency limit).
  std::vector<LeaseInfo> leases(std::string_view limit,
                                std::optional<std::string_view> owner = std::nullopt);

  // Waits for its turn: consumes, and while denied with a finite wait that ends within
  // `max_wait` of the call, sleeps exactly that long and consumes again. Returns the first
  // allowed answer, or a denial at once when the wait would end past the deadline, when it
  // can never be allowed (retry_after_ms -1), or when `stop` is requested (before or during a
  // sleep; the sleep ends at once). Only that final denial counts: a waiting attempt that is
  // denied is undone (it adds nothing to `denied`, starts no block, and calls no after hook
  // nor on_exceeded; before_consume is asked at every attempt), and the wait slept is the
  // algorithm's own (or that of a block already holding), never a block the attempt would
  // have started; the final denial counts once, may start a block and calls on_exceeded
  // once. So a patient client does not look like an abuser in usage(..., UsageOrder::denied).
  // One sleep per attempt, no polling; the Engine is not locked while a thread sleeps, so any
  // number of threads may wait on one Engine while others use it. Cancel from another thread
  // with the std::stop_source whose token was passed (a std::jthread's own token works too).
  // The deadline is measured on std::chrono::steady_clock, the waits come from
  // Options::clock: use a real clock (a fixed clock never moves, so the attempts keep being
  // denied until the deadline). Throws as consume does (and answers under the failure policy
  // as consume does), and Error (invalid_argument) for a negative max_wait.
  Result acquire(std::string_view limit, std::string_view owner, std::int64_t cost,
                 std::chrono::milliseconds max_wait, std::stop_token stop = {});
  // acquire over several limits at once, all or nothing, as consume_all decides: each
  // attempt is a consume_all, and while it is denied acquire_all sleeps for the longest wait
  // of the limits (the slowest), within `max_wait`, and tries again. Only the final denial
  // counts, on the deciding limit, as for acquire. Throws Error (invalid_argument) as
  // consume_all does and for a negative max_wait.
  Decision acquire_all(const std::vector<std::string_view>& limits, std::string_view owner,
                       std::int64_t cost, std::chrono::milliseconds max_wait,
                       std::stop_token stop = {});
  // The same with an owner per limit (see consume_all).
  Decision acquire_all(const std::vector<Charge>& charges, std::int64_t cost,
                       std::chrono::milliseconds max_wait, std::stop_token stop = {});

  // Consumes `cost` from every limit at once, in one savepoint (inside the caller's
  // transaction, on the application's connection): allowed only if every limit allows.
  // If one denies, no limit's state changes except that the deciding limit counts the
  // denial. The deciding limit is the denying one with the longest wait (-1 counting as
  // longest; the first given on a tie), or when all allow the one with the fewest units
  // remaining. A before_consume hook that returns false decides before any limit is
  // consumed. A concurrency limit among them takes a lease (SPEC §13: "at most 10 a minute
  // and at most 2 at once" in one call): Decision::leases lists those an allowance took, to
  // release with release_lease; a denial holds none. acquire_all answers them the same way.
  // A Charge with a cost of its own takes that many units of its limit instead of `cost`.
  // Throws Error (invalid_argument) for an empty list, a limit named twice or a bad cost.
  Decision consume_all(const std::vector<std::string_view>& limits, std::string_view owner,
                       std::int64_t cost = 1);
  // The same with an owner per limit: a gateway charges a request to its client address on
  // one limit and to its API key on another, and decides both at once. Each limit is named
  // once. Throws Error (invalid_argument) for an empty list, a limit named twice or a bad owner.
  Decision consume_all(const std::vector<Charge>& charges, std::int64_t cost = 1);
  // consume_all with an idempotency key (see consume): the key is stored for every limit and
  // owner of the call; a retry with the same set of limits and owners and the same costs is
  // answered with the first Decision (its leases too), `replayed` set; the key used for
  // anything else throws Error (idempotency_conflict), changing nothing.
  Decision consume_all(const std::vector<std::string_view>& limits, std::string_view owner,
                       std::int64_t cost, std::string_view idempotency_key);
  Decision consume_all(const std::vector<Charge>& charges, std::int64_t cost,
                       std::string_view idempotency_key);

  // Would consume_all allow now? Every limit's check at one clock reading, the deciding one
  // chosen as consume_all chooses it (its name and Result); changes nothing, takes no lease.
  // Throws Error (invalid_argument) as consume_all does.
  Decision check_all(const std::vector<std::string_view>& limits, std::string_view owner,
                     std::int64_t cost = 1);
  Decision check_all(const std::vector<Charge>& charges, std::int64_t cost = 1);

  // Batch calls: each request decided on its own (as consume, check or record would decide
  // it, in order, at one clock reading), all in one transaction (a savepoint of the
  // application's open transaction, on its connection), answers in the order of `requests`.
  // A denial is an answer, not an error. Every request is validated first: a bad one throws
  // Error (invalid_argument, naming its index) and nothing runs. An error while they run (an
  // unknown limit, a hook that throws, a failure of the database) rolls every request of
  // the call back and reaches the caller; under FailurePolicy::fail_open a failure of the
  // database answers every request as a lone call would. An empty list answers an empty
  // list. On PostgreSQL, requests whose limits have no hooks go in one round trip (pipeline).
  std::vector<Result> consume_many(const std::vector<BatchRequest>& requests);
  std::vector<Result> check_many(const std::vector<BatchRequest>& requests);
  std::vector<Result> record_many(const std::vector<BatchRequest>& requests);

  // Owners of `limit` with usage, denials or shadow denials, most used first (or as `order`
  // says; UsageOrder::blocked lists only the owners locked out now), at most `top` (0 = all).
  std::vector<Usage> usage(std::string_view limit, std::size_t top = 0,
                           UsageOrder order = UsageOrder::used);
  // One owner's usage of `limit` now, as a check sees it (all zero but `remaining`,
  // `capacity` and `reset_at_ms` for an owner without state). Changes nothing.
  Usage owner_usage(std::string_view limit, std::string_view owner);
  // One owner on every limit where it has state (even all zero: an owner written by a
  // refund, or whose usage has expired), an override (its own or a '*' one, which covers
  // every limit) or a calendar anchor (its own, or a '*' one on a calendar limit), by limit
  // name; the limits where it has neither are left out, since they
  // would show only the limit's capacity. The first thing to look at when a customer says "I
  // am being rate limited". Changes nothing.
  std::vector<Usage> owner_usage(std::string_view owner);

  // Creates or replaces the override of (override.limit, override.owner). The limit must
  // exist unless it is kEveryLimit. Throws Error: invalid_argument for a bad name, owner or
  // number (a maximum or burst beyond what the limit's algorithm and period permit, a burst
  // for a limit that is not a token bucket), unknown_limit.
  void set_override(const Override& override);
  // Removes an override; false when there was none.
  bool remove_override(std::string_view limit, std::string_view owner);
  // Every override, by limit then owner; with `limit`, only that limit's (or "*"'s).
  std::vector<Override> overrides(std::optional<std::string_view> limit = std::nullopt);

  // An owner's own anchor on a calendar limit (Limit::anchor_ms; "the day this customer's
  // subscription began"), or on kEveryLimit: every calendar limit without an anchor of the
  // owner's for itself. It beats the limit's anchor; the owner's window containing the
  // present is the new one from its next request on (a window already counting keeps its
  // end, see docs/concepts.md). The limit must exist and have a calendar period unless it
  // is kEveryLimit. Throws Error: invalid_argument (a bad name or owner, an anchor outside 0
  // to kAnchorBound, a limit without a calendar period), unknown_limit.
  void set_anchor(const Anchor& anchor);
  // Removes an owner's anchor; false when there was none.
  bool remove_anchor(std::string_view limit, std::string_view owner);
  // Every owner's anchor, by limit then owner; with `limit`, only that limit's (or "*"'s).
  std::vector<Anchor> anchors(std::optional<std::string_view> limit = std::nullopt);

  // Installs the hooks of `limit` in this Engine (replacing any; empty Hooks remove them).
  // The limit need not exist yet. A limit without hooks costs nothing extra per operation.
  void set_hooks(std::string_view limit, Hooks hooks);

  // Deletes the state that no longer affects any answer and returns the number of rows it
  // deleted: expired sliding_log events, and owners whose usage can no longer count, with no
  // denials and no remembered time after now (fixed_window windows that are over, sliding_log
  // owners without events). "now" is Options::clock when gc starts.
  //
  // Contract: with the limits as they are, every operation evaluated at a time >= now gives
  // exactly the answer it would have given without gc: check, consume, record, reset, usage,
  // Result::denied and the clock rule alike. gc takes now as the present, so an operation that
  // later arrives with an earlier time (a clock that went back past the gc) is answered
  // without the deleted state: it sees at least the usage there was at now, so it never
  // grants more than the algorithm allows at now. A limit later redefined with another
  // period reads the state that remains (see define); what gc deleted is absent then, as the
  // owner's next request would also have discarded it.
  //
  // Works in batches: each examines at most `batch_rows` rows (>= 1) in one short write
  // transaction, so that other connections wait for at most one batch, and other threads'
  // operations on this Engine run between batches. On the application's connection inside
  // its open transaction, each batch is a savepoint and commits with that transaction.
  // `progress` (optional) is called after each batch, with no lock held: it may use this
  // Engine; an exception it throws stops gc and reaches the caller.
  // Throws Error: invalid_argument for batch_rows 0, busy, io. The batches committed before
  // an error stay committed; each is complete on its own.
  std::int64_t gc(std::size_t batch_rows = 1000,
                  const std::function<void(const GcProgress&)>& progress = {});

  // Counters since the Engine opened (quota/metrics.h): decisions per limit, operation and
  // reason, fail-open answers, errors per code, durations per operation, group commits, gc
  // and expiry. Kept in memory, never read from the database. Safe from any thread.
  Metrics metrics() const;
  // The leases held now on every concurrency limit (0 when none), by every process on the
  // database: one query, for a gauge read at scrape time (quota/prometheus.h). Throws Error
  // as leases does.
  std::map<std::string, LeasesHeld, std::less<>> leases_held() const;

  // The schema version of the open database.
  int schema_version();

  // The time the Engine's operations are evaluated at now (Unix ms): Options::clock, or with
  // Options::server_clock the database's clock (one round trip). For showing countdowns from
  // the same time the answers count from.
  std::int64_t now();

  // Calls `callback` with `owner`'s usage of `limit` now, and again whenever it changes,
  // until the returned handle is destroyed: through this Engine, another Engine, another
  // process on the same database, and when time alone changes it (a window ends, the oldest
  // event expires, a weighted window or a token bucket gives back a whole unit), at the exact
  // millisecond the owner's state says, by Options::clock. A change through this Engine is
  // seen at once, one by another connection within Options::watch_interval.
  //
  // A usage "changes" when one of its figures does: used, remaining, denied, shadow_denied,
  // capacity, or reset_at_ms while something is used (with nothing used, reset_at_ms is "now",
  // which is no change). Between two calls several changes may fold into one.
  //
  // Every watch of an Engine shares one thread, which calls the callbacks one at a time and
  // reads the database on a connection of its own (an in-memory database: the Engine's). A
  // callback runs with no lock of the engine held: it may call this Engine, and stop its own
  // watch or another. A callback that throws ends its own watch (Watch::failure() holds the
  // exception); the other watches go on. Destroying the Engine ends every watch; a callback
  // must not destroy its Engine. Errors reading the database (busy, io) are retried at the
  // next interval; a removed limit ends the watch (failure(): unknown_limit).
  // Throws Error: invalid_argument (a bad name or owner, an empty callback), unknown_limit.
  Watch watch(std::string_view limit, std::string_view owner, WatchCallback callback);
  // The same for every owner of `limit`: a call per owner whose usage changes (first, one per
  // owner with usage or denials); an owner whose state is gone (reset, or all of its usage
  // expired) gets one last call with its empty usage.
  Watch watch(std::string_view limit, WatchCallback callback);

 private:
  struct Impl;
  friend struct detail::EngineAccess;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace quota
