/* The C API: quota for C and for every language that can call C (Python's ctypes, Go's cgo,
 * Rust, C#, Node's FFI...).
 *
 *   quota_engine* engine = NULL;
 *   if (quota_open("app.db", 6, NULL, &engine) != QUOTA_OK) {
 *     fprintf(stderr, "%s\n", quota_last_error());
 *     return 1;
 *   }
 *   quota_define(engine, "send", 4, QUOTA_SLIDING_LOG, 10, 60000, QUOTA_NO_BURST);
 *   quota_result r;
 *   if (quota_consume(engine, "send", 4, "user123", 7, 1, &r) == QUOTA_OK && !r.allowed)
 *     reject(r.retry_after_ms);
 *   quota_close(engine);
 *
 * The same engine as the C++ API (quota/engine.h); see there, and docs/concepts.md, for what
 * each operation means. The conventions:
 *
 * - Every function that can fail returns an int status: QUOTA_OK (0) or a QUOTA_ERROR_*
 *   code. The codes mirror quota::ErrorCode, plus out-of-memory and internal (a bug). On
 *   failure, quota_last_error() says what happened and what to do.
 * - A denial is not an error: consume returns QUOTA_OK with result.allowed == 0.
 * - Strings are UTF-8 with an explicit length in bytes; they need not be NUL-terminated and
 *   are copied before the call returns. (NULL, 0) is the empty string.
 * - No C++ exception ever leaves these functions (not even std::bad_alloc).
 * - Time is Unix milliseconds as int64_t everywhere.
 *
 * Thread safety: one quota_engine may be used by several threads at once (operations are
 * serialized on its connection), but quota_close must not run concurrently with any other
 * call on the same engine. Several engines and processes may share one database file.
 *
 * The status, reason, algorithm and calendar numbers are part of the ABI and never change once
 * released; new ones are only ever added. */
#ifndef QUOTA_QUOTA_H_
#define QUOTA_QUOTA_H_

#include <stddef.h>
#include <stdint.h>

#include "quota/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. 1..8 are quota::ErrorCode's first values in order, plus one; 11 is its
 * permission_denied. */
enum {
  QUOTA_OK = 0,
  QUOTA_ERROR_INVALID_ARGUMENT = 1,  /* a bad name, owner, cost, number or option; nothing
                                        was changed */
  QUOTA_ERROR_UNKNOWN_LIMIT = 2,     /* no limit has that name */
  QUOTA_ERROR_BUSY = 3,              /* the database stayed locked past the busy timeout */
  QUOTA_ERROR_SCHEMA_TOO_NEW = 4,    /* the file was migrated by a newer build */
  QUOTA_ERROR_NOT_MIGRATED = 5,      /* the file lacks migrations and options.migrate is 0 */
  QUOTA_ERROR_CHECKSUM_MISMATCH = 6, /* an applied migration's text was edited */
  QUOTA_ERROR_NOT_A_DATABASE = 7,    /* the file is not a SQLite database */
  QUOTA_ERROR_IO = 8,                /* the file cannot be opened, read or written */
  QUOTA_ERROR_OUT_OF_MEMORY = 9,     /* an allocation failed; nothing was changed */
  QUOTA_ERROR_INTERNAL = 10,         /* an unexpected failure inside the library (a bug) */
  QUOTA_ERROR_PERMISSION_DENIED = 11, /* the database role lacks a privilege it needs; never
                                       * answered by fail_open */
  QUOTA_ERROR_IDEMPOTENCY_CONFLICT = 12 /* an idempotency key already used for another
                                         * request; nothing was changed */
};

/* Why an operation answered as it did (quota::Reason). */
enum {
  QUOTA_REASON_OK = 0,
  QUOTA_REASON_RATE_LIMITED = 1,          /* denied now; allowed after retry_after_ms */
  QUOTA_REASON_COST_EXCEEDS_CAPACITY = 2, /* the cost can never fit; retry_after_ms is -1 */
  QUOTA_REASON_OWNER_DENIED = 3,          /* an override denies this owner */
  QUOTA_REASON_HOOK_DENIED = 4,           /* a before_consume hook said no */
  QUOTA_REASON_STORE_UNAVAILABLE = 5,     /* allowed undecided: the database failed and
                                           * options.fail_open is 1 */
  QUOTA_REASON_BLOCKED = 6, /* locked out after a denial (a limit's block) until retry_after_ms */
  QUOTA_REASON_LEASE_EXPIRED = 7 /* quota_renew_lease: the lease is unknown, released or
                                  * expired; retry_after_ms is -1 */
};

/* How usage is counted (quota::Algorithm). */
enum {
  QUOTA_SLIDING_LOG = 0,
  QUOTA_FIXED_WINDOW = 1,
  QUOTA_SLIDING_WINDOW = 2,
  QUOTA_TOKEN_BUCKET = 3,
  /* At most `maximum` units held at once by unexpired leases (quota_acquire_lease), each of
   * which expires period_ms (its TTL: 1000 ... 86400000, 1 s ... 1 day) after it was taken or
   * renewed; burst must be QUOTA_NO_BURST (docs/concepts.md, "How many at once"). Take
   * leases with quota_acquire_lease: quota_consume on such a limit takes one too, but does not
   * say its id, so that it can only expire (quota_consume_with_lease says it). */
  QUOTA_CONCURRENCY = 4
};

/* quota_define's burst for "none": a token bucket's capacity is then its maximum, and the
 * other algorithms take no burst at all. */
#define QUOTA_NO_BURST 0

/* The calendar unit of quota_define_calendar (quota::Calendar): a day starts at midnight, a
 * week on Monday at midnight (ISO 8601), a month on the 1st, a year on 1 January, at the
 * limit's UTC offset, unless an anchor moves the start within the unit. */
enum { QUOTA_DAY = 0, QUOTA_WEEK = 1, QUOTA_MONTH = 2, QUOTA_YEAR = 3 };

/* quota_define_calendar's anchor for "none": the windows start where the unit does. */
#define QUOTA_NO_ANCHOR (-1)

/* quota_limit's calendar for "none": a limit of period_ms from the epoch. */
#define QUOTA_NO_CALENDAR (-1)

/* An open database. Opaque: only pointers to it exist. */
typedef struct quota_engine quota_engine;

/* Returns the time in Unix milliseconds (>= 0). Called with the engine's lock held, once per
 * operation: it must not call back into quota, and must not unwind (longjmp, exceptions). */
typedef int64_t (*quota_clock_fn)(void* context);

/* Receives the error that a fail-open answer replaced: its QUOTA_ERROR_* status and message
 * (valid during the call). Called on the calling thread with no lock held; it must not
 * unwind (longjmp, exceptions). */
typedef void (*quota_error_fn)(void* context, int status, const char* message);

/* How quota_open opens a database. Fill with quota_options_init, then change fields. */
typedef struct quota_options {
  /* sizeof(quota_options) as the caller knows it (quota_options_init sets it): lets later
   * versions add fields at the end without breaking callers built against this one. */
  size_t size;
  /* 1: create the file if missing (default). 0: a missing file is QUOTA_ERROR_IO. */
  int create;
  /* 1: apply pending migrations (default). 0: refuse a database that lacks them with
   * QUOTA_ERROR_NOT_MIGRATED. */
  int migrate;
  /* 1: PRAGMA synchronous=FULL, durable across power loss at the cost of an fsync per write.
   * 0 (default): NORMAL, durable across a crash of the process. */
  int synchronous_full;
  /* How long an operation waits for another connection's lock before QUOTA_ERROR_BUSY, in
   * ms (>= 0). Default 5000. */
  int64_t busy_timeout_ms;
  /* Where "now" comes from; tests fix or simulate time with it. NULL (default): the system
   * clock. `clock_context` is passed to every call. */
  quota_clock_fn clock;
  void* clock_context;
  /* What quota_consume, quota_check and quota_record answer when the database itself fails
   * (I/O, full disk, corrupt file, busy past the timeout). 0 (default): the QUOTA_ERROR_*
   * status. 1: QUOTA_OK, allowed, reason QUOTA_REASON_STORE_UNAVAILABLE, nothing recorded,
   * and `on_error` (if not NULL) receives the status and message it replaced. Bad input is
   * an error either way. */
  int fail_open;
  quota_error_fn on_error;
  void* on_error_context;
  /* 1 (default): replace SQLite's automatic WAL checkpoint on the engine's connection with
   * the engine's from half that threshold (a PASSIVE copy, then a RESTART), which keeps the WAL
   * bounded while other processes keep writing, at the cost of making them wait for the
   * RESTART step (quota::Options::restart_checkpoint; docs/embedding.md). 0: SQLite's own. */
  int restart_checkpoint;
  /* 1 (default): group commit, for threads sharing one engine: requests that arrive while
   * another runs wait and commit together, each answered after that commit
   * (quota::Options::group_commit; docs/embedding.md). 0: one transaction per request. */
  int group_commit;
  /* How long an idempotency key's answer is kept, in milliseconds: 1000 (1 s) to 2592000000
   * (30 days); default 86400000, 24 hours (quota::Options::idempotency_ttl;
   * quota_consume_keyed). */
  int64_t idempotency_ttl_ms;
} quota_options;

/* What an operation decided (quota::Result). */
typedef struct quota_result {
  /* 1: granted (consume, check), within the limit after recording (record), always
   * (reset). 0: denied. */
  int allowed;
  /* QUOTA_REASON_*. */
  int reason;
  /* Units still available after the operation (check: available now), >= 0. */
  int64_t remaining;
  /* 0 when allowed; else the exact smallest wait after which the same consume would be
   * allowed if nothing else happened; -1 when it never can be. */
  int64_t retry_after_ms;
  /* When usage is back to zero if nothing else happens (Unix ms). */
  int64_t reset_at_ms;
  /* Denied consumes of this owner since its state was created or last reset. */
  int64_t denied;
} quota_result;

/* The library's version, e.g. "0.1.0" (QUOTA_VERSION_STRING of the build). */
QUOTA_API const char* quota_version(void);

/* Sets every field of *options to its default. A macro, so that the library learns the size
 * of quota_options that the caller was compiled with and writes no byte past it: a program
 * built against an older, shorter quota_options keeps working with a newer library. */
#define quota_options_init(options) quota_options_init_sized((options), sizeof(quota_options))

/* What quota_options_init calls: writes the defaults into the first `size` bytes of
 * *options (at most sizeof(quota_options) of this library), and `size` into options->size.
 * A `size` smaller than options->size's own field writes nothing. Bindings that cannot use
 * the macro call this with the size of their own copy of the struct. */
QUOTA_API void quota_options_init_sized(quota_options* options, size_t size);

/* Opens (and by default creates and migrates) the database file at `path` in WAL mode, and
 * stores a new engine in *engine (NULL on failure). ":memory:" is a private in-memory
 * database. `options` may be NULL for the defaults. */
QUOTA_API int quota_open(const char* path, size_t path_length, const quota_options* options,
                         quota_engine** engine);

/* Closes the database and frees the engine. NULL is allowed and does nothing. */
QUOTA_API void quota_close(quota_engine* engine);

/* Creates or updates a limit: at most `maximum` units per `period_ms`, counted per owner.
 * `burst` is a token bucket's capacity, or QUOTA_NO_BURST. Same algorithm as before: the
 * state is kept; another algorithm: the limit's state is discarded. */
QUOTA_API int quota_define(quota_engine* engine, const char* name, size_t name_length,
                           int algorithm, int64_t maximum, int64_t period_ms, int64_t burst);

/* A limit as the database holds it (quota::Limit), as quota_ensure returns it. */
typedef struct quota_limit {
  int algorithm;          /* QUOTA_SLIDING_LOG, ... */
  int64_t maximum;        /* units per period */
  int64_t period_ms;      /* a calendar limit: its unit's longest window */
  int64_t burst;          /* a token bucket's capacity; QUOTA_NO_BURST for the others */
  int shadow;             /* 1: shadow mode */
  int64_t block_ms;       /* the lockout (quota_set_block); 0: none */
  int calendar;           /* QUOTA_DAY, ... or QUOTA_NO_CALENDAR */
  int utc_offset_minutes; /* a calendar limit's UTC offset; 0 otherwise */
  int64_t anchor_ms;      /* a calendar limit's anchor, or QUOTA_NO_ANCHOR */
} quota_limit;

/* Defines a limit as quota_define would, but only when no limit of that name exists
 * (quota::Engine::ensure), and stores in *stored (may be NULL) the limit as the database
 * holds it: the one just created, or the stored definition, whatever it is, unchanged. For an
 * application that declares its limits at start-up: once a limit exists the database is the
 * source of truth, so a restart does not undo an operator's `quotactl limit set`
 * (quota_define overwrites). QUOTA_ERROR_INVALID_ARGUMENT (changing nothing) for numbers out of
 * range, whether or not the limit exists. */
QUOTA_API int quota_ensure(quota_engine* engine, const char* name, size_t name_length,
                           int algorithm, int64_t maximum, int64_t period_ms, int64_t burst,
                           quota_limit* stored);

/* Sets the lockout of the existing limit `name` (quota::Limit::block): a consume denied as
 * rate_limited then blocks its owner for `block_ms` (1 ms ... 366 days), answering
 * QUOTA_REASON_BLOCKED until the block ends; 0 removes the lockout. The limit keeps its
 * other settings and its state. QUOTA_ERROR_UNKNOWN_LIMIT when there is no such limit,
 * QUOTA_ERROR_INVALID_ARGUMENT (changing nothing) for a block out of range. */
QUOTA_API int quota_set_block(quota_engine* engine, const char* name, size_t name_length,
                              int64_t block_ms);

/* Creates or updates a calendar limit (quota::calendar_limit): a fixed_window of at most
 * `maximum` units per calendar `calendar` (QUOTA_DAY, QUOTA_WEEK, QUOTA_MONTH or QUOTA_YEAR)
 * at a fixed offset of `utc_offset_minutes` from UTC (-840 ... 840, i.e. -14:00 ... +14:00;
 * no daylight-saving rules). `anchor_ms` (Unix ms, 0 ... 253402300800000, the start of the
 * year 10000) moves every window's start to its place in the unit at that offset: its time
 * of day (day), weekday and time (week), day of the month and time (month; a day that a
 * month lacks is its last day), date and time (year; 29 February is 28 February in other
 * years); QUOTA_NO_ANCHOR: none. retry_after_ms of a denial and reset_at_ms point at the next
 * window's start. Like quota_define, it sets every setting of the limit (a lockout of
 * quota_set_block is removed: set it again after) and keeps the state of a limit that was a
 * fixed_window already (a window already counting keeps its end). QUOTA_ERROR_INVALID_ARGUMENT
 * (changing nothing) for a calendar, offset or anchor out of range. */
QUOTA_API int quota_define_calendar(quota_engine* engine, const char* name, size_t name_length,
                                    int64_t maximum, int calendar, int utc_offset_minutes,
                                    int64_t anchor_ms);

/* An owner's own anchor of a calendar limit (quota::Engine::set_anchor, e.g. the day this
 * customer's subscription began): it beats the limit's anchor, from the owner's next window
 * on (a window already counting keeps its end). `limit` "*" sets it for every calendar limit
 * that has no anchor of the owner's for itself. QUOTA_ERROR_UNKNOWN_LIMIT when there is no
 * such limit; QUOTA_ERROR_INVALID_ARGUMENT (changing nothing) for an anchor out of range (0
 * ... 253402300800000), a bad owner, or a limit without a calendar period. */
QUOTA_API int quota_set_anchor(quota_engine* engine, const char* limit, size_t limit_length,
                               const char* owner, size_t owner_length, int64_t anchor_ms);

/* Removes an owner's anchor of `limit` (or of "*"). *removed (may be NULL) is 1 if there was
 * one, 0 if not. */
QUOTA_API int quota_remove_anchor(quota_engine* engine, const char* limit, size_t limit_length,
                                  const char* owner, size_t owner_length, int* removed);

/* Removes the limit and its state. *removed (may be NULL) is 1 if there was such a limit. */
QUOTA_API int quota_remove(quota_engine* engine, const char* name, size_t name_length,
                           int* removed);

/* The operations. `result` receives the answer and may be NULL when it is not wanted. A
 * failed call leaves *result unchanged.
 *
 * check:   would a consume of `cost` be allowed now? Never writes.
 * consume: atomic check-and-record; a denial records nothing but counts in `denied`.
 * record:  records `cost` even beyond the limit; allowed says whether usage is within it.
 * reset:   forgets the owner's state for the limit. */
QUOTA_API int quota_check(quota_engine* engine, const char* limit, size_t limit_length,
                          const char* owner, size_t owner_length, int64_t cost,
                          quota_result* result);
QUOTA_API int quota_consume(quota_engine* engine, const char* limit, size_t limit_length,
                            const char* owner, size_t owner_length, int64_t cost,
                            quota_result* result);
QUOTA_API int quota_record(quota_engine* engine, const char* limit, size_t limit_length,
                           const char* owner, size_t owner_length, int64_t cost,
                           quota_result* result);
QUOTA_API int quota_reset(quota_engine* engine, const char* limit, size_t limit_length,
                          const char* owner, size_t owner_length, quota_result* result);

/* consume and record with an idempotency key of `key_length` (1 to 255) bytes
 * (docs/concepts.md, "Retries"): the first request with the key is decided and its answer
 * stored with the key; a retry with the same limit, owner and key within
 * options.idempotency_ttl_ms answers the stored answer, sets *replayed to 1 (when replayed is
 * not NULL) and charges nothing. The key used for another operation or cost is
 * QUOTA_ERROR_IDEMPOTENCY_CONFLICT, changing nothing. */
QUOTA_API int quota_consume_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                                  const char* owner, size_t owner_length, int64_t cost,
                                  const char* key, size_t key_length, quota_result* result,
                                  int* replayed);
QUOTA_API int quota_record_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                                 const char* owner, size_t owner_length, int64_t cost,
                                 const char* key, size_t key_length, quota_result* result,
                                 int* replayed);

/* reset_everywhere: forgets the owner on every limit at once, in one transaction (the right to
 * be forgotten): its state, leases and idempotency keys; its overrides and anchors stay.
 * `limits` receives the number of limits where something was forgotten (0: nothing anywhere)
 * and may be NULL. quota_reset forgets the owner's leases and keys on its limit too. */
QUOTA_API int quota_reset_everywhere(quota_engine* engine, const char* owner, size_t owner_length,
                                     size_t* limits);

/* refund: gives back up to `cost` units of usage (never below zero) and answers like a check
 * of cost 1. A consume of a shadow-mode limit that enforcing would have denied answers
 * allowed == 1 with reason != QUOTA_REASON_OK. */
QUOTA_API int quota_refund(quota_engine* engine, const char* limit, size_t limit_length,
                           const char* owner, size_t owner_length, int64_t cost,
                           quota_result* result);

/* consume_all: consumes `cost` from the `count` limits limits[i] (limit_lengths[i] bytes
 * each) at once, allowed only if every one allows; if one denies, nothing is recorded
 * anywhere and only the deciding limit counts the denial. *result is the deciding limit's
 * answer and *deciding (may be NULL) its index in `limits`: the denying limit with the
 * longest wait (-1 longest), or when all allow the one with the fewest units left. A lease it
 * takes on a concurrency limit is not said: quota_consume_all_leasing says it. */
QUOTA_API int quota_consume_all(quota_engine* engine, const char* const* limits,
                                const size_t* limit_lengths, size_t count, const char* owner,
                                size_t owner_length, int64_t cost, quota_result* result,
                                size_t* deciding);

/* An owner's usage of a limit, as a watch reports it (quota::Usage). The strings are valid
 * during the call only and are not NUL-terminated. */
typedef struct quota_usage {
  const char* limit;
  size_t limit_length;
  const char* owner;
  size_t owner_length;
  int64_t used;             /* per the algorithm (docs/concepts.md) */
  int64_t remaining;        /* capacity - used, >= 0 */
  int64_t denied;           /* denied consumes since created or reset */
  int64_t reset_at_ms;      /* when usage is back to zero if nothing else happens */
  int64_t shadow_denied;    /* would-be denials in shadow mode */
  int64_t capacity;         /* the owner's capacity: the limit's, or its override's */
  int64_t blocked_until_ms; /* the end of the owner's lockout (a limit's block), 0 if none */
} quota_usage;

/* Receives one owner's usage of one limit (quota_owner_usage). The same call as a watch's. */
typedef void (*quota_usage_fn)(void* context, const quota_usage* usage);

/* One owner across every limit (quota::Engine::owner_usage(owner)): calls
 * `callback(context, usage)` once for each limit on which `owner` has state or an override,
 * by limit name, before it returns; *count (may be NULL) receives how many calls it made.
 * Changes nothing. */
QUOTA_API int quota_owner_usage(quota_engine* engine, const char* owner, size_t owner_length,
                                quota_usage_fn callback, void* context, size_t* count);

/* Receives an owner's usage: first when the watch begins, then whenever it changes. Called
 * on the engine's watch thread (one per engine, shared by its watches) with no lock held: it
 * may call quota_* functions on the engine, and quota_watch_end on any watch. It must not
 * call quota_close on its engine, nor unwind (longjmp, exceptions). */
typedef void (*quota_watch_fn)(void* context, const quota_usage* usage);

/* A watch of quota_watch. Opaque: only pointers to it exist. */
typedef struct quota_watch quota_watch;

/* Calls `callback(context, usage)` with the usage of `owner` of `limit` now, and again
 * whenever it changes (quota::Engine::watch): through this engine, another engine or another
 * process on the database, and when time alone changes it. With owner NULL (and
 * owner_length 0), every owner of the limit: a call per owner that changes, and one last call
 * with its empty usage for an owner whose state has gone. Stores the watch in *watch (NULL on
 * failure); end it with quota_watch_end, before or after quota_close. */
QUOTA_API int quota_watch_usage(quota_engine* engine, const char* limit, size_t limit_length,
                                const char* owner, size_t owner_length, quota_watch_fn callback,
                                void* context, quota_watch** watch);

/* Ends the watch and frees it: no call of its callback begins after this returns, and one
 * running on another thread is waited for (from inside its own callback it returns at once).
 * NULL is allowed and does nothing. */
QUOTA_API void quota_watch_end(quota_watch* watch);

/* One request of quota_consume_many, quota_check_many and quota_record_many. */
typedef struct quota_request {
  const char* limit;
  size_t limit_length;
  const char* owner;
  size_t owner_length;
  int64_t cost;
} quota_request;

/* Batch calls: the `count` requests, each decided on its own as quota_consume (check,
 * record) would, in order, in one transaction; results[i] receives the answer of
 * requests[i] (`results` may be NULL when the answers are not wanted). Every request is
 * validated first: a bad one fails the call with QUOTA_ERROR_INVALID_ARGUMENT (the message
 * names its index) and nothing runs. Any other failure (an unknown limit, the database) rolls
 * every request back; with fail_open, a failure of the database answers every request as a
 * lone call would. A failed call leaves results unchanged. `count` 0 does nothing. */
QUOTA_API int quota_consume_many(quota_engine* engine, const quota_request* requests, size_t count,
                                 quota_result* results);
QUOTA_API int quota_check_many(quota_engine* engine, const quota_request* requests, size_t count,
                               quota_result* results);
QUOTA_API int quota_record_many(quota_engine* engine, const quota_request* requests, size_t count,
                                quota_result* results);

/* A cancellation for quota_acquire: one thread waits with it, another cancels the wait.
 * quota_cancel_new stores a new one in *cancel (NULL on failure); quota_cancel requests it
 * (every waiter on it returns at once, and later quota_acquire calls with it wait no more);
 * quota_cancel_free frees it (NULL does nothing) once no call uses it. */
typedef struct quota_cancel quota_cancel;
QUOTA_API int quota_cancel_new(quota_cancel** cancel);
QUOTA_API int quota_cancel_request(quota_cancel* cancel);
QUOTA_API void quota_cancel_free(quota_cancel* cancel);

/* acquire: waits for its turn (quota::Engine::acquire). Consumes; while denied with a finite
 * retry_after_ms that ends within max_wait_ms (>= 0) of the call, sleeps exactly that long and
 * consumes again. *result is the first allowed answer, or a denial: at once when its wait
 * ends past the deadline, when it can never be allowed, or when `cancel` (may be NULL) is
 * requested. Only that final denial counts in `denied` (once): the attempts denied while
 * waiting are undone. The engine is not locked while a thread sleeps. */
QUOTA_API int quota_acquire(quota_engine* engine, const char* limit, size_t limit_length,
                            const char* owner, size_t owner_length, int64_t cost,
                            int64_t max_wait_ms, quota_cancel* cancel, quota_result* result);

/* acquire_all: quota_acquire over the `count` limits of quota_consume_all at once, all or
 * nothing, waiting for the slowest (quota::Engine::acquire_all). *result and *deciding (may
 * be NULL) as quota_consume_all's; only the final denial counts, on the deciding limit. */
QUOTA_API int quota_acquire_all(quota_engine* engine, const char* const* limits,
                                const size_t* limit_lengths, size_t count, const char* owner,
                                size_t owner_length, int64_t cost, int64_t max_wait_ms,
                                quota_cancel* cancel, quota_result* result, size_t* deciding);

/* Concurrency leases (quota/lease.h; docs/concepts.md, "How many at once"): on a limit of
 * QUOTA_CONCURRENCY, an acquire takes `cost` units as one lease, held until it is released or
 * its TTL runs out, so that a holder that crashes gives its units back by itself.
 *
 *   quota_lease_result r;
 *   if (quota_acquire_lease(engine, "uploads", 7, "user123", 7, 1, &r) == QUOTA_OK &&
 *       r.result.allowed) {
 *     upload();  // if longer than the TTL: quota_renew_lease(..., 0, NULL) on the way
 *     quota_release_lease(engine, r.lease, strlen(r.lease), NULL);
 *   }
 *
 * A lease id is QUOTA_LEASE_ID_LENGTH hex digits; it is passed back as any string is, with its
 * length. */
#define QUOTA_LEASE_ID_LENGTH 32

/* What quota_acquire_lease and quota_renew_lease answer (quota::LeaseResult). */
typedef struct quota_lease_result {
  /* The answer as every operation's. acquire: allowed when the lease was taken; denied,
   * retry_after_ms is the wait until enough held units expire (-1: the cost is above the
   * capacity). reset_at_ms is the owner's last lease expiry. renew: allowed, or
   * QUOTA_REASON_LEASE_EXPIRED. */
  quota_result result;
  /* The lease's id, NUL-terminated: the lease taken or renewed; "" when none was (denied, an
   * exempt owner, a shadow-mode allowance; a renewal that answers lease_expired). */
  char lease[QUOTA_LEASE_ID_LENGTH + 1];
  /* When the lease expires (Unix ms): now + TTL; 0 when no lease was taken. */
  int64_t expires_at_ms;
  /* 1: answered from an idempotency key's stored answer (a keyed acquire); 0 otherwise. */
  int replayed;
} quota_lease_result;

/* Takes `cost` units of the concurrency limit `limit` for `owner` as one lease, when the units
 * held by the owner's unexpired leases plus `cost` fit its capacity (one statement, exact
 * across threads, processes and hosts). *result must not be NULL: it receives the lease's id,
 * without which the lease can only expire. QUOTA_ERROR_INVALID_ARGUMENT for a limit that is
 * not a concurrency limit (use quota_consume there), QUOTA_ERROR_UNKNOWN_LIMIT for none. */
QUOTA_API int quota_acquire_lease(quota_engine* engine, const char* limit, size_t limit_length,
                                  const char* owner, size_t owner_length, int64_t cost,
                                  quota_lease_result* result);

/* quota_acquire_lease with an idempotency key of `key_length` (1 to 255) bytes, as
 * quota_consume_keyed takes it (docs/concepts.md, "Retries"): the first acquire with the key
 * is decided and its answer stored with the key; a retry with the same limit, owner and key
 * within options.idempotency_ttl_ms answers that answer again (the same lease id and
 * expires_at_ms) with result->replayed 1, and takes nothing. The key used for another
 * operation or cost is QUOTA_ERROR_IDEMPOTENCY_CONFLICT; a key that is empty, longer than 255
 * bytes or NULL with a length is QUOTA_ERROR_INVALID_ARGUMENT; both change nothing. */
QUOTA_API int quota_acquire_lease_keyed(quota_engine* engine, const char* limit,
                                        size_t limit_length, const char* owner, size_t owner_length,
                                        int64_t cost, const char* key, size_t key_length,
                                        quota_lease_result* result);

/* quota_consume that also answers the lease it took (quota::Engine::consume_with_lease), for a
 * caller that does not know the limit's algorithm: on a concurrency limit *result receives the
 * lease's id and expiry as quota_acquire_lease's does; on any other algorithm, or when no lease
 * was taken, lease "" and expires_at_ms 0. *result must not be NULL. The _keyed form takes an
 * idempotency key as quota_consume_keyed does (the same keys: a retry answers the first
 * consume's lease, replayed 1). */
QUOTA_API int quota_consume_with_lease(quota_engine* engine, const char* limit, size_t limit_length,
                                       const char* owner, size_t owner_length, int64_t cost,
                                       quota_lease_result* result);
QUOTA_API int quota_consume_with_lease_keyed(quota_engine* engine, const char* limit,
                                             size_t limit_length, const char* owner,
                                             size_t owner_length, int64_t cost, const char* key,
                                             size_t key_length, quota_lease_result* result);

/* quota_record that also answers the lease it took (quota::Engine::record_with_lease): on a
 * concurrency limit record takes a lease even over the capacity (result.allowed 0, the lease
 * held all the same), and *result receives its id and expiry as quota_acquire_lease's does;
 * on any other algorithm, or for an exempt owner, lease "" and expires_at_ms 0. *result must
 * not be NULL. The _keyed form takes an idempotency key as quota_record_keyed does. */
QUOTA_API int quota_record_with_lease(quota_engine* engine, const char* limit, size_t limit_length,
                                      const char* owner, size_t owner_length, int64_t cost,
                                      quota_lease_result* result);
QUOTA_API int quota_record_with_lease_keyed(quota_engine* engine, const char* limit,
                                            size_t limit_length, const char* owner,
                                            size_t owner_length, int64_t cost, const char* key,
                                            size_t key_length, quota_lease_result* result);

/* A lease that quota_consume_all_leasing or quota_acquire_all_leasing took on one of its
 * concurrency limits (quota::LeaseGrant). The strings are valid during the call only and are
 * not NUL-terminated. */
typedef struct quota_lease_grant {
  const char* limit;
  size_t limit_length;
  const char* owner;
  size_t owner_length;
  const char* lease; /* its id, QUOTA_LEASE_ID_LENGTH hex digits: quota_release_lease frees it */
  size_t lease_length;
  int64_t expires_at_ms; /* when it expires (Unix ms): now + the limit's TTL */
} quota_lease_grant;

/* Receives one lease taken (quota_consume_all_leasing, quota_acquire_all_leasing). */
typedef void (*quota_lease_grant_fn)(void* context, const quota_lease_grant* grant);

/* quota_consume_all and quota_acquire_all that also answer the leases they took: quota_consume_all
 * takes one on each concurrency limit among `limits` when it allows (none when it denies), and
 * cannot say them. These decide exactly as those do, then call `on_lease(context, grant)` once
 * per lease taken, in the order of `limits`, before they return, with no lock held (it may
 * call quota_* functions on the engine, quota_release_lease among them); *leases (may be NULL)
 * receives how many calls were made. `on_lease` must not be NULL (QUOTA_ERROR_INVALID_ARGUMENT,
 * nothing consumed): without it a lease could only expire. */
QUOTA_API int quota_consume_all_leasing(quota_engine* engine, const char* const* limits,
                                        const size_t* limit_lengths, size_t count,
                                        const char* owner, size_t owner_length, int64_t cost,
                                        quota_result* result, size_t* deciding,
                                        quota_lease_grant_fn on_lease, void* context,
                                        size_t* leases);
QUOTA_API int quota_acquire_all_leasing(quota_engine* engine, const char* const* limits,
                                        const size_t* limit_lengths, size_t count,
                                        const char* owner, size_t owner_length, int64_t cost,
                                        int64_t max_wait_ms, quota_cancel* cancel,
                                        quota_result* result, size_t* deciding,
                                        quota_lease_grant_fn on_lease, void* context,
                                        size_t* leases);

/* Moves an unexpired lease's expiry to now + ttl_ms (1000 ... 86400000), or now + its limit's
 * TTL with ttl_ms 0. An unknown, released or expired lease answers QUOTA_OK with
 * result.allowed 0 and reason QUOTA_REASON_LEASE_EXPIRED: acquire a new one. `result` may be
 * NULL. QUOTA_ERROR_INVALID_ARGUMENT (changing nothing) for a ttl_ms out of range, or a lease
 * id not of the form acquire issues, QUOTA_LEASE_ID_LENGTH hex digits in lower case (the same
 * for quota_release_lease): a malformed id is never answered as a lease that is not held. */
QUOTA_API int quota_renew_lease(quota_engine* engine, const char* lease, size_t lease_length,
                                int64_t ttl_ms, quota_lease_result* result);

/* Frees the lease at once. *was_held (may be NULL) is 1 when it was held, 0 when there was
 * nothing to free (unknown, released before, or expired): releasing twice is harmless. */
QUOTA_API int quota_release_lease(quota_engine* engine, const char* lease, size_t lease_length,
                                  int* was_held);

/* An unexpired lease, as quota_leases reports it (quota::LeaseInfo). The strings are valid
 * during the call only and are not NUL-terminated. */
typedef struct quota_lease_info {
  const char* lease;
  size_t lease_length;
  const char* owner;
  size_t owner_length;
  int64_t cost;           /* the units it holds */
  int64_t expires_at_ms;  /* when it expires unless renewed */
  int64_t acquired_at_ms; /* when it was taken */
} quota_lease_info;

/* Receives one lease (quota_leases). */
typedef void (*quota_lease_fn)(void* context, const quota_lease_info* lease);

/* The unexpired leases of the concurrency limit `limit` (quota::Engine::leases): calls
 * `callback(context, lease)` once per lease, by owner and expiry, before it returns; with
 * owner NULL (and owner_length 0) every owner's, else `owner`'s only. *count (may be NULL)
 * receives how many calls it made. Changes nothing. */
QUOTA_API int quota_leases(quota_engine* engine, const char* limit, size_t limit_length,
                           const char* owner, size_t owner_length, quota_lease_fn callback,
                           void* context, size_t* count);

/* The message of the last call on this thread that failed, as NUL-terminated UTF-8; "" after
 * a call that returned QUOTA_OK. Valid until the next quota_* call on this thread. */
QUOTA_API const char* quota_last_error(void);

/* Stable names: "ok", "invalid_argument", ... (quota::to_string of the error code),
 * "out_of_memory", "internal"; "rate_limited", ...; "sliding_log", .... "?" for a number that is
 * not one. */
QUOTA_API const char* quota_status_name(int status);
QUOTA_API const char* quota_reason_name(int reason);
QUOTA_API const char* quota_algorithm_name(int algorithm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QUOTA_QUOTA_H_ */
