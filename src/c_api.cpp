// The C API (include/quota/quota.h) over quota::Engine.
//
// Every entry point runs its body through `guarded`, which turns each exception into a status
// code and a thread-local message, so that no exception ever reaches a C caller. Numbers that
// cross the boundary (status, reason, algorithm) are mapped with explicit switches rather than
// casts: reordering a C++ enum must never renumber the C ABI.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "quota/engine.h"
#include "quota/quota.h"
#include "quota/version.h"

struct quota_engine {
  quota::Engine engine;
};

struct quota_watch {
  quota::Watch watch;
};

struct quota_cancel {
  std::stop_source source;
};

namespace {

using quota::Error;
using quota::ErrorCode;

// The last failure's message on this thread. `message` points either into `storage` or at a
// string literal, so that an allocation failure can still be reported.
struct LastError {
  std::string storage;
  const char* message = "";
};
thread_local LastError last_error;

int status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument:
      return QUOTA_ERROR_INVALID_ARGUMENT;
    case ErrorCode::unknown_limit:
      return QUOTA_ERROR_UNKNOWN_LIMIT;
    case ErrorCode::busy:
      return QUOTA_ERROR_BUSY;
    case ErrorCode::schema_too_new:
      return QUOTA_ERROR_SCHEMA_TOO_NEW;
    case ErrorCode::not_migrated:
      return QUOTA_ERROR_NOT_MIGRATED;
    case ErrorCode::checksum_mismatch:
      return QUOTA_ERROR_CHECKSUM_MISMATCH;
    case ErrorCode::not_a_database:
      return QUOTA_ERROR_NOT_A_DATABASE;
    case ErrorCode::io:
      return QUOTA_ERROR_IO;
    case ErrorCode::permission_denied:
      return QUOTA_ERROR_PERMISSION_DENIED;
    case ErrorCode::idempotency_conflict:
      return QUOTA_ERROR_IDEMPOTENCY_CONFLICT;
  }
  return QUOTA_ERROR_INTERNAL;
}

int reason_of(quota::Reason reason) noexcept {
  switch (reason) {
    case quota::Reason::ok:
      return QUOTA_REASON_OK;
    case quota::Reason::rate_limited:
      return QUOTA_REASON_RATE_LIMITED;
    case quota::Reason::cost_exceeds_capacity:
      return QUOTA_REASON_COST_EXCEEDS_CAPACITY;
    case quota::Reason::owner_denied:
      return QUOTA_REASON_OWNER_DENIED;
    case quota::Reason::hook_denied:
      return QUOTA_REASON_HOOK_DENIED;
    case quota::Reason::store_unavailable:
      return QUOTA_REASON_STORE_UNAVAILABLE;
    case quota::Reason::blocked:
      return QUOTA_REASON_BLOCKED;
    case quota::Reason::lease_expired:
      return QUOTA_REASON_LEASE_EXPIRED;
  }
  return -1;
}

quota::Algorithm algorithm_of(int algorithm) {
  switch (algorithm) {
    case QUOTA_SLIDING_LOG:
      return quota::Algorithm::sliding_log;
    case QUOTA_FIXED_WINDOW:
      return quota::Algorithm::fixed_window;
    case QUOTA_SLIDING_WINDOW:
      return quota::Algorithm::sliding_window;
    case QUOTA_TOKEN_BUCKET:
      return quota::Algorithm::token_bucket;
    case QUOTA_CONCURRENCY:
      return quota::Algorithm::concurrency;
    default:
      throw Error(ErrorCode::invalid_argument,
                  "unknown algorithm number " + std::to_string(algorithm) +
                      ": use QUOTA_SLIDING_LOG, QUOTA_FIXED_WINDOW, QUOTA_SLIDING_WINDOW, "
                      "QUOTA_TOKEN_BUCKET or QUOTA_CONCURRENCY");
  }
}

quota::Calendar calendar_of(int calendar) {
  switch (calendar) {
    case QUOTA_DAY:
      return quota::Calendar::day;
    case QUOTA_WEEK:
      return quota::Calendar::week;
    case QUOTA_MONTH:
      return quota::Calendar::month;
    case QUOTA_YEAR:
      return quota::Calendar::year;
    default:
      throw Error(ErrorCode::invalid_argument,
                  "unknown calendar number " + std::to_string(calendar) +
                      ": use QUOTA_DAY, QUOTA_WEEK, QUOTA_MONTH or QUOTA_YEAR");
  }
}

int c_algorithm(quota::Algorithm algorithm) {
  switch (algorithm) {
    case quota::Algorithm::sliding_log:
      return QUOTA_SLIDING_LOG;
    case quota::Algorithm::fixed_window:
      return QUOTA_FIXED_WINDOW;
    case quota::Algorithm::sliding_window:
      return QUOTA_SLIDING_WINDOW;
    case quota::Algorithm::token_bucket:
      return QUOTA_TOKEN_BUCKET;
    case quota::Algorithm::concurrency:
      return QUOTA_CONCURRENCY;
  }
  return -1;
}

int c_calendar(std::optional<quota::Calendar> calendar) {
  if (!calendar) return QUOTA_NO_CALENDAR;
  switch (*calendar) {
    case quota::Calendar::day:
      return QUOTA_DAY;
    case quota::Calendar::week:
      return QUOTA_WEEK;
    case quota::Calendar::month:
      return QUOTA_MONTH;
    case quota::Calendar::year:
      return QUOTA_YEAR;
  }
  return QUOTA_NO_CALENDAR;
}

quota_limit c_limit(const quota::Limit& limit) {
  quota_limit out{};
  out.algorithm = c_algorithm(limit.algorithm);
  out.maximum = limit.maximum;
  out.period_ms = limit.period.count();
  out.burst = limit.burst.value_or(QUOTA_NO_BURST);
  out.shadow = limit.shadow ? 1 : 0;
  out.block_ms = limit.block ? limit.block->count() : 0;
  out.calendar = c_calendar(limit.calendar);
  out.utc_offset_minutes = static_cast<int>(limit.utc_offset.count());
  out.anchor_ms = limit.anchor_ms.value_or(QUOTA_NO_ANCHOR);
  return out;
}

// The C names of the bounds, in the messages; the bounds themselves are the C++ API's.
void check_anchor(std::int64_t anchor_ms, const char* otherwise) {
  if (anchor_ms < 0 || anchor_ms > quota::kAnchorBound) {
    throw Error(ErrorCode::invalid_argument,
                "anchor_ms " + std::to_string(anchor_ms) + " is out of range: give a Unix ms " +
                    "time from 0 to " + std::to_string(quota::kAnchorBound) +
                    " (10000-01-01T00:00:00Z)" + otherwise);
  }
}

void check_utc_offset(int utc_offset_minutes) {
  const int bound = static_cast<int>(quota::kUtcOffsetBound.count());
  if (utc_offset_minutes < -bound || utc_offset_minutes > bound) {
    throw Error(ErrorCode::invalid_argument,
                "utc_offset_minutes " + std::to_string(utc_offset_minutes) +
                    " is out of range: give -" + std::to_string(bound) + " to " +
                    std::to_string(bound) + " (-14:00 to +14:00), e.g. 540 for +09:00");
  }
}

int fail(int status, const char* prefix, const char* what) noexcept {
  try {
    last_error.storage.assign(prefix);
    last_error.storage.append(what);
    last_error.message = last_error.storage.c_str();
  } catch (...) {
    last_error.message = "out of memory (while reporting another error)";
  }
  return status;
}

// A Usage as the C API shows it: the strings point into `usage`, which must outlive it.
quota_usage view_of(const quota::Usage& usage) {
  return quota_usage{usage.limit.data(),
                     usage.limit.size(),
                     usage.owner.data(),
                     usage.owner.size(),
                     usage.used,
                     usage.remaining,
                     usage.denied,
                     usage.reset_at_ms,
                     usage.shadow_denied,
                     usage.capacity,
                     usage.blocked_until_ms.value_or(0)};
}

// Runs `body`; every exception becomes a status and the thread's last error.
template <typename Body>
int guarded(Body&& body) noexcept {
  try {
    body();
    last_error.message = "";
    return QUOTA_OK;
  } catch (const Error& error) {
    return fail(status_of(error.code()), "", error.what());
  } catch (const std::bad_alloc&) {
    last_error.message = "out of memory: free memory or lower the load, then retry";
    return QUOTA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& error) {
    return fail(QUOTA_ERROR_INTERNAL, "internal error in quota (please report it): ", error.what());
  } catch (...) {
    return fail(QUOTA_ERROR_INTERNAL,
                "internal error in quota (please report it): ", "an unknown exception");
  }
}

std::string_view text(const char* data, std::size_t length, const char* what) {
  if (data == nullptr && length != 0) {
    throw Error(ErrorCode::invalid_argument,
                std::string(what) + " is NULL with a length of " + std::to_string(length) +
                    ": pass the bytes, or (NULL, 0) for an empty string");
  }
  return data == nullptr ? std::string_view() : std::string_view(data, length);
}

quota::Engine& engine_of(quota_engine* engine) {
  if (engine == nullptr) {
    throw Error(ErrorCode::invalid_argument,
                "the engine is NULL: pass the handle that quota_open stored");
  }
  return engine->engine;
}

void store(const quota::Result& from, quota_result* to) {
  if (to == nullptr) return;
  to->allowed = from.allowed ? 1 : 0;
  to->reason = reason_of(from.reason);
  to->remaining = from.remaining;
  to->retry_after_ms = from.retry_after_ms;
  to->reset_at_ms = from.reset_at_ms;
  to->denied = from.denied;
}

void store_lease(const quota::LeaseResult& from, quota_lease_result* to) {
  if (to == nullptr) return;
  if (from.lease.size() > QUOTA_LEASE_ID_LENGTH) {
    throw std::logic_error("a lease id of " + std::to_string(from.lease.size()) +
                           " bytes does not fit quota_lease_result.lease");
  }
  quota_lease_result out{};
  store(from, &out.result);
  std::memcpy(out.lease, from.lease.data(), from.lease.size());
  out.lease[from.lease.size()] = '\0';
  out.expires_at_ms = from.expires_at_ms;
  out.replayed = from.replayed ? 1 : 0;
  *to = out;
}

std::string_view lease_id(const char* lease, std::size_t lease_length) {
  if (text(lease, lease_length, "the lease id").empty()) {
    throw Error(ErrorCode::invalid_argument,
                "the lease id is empty: pass quota_lease_result.lease and its length (" +
                    std::to_string(QUOTA_LEASE_ID_LENGTH) + ")");
  }
  return {lease, lease_length};
}

quota::Options options_of(const quota_options* given) {
  quota_options options;
  quota_options_init(&options);
  if (given != nullptr) {
    if (given->size < sizeof(given->size)) {
      throw Error(ErrorCode::invalid_argument,
                  "quota_options.size is " + std::to_string(given->size) +
                      ": fill the options with quota_options_init first");
    }
    // A caller built against an older, shorter quota_options keeps the defaults of the
    // fields it does not know.
    std::memcpy(&options, given, std::min(given->size, sizeof(options)));
    options.size = sizeof(options);
  }
  if (options.busy_timeout_ms < 0) {
    throw Error(ErrorCode::invalid_argument, "busy_timeout_ms is " +
                                                 std::to_string(options.busy_timeout_ms) +
                                                 ": give a number of milliseconds >= 0");
  }
  quota::Options result;
  result.create = options.create != 0;
  result.migrate = options.migrate != 0;
  result.synchronous_full = options.synchronous_full != 0;
  result.busy_timeout = std::chrono::milliseconds(options.busy_timeout_ms);
  if (options.clock != nullptr) {
    result.clock = [clock = options.clock, context = options.clock_context] {
      return clock(context);
    };
  }
  result.failure_policy =
      options.fail_open != 0 ? quota::FailurePolicy::fail_open : quota::FailurePolicy::fail_closed;
  result.restart_checkpoint = options.restart_checkpoint != 0;
  result.group_commit = options.group_commit != 0;
  result.idempotency_ttl = std::chrono::milliseconds(options.idempotency_ttl_ms);
  if (options.on_error != nullptr) {
    result.on_error = [on_error = options.on_error,
                       context = options.on_error_context](const quota::Error& error) {
      on_error(context, status_of(error.code()), error.what());
    };
  }
  return result;
}

using Operation = quota::Result (quota::Engine::*)(std::string_view, std::string_view,
                                                   std::int64_t);

int operate(Operation operation, quota_engine* engine, const char* limit, std::size_t limit_length,
            const char* owner, std::size_t owner_length, std::int64_t cost,
            quota_result* result) noexcept {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    store((target.*operation)(text(limit, limit_length, "the limit name"),
                              text(owner, owner_length, "the owner"), cost),
          result);
  });
}

using BatchOperation =
    std::vector<quota::Result> (quota::Engine::*)(const std::vector<quota::BatchRequest>&);

int operate_many(BatchOperation operation, quota_engine* engine, const quota_request* requests,
                 std::size_t count, quota_result* results) noexcept {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    if (count > 0 && requests == nullptr) {
      throw Error(ErrorCode::invalid_argument, "requests is NULL with a count of " +
                                                   std::to_string(count) +
                                                   ": pass an array of `count` quota_request");
    }
    std::vector<quota::BatchRequest> batch;
    batch.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      batch.push_back({text(requests[i].limit, requests[i].limit_length, "a request's limit name"),
                       text(requests[i].owner, requests[i].owner_length, "a request's owner"),
                       requests[i].cost});
    }
    const std::vector<quota::Result> answers = (target.*operation)(batch);
    if (results == nullptr) return;
    for (std::size_t i = 0; i < answers.size(); ++i) store(answers[i], &results[i]);
  });
}

// The names of quota_consume_all's and quota_acquire_all's arrays.
std::vector<std::string_view> names_of(const char* const* limits, const size_t* limit_lengths,
                                       size_t count) {
  if (count > 0 && (limits == nullptr || limit_lengths == nullptr)) {
    throw Error(quota::ErrorCode::invalid_argument,
                "limits and limit_lengths are NULL: pass arrays of `count` names");
  }
  std::vector<std::string_view> names;
  for (size_t i = 0; i < count; ++i) {
    names.push_back(text(limits[i], limit_lengths[i], "a limit name"));
  }
  return names;
}

// Stores a decision over `names` into *result and *deciding (its index; either may be NULL).
void store_decision(const quota::Decision& decision, const std::vector<std::string_view>& names,
                    quota_result* result, size_t* deciding) {
  store(decision.result, result);
  if (deciding != nullptr) {
    *deciding =
        static_cast<size_t>(std::find(names.begin(), names.end(), decision.limit) - names.begin());
  }
}

}  // namespace

extern "C" {

int quota_consume_many(quota_engine* engine, const quota_request* requests, size_t count,
                       quota_result* results) {
  return operate_many(&quota::Engine::consume_many, engine, requests, count, results);
}

int quota_check_many(quota_engine* engine, const quota_request* requests, size_t count,
                     quota_result* results) {
  return operate_many(&quota::Engine::check_many, engine, requests, count, results);
}

int quota_record_many(quota_engine* engine, const quota_request* requests, size_t count,
                      quota_result* results) {
  return operate_many(&quota::Engine::record_many, engine, requests, count, results);
}

const char* quota_version(void) { return QUOTA_VERSION_STRING; }

void quota_options_init_sized(quota_options* options, size_t size) {
  if (options == nullptr || size < sizeof(options->size)) return;
  const quota::Options defaults;
  quota_options full{};
  full.create = defaults.create ? 1 : 0;
  full.migrate = defaults.migrate ? 1 : 0;
  full.synchronous_full = defaults.synchronous_full ? 1 : 0;
  full.busy_timeout_ms = defaults.busy_timeout.count();
  full.clock = nullptr;
  full.clock_context = nullptr;
  full.fail_open = defaults.failure_policy == quota::FailurePolicy::fail_open ? 1 : 0;
  full.on_error = nullptr;
  full.on_error_context = nullptr;
  full.restart_checkpoint = defaults.restart_checkpoint ? 1 : 0;
  full.group_commit = defaults.group_commit ? 1 : 0;
  full.idempotency_ttl_ms = defaults.idempotency_ttl.count();
  // Only the caller's bytes: a caller built against an older, shorter struct has no more.
  full.size = std::min(size, sizeof(quota_options));
  std::memcpy(options, &full, full.size);
}

int quota_open(const char* path, size_t path_length, const quota_options* options,
               quota_engine** engine) {
  return guarded([&] {
    if (engine == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "nowhere to store the engine: pass the address of a quota_engine*");
    }
    *engine = nullptr;
    const std::string file(text(path, path_length, "the path"));
    auto opened = std::make_unique<quota_engine>(
        quota_engine{quota::Engine::open(file, options_of(options))});
    *engine = opened.release();
  });
}

void quota_close(quota_engine* engine) {
  // Closing cannot fail in a way the caller could act on: the destructors never throw.
  delete engine;
}

int quota_define(quota_engine* engine, const char* name, size_t name_length, int algorithm,
                 int64_t maximum, int64_t period_ms, int64_t burst) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    quota::Limit limit;
    limit.name = std::string(text(name, name_length, "the limit name"));
    limit.algorithm = algorithm_of(algorithm);
    limit.maximum = maximum;
    limit.period = std::chrono::milliseconds(period_ms);
    if (burst != QUOTA_NO_BURST) limit.burst = burst;
    target.define(limit);
  });
}

int quota_ensure(quota_engine* engine, const char* name, size_t name_length, int algorithm,
                 int64_t maximum, int64_t period_ms, int64_t burst, quota_limit* stored) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    quota::Limit limit;
    limit.name = std::string(text(name, name_length, "the limit name"));
    limit.algorithm = algorithm_of(algorithm);
    limit.maximum = maximum;
    limit.period = std::chrono::milliseconds(period_ms);
    if (burst != QUOTA_NO_BURST) limit.burst = burst;
    const quota::Limit found = target.ensure(limit);
    if (stored) *stored = c_limit(found);
  });
}

int quota_set_block(quota_engine* engine, const char* name, size_t name_length, int64_t block_ms) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const std::string_view limit_name = text(name, name_length, "the limit name");
    if (block_ms < 0) {
      throw Error(ErrorCode::invalid_argument, "invalid block_ms " + std::to_string(block_ms) +
                                                   ": give 1 ms to 366 days, or 0 for no lockout");
    }
    std::optional<quota::Limit> limit = target.get(limit_name);
    if (!limit) {
      throw Error(ErrorCode::unknown_limit, "unknown limit '" + std::string(limit_name) +
                                                "': define it first (quota_define)");
    }
    if (block_ms == 0) {
      limit->block.reset();
    } else {
      limit->block = std::chrono::milliseconds(block_ms);
    }
    target.define(*limit);
  });
}

int quota_define_calendar(quota_engine* engine, const char* name, size_t name_length,
                          int64_t maximum, int calendar, int utc_offset_minutes,
                          int64_t anchor_ms) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const std::string_view limit_name = text(name, name_length, "the limit name");
    const quota::Calendar unit = calendar_of(calendar);
    check_utc_offset(utc_offset_minutes);
    std::optional<std::int64_t> anchor;
    if (anchor_ms != QUOTA_NO_ANCHOR) {
      check_anchor(anchor_ms, ", or QUOTA_NO_ANCHOR for none");
      anchor = anchor_ms;
    }
    target.define(quota::calendar_limit(std::string(limit_name), maximum, unit,
                                        std::chrono::minutes(utc_offset_minutes), anchor));
  });
}

int quota_set_anchor(quota_engine* engine, const char* limit, size_t limit_length,
                     const char* owner, size_t owner_length, int64_t anchor_ms) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    quota::Anchor anchor;
    anchor.limit = std::string(text(limit, limit_length, "the limit name"));
    anchor.owner = std::string(text(owner, owner_length, "the owner"));
    check_anchor(anchor_ms, "; quota_remove_anchor removes an owner's anchor");
    anchor.anchor_ms = anchor_ms;
    target.set_anchor(anchor);
  });
}

int quota_remove_anchor(quota_engine* engine, const char* limit, size_t limit_length,
                        const char* owner, size_t owner_length, int* removed) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const bool existed = target.remove_anchor(text(limit, limit_length, "the limit name"),
                                              text(owner, owner_length, "the owner"));
    if (removed != nullptr) *removed = existed ? 1 : 0;
  });
}

int quota_owner_usage(quota_engine* engine, const char* owner, size_t owner_length,
                      quota_usage_fn callback, void* context, size_t* count) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    if (callback == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "callback is NULL: pass the function to call with each limit's usage");
    }
    const std::vector<quota::Usage> rows =
        target.owner_usage(text(owner, owner_length, "the owner"));
    if (count != nullptr) *count = rows.size();
    for (const quota::Usage& row : rows) {
      const quota_usage view = view_of(row);
      callback(context, &view);
    }
  });
}

int quota_remove(quota_engine* engine, const char* name, size_t name_length, int* removed) {
  return guarded([&] {
    const bool existed = engine_of(engine).remove(text(name, name_length, "the limit name"));
    if (removed != nullptr) *removed = existed ? 1 : 0;
  });
}

int quota_check(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                size_t owner_length, int64_t cost, quota_result* result) {
  return operate(&quota::Engine::check, engine, limit, limit_length, owner, owner_length, cost,
                 result);
}

int quota_consume(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                  size_t owner_length, int64_t cost, quota_result* result) {
  return operate(&quota::Engine::consume, engine, limit, limit_length, owner, owner_length, cost,
                 result);
}

int quota_cancel_new(quota_cancel** cancel) {
  if (cancel != nullptr) *cancel = nullptr;
  return guarded([&] {
    if (cancel == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "cancel is NULL: pass where to store the new cancellation");
    }
    *cancel = new quota_cancel();
  });
}

int quota_cancel_request(quota_cancel* cancel) {
  return guarded([&] {
    if (cancel == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "cancel is NULL: pass the handle that quota_cancel_new stored");
    }
    cancel->source.request_stop();
  });
}

void quota_cancel_free(quota_cancel* cancel) { delete cancel; }

int quota_acquire(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                  size_t owner_length, int64_t cost, int64_t max_wait_ms, quota_cancel* cancel,
                  quota_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    store(target.acquire(text(limit, limit_length, "the limit name"),
                         text(owner, owner_length, "the owner"), cost,
                         std::chrono::milliseconds(max_wait_ms),
                         cancel != nullptr ? cancel->source.get_token() : std::stop_token()),
          result);
  });
}

int quota_record(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                 size_t owner_length, int64_t cost, quota_result* result) {
  return operate(&quota::Engine::record, engine, limit, limit_length, owner, owner_length, cost,
                 result);
}

namespace {

using KeyedOperation = quota::Result (quota::Engine::*)(std::string_view, std::string_view,
                                                        std::int64_t, std::string_view);

int operate_keyed(KeyedOperation operation, quota_engine* engine, const char* limit,
                  std::size_t limit_length, const char* owner, std::size_t owner_length,
                  std::int64_t cost, const char* key, std::size_t key_length,
                  quota_result* result, int* replayed) noexcept {
  if (replayed != nullptr) *replayed = 0;
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const quota::Result answer =
        (target.*operation)(text(limit, limit_length, "the limit name"),
                            text(owner, owner_length, "the owner"), cost,
                            text(key, key_length, "the idempotency key"));
    store(answer, result);
    if (replayed != nullptr) *replayed = answer.replayed ? 1 : 0;
  });
}

}  // namespace

int quota_consume_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                        const char* owner, size_t owner_length, int64_t cost, const char* key,
                        size_t key_length, quota_result* result, int* replayed) {
  return operate_keyed(&quota::Engine::consume, engine, limit, limit_length, owner, owner_length,
                       cost, key, key_length, result, replayed);
}

int quota_record_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                       const char* owner, size_t owner_length, int64_t cost, const char* key,
                       size_t key_length, quota_result* result, int* replayed) {
  return operate_keyed(&quota::Engine::record, engine, limit, limit_length, owner, owner_length,
                       cost, key, key_length, result, replayed);
}

int quota_reset(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                size_t owner_length, quota_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    store(target.reset(text(limit, limit_length, "the limit name"),
                       text(owner, owner_length, "the owner")),
          result);
  });
}

int quota_reset_everywhere(quota_engine* engine, const char* owner, size_t owner_length,
                           size_t* limits) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const std::size_t count =
        target.reset_everywhere(text(owner, owner_length, "the owner")).size();
    if (limits) *limits = count;
  });
}

int quota_refund(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                 size_t owner_length, int64_t cost, quota_result* result) {
  return operate(&quota::Engine::refund, engine, limit, limit_length, owner, owner_length, cost,
                 result);
}

int quota_consume_all(quota_engine* engine, const char* const* limits, const size_t* limit_lengths,
                      size_t count, const char* owner, size_t owner_length, int64_t cost,
                      quota_result* result, size_t* deciding) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const std::vector<std::string_view> names = names_of(limits, limit_lengths, count);
    store_decision(target.consume_all(names, text(owner, owner_length, "the owner"), cost), names,
                   result, deciding);
  });
}

int quota_acquire_all(quota_engine* engine, const char* const* limits, const size_t* limit_lengths,
                      size_t count, const char* owner, size_t owner_length, int64_t cost,
                      int64_t max_wait_ms, quota_cancel* cancel, quota_result* result,
                      size_t* deciding) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const std::vector<std::string_view> names = names_of(limits, limit_lengths, count);
    store_decision(
        target.acquire_all(names, text(owner, owner_length, "the owner"), cost,
                           std::chrono::milliseconds(max_wait_ms),
                           cancel != nullptr ? cancel->source.get_token() : std::stop_token()),
        names, result, deciding);
  });
}

namespace {

void require_lease_result(const quota_lease_result* result) {
  if (result == nullptr) {
    throw Error(ErrorCode::invalid_argument,
                "result is NULL: pass a quota_lease_result to receive the lease's id (without "
                "it the lease could only expire); nothing was acquired");
  }
}

void require_grant_callback(quota_lease_grant_fn on_lease) {
  if (on_lease == nullptr) {
    throw Error(ErrorCode::invalid_argument,
                "on_lease is NULL: pass the function to call with each lease taken (without it "
                "a lease could only expire), or use quota_consume_all / quota_acquire_all; "
                "nothing was consumed");
  }
}

// Calls `on_lease` with each lease of the decision, after the decision (no lock held).
void tell_grants(const quota::Decision& decision, quota_lease_grant_fn on_lease, void* context,
                 size_t* leases) {
  if (leases != nullptr) *leases = decision.leases.size();
  for (const quota::LeaseGrant& grant : decision.leases) {
    const quota_lease_grant view{grant.limit.data(), grant.limit.size(), grant.owner.data(),
                                 grant.owner.size(), grant.lease.data(), grant.lease.size(),
                                 grant.expires_at_ms};
    on_lease(context, &view);
  }
}

}  // namespace

int quota_acquire_lease(quota_engine* engine, const char* limit, size_t limit_length,
                        const char* owner, size_t owner_length, int64_t cost,
                        quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_lease_result(result);
    store_lease(target.acquire_lease(text(limit, limit_length, "the limit name"),
                                     text(owner, owner_length, "the owner"), cost),
                result);
  });
}

int quota_acquire_lease_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                              const char* owner, size_t owner_length, int64_t cost, const char* key,
                              size_t key_length, quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_lease_result(result);
    store_lease(target.acquire_lease(text(limit, limit_length, "the limit name"),
                                     text(owner, owner_length, "the owner"), cost,
                                     text(key, key_length, "the idempotency key")),
                result);
  });
}

int quota_consume_with_lease(quota_engine* engine, const char* limit, size_t limit_length,
                             const char* owner, size_t owner_length, int64_t cost,
                             quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_lease_result(result);
    store_lease(target.consume_with_lease(text(limit, limit_length, "the limit name"),
                                          text(owner, owner_length, "the owner"), cost),
                result);
  });
}

int quota_consume_with_lease_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                                   const char* owner, size_t owner_length, int64_t cost,
                                   const char* key, size_t key_length, quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_lease_result(result);
    store_lease(target.consume_with_lease(text(limit, limit_length, "the limit name"),
                                          text(owner, owner_length, "the owner"), cost,
                                          text(key, key_length, "the idempotency key")),
                result);
  });
}

int quota_record_with_lease(quota_engine* engine, const char* limit, size_t limit_length,
                            const char* owner, size_t owner_length, int64_t cost,
                            quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_lease_result(result);
    store_lease(target.record_with_lease(text(limit, limit_length, "the limit name"),
                                         text(owner, owner_length, "the owner"), cost),
                result);
  });
}

int quota_record_with_lease_keyed(quota_engine* engine, const char* limit, size_t limit_length,
                                  const char* owner, size_t owner_length, int64_t cost,
                                  const char* key, size_t key_length, quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_lease_result(result);
    store_lease(target.record_with_lease(text(limit, limit_length, "the limit name"),
                                         text(owner, owner_length, "the owner"), cost,
                                         text(key, key_length, "the idempotency key")),
                result);
  });
}

int quota_consume_all_leasing(quota_engine* engine, const char* const* limits,
                              const size_t* limit_lengths, size_t count, const char* owner,
                              size_t owner_length, int64_t cost, quota_result* result,
                              size_t* deciding, quota_lease_grant_fn on_lease, void* context,
                              size_t* leases) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_grant_callback(on_lease);
    const std::vector<std::string_view> names = names_of(limits, limit_lengths, count);
    const quota::Decision decision =
        target.consume_all(names, text(owner, owner_length, "the owner"), cost);
    store_decision(decision, names, result, deciding);
    tell_grants(decision, on_lease, context, leases);
  });
}

int quota_acquire_all_leasing(quota_engine* engine, const char* const* limits,
                              const size_t* limit_lengths, size_t count, const char* owner,
                              size_t owner_length, int64_t cost, int64_t max_wait_ms,
                              quota_cancel* cancel, quota_result* result, size_t* deciding,
                              quota_lease_grant_fn on_lease, void* context, size_t* leases) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    require_grant_callback(on_lease);
    const std::vector<std::string_view> names = names_of(limits, limit_lengths, count);
    const quota::Decision decision = target.acquire_all(
        names, text(owner, owner_length, "the owner"), cost, std::chrono::milliseconds(max_wait_ms),
        cancel != nullptr ? cancel->source.get_token() : std::stop_token());
    store_decision(decision, names, result, deciding);
    tell_grants(decision, on_lease, context, leases);
  });
}

int quota_renew_lease(quota_engine* engine, const char* lease, size_t lease_length, int64_t ttl_ms,
                      quota_lease_result* result) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const std::string_view id = lease_id(lease, lease_length);
    std::optional<std::chrono::milliseconds> ttl;
    if (ttl_ms != 0) {
      if (ttl_ms < quota::kLeaseTtlMin.count() || ttl_ms > quota::kLeaseTtlMax.count()) {
        throw Error(ErrorCode::invalid_argument,
                    "ttl_ms " + std::to_string(ttl_ms) + " is out of range: give " +
                        std::to_string(quota::kLeaseTtlMin.count()) + " (1 s) to " +
                        std::to_string(quota::kLeaseTtlMax.count()) +
                        " (1 day), or 0 for the limit's TTL");
      }
      ttl = std::chrono::milliseconds(ttl_ms);
    }
    store_lease(target.renew_lease(id, ttl), result);
  });
}

int quota_release_lease(quota_engine* engine, const char* lease, size_t lease_length,
                        int* was_held) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    const bool held = target.release_lease(lease_id(lease, lease_length));
    if (was_held != nullptr) *was_held = held ? 1 : 0;
  });
}

int quota_leases(quota_engine* engine, const char* limit, size_t limit_length, const char* owner,
                 size_t owner_length, quota_lease_fn callback, void* context, size_t* count) {
  return guarded([&] {
    quota::Engine& target = engine_of(engine);
    if (callback == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "callback is NULL: pass the function to call with each lease");
    }
    const std::string_view name = text(limit, limit_length, "the limit name");
    const std::vector<quota::LeaseInfo> rows =
        owner == nullptr && owner_length == 0
            ? target.leases(name)
            : target.leases(name, text(owner, owner_length, "the owner"));
    if (count != nullptr) *count = rows.size();
    for (const quota::LeaseInfo& row : rows) {
      const quota_lease_info view{row.lease.data(),  row.lease.size(), row.owner.data(),
                                  row.owner.size(),  row.cost,         row.expires_at_ms,
                                  row.acquired_at_ms};
      callback(context, &view);
    }
  });
}

int quota_watch_usage(quota_engine* engine, const char* limit, size_t limit_length,
                      const char* owner, size_t owner_length, quota_watch_fn callback,
                      void* context, quota_watch** watch) {
  return guarded([&] {
    if (watch == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "watch is NULL: pass the address of a quota_watch* to receive the watch");
    }
    *watch = nullptr;
    quota::Engine& target = engine_of(engine);
    if (callback == nullptr) {
      throw Error(ErrorCode::invalid_argument,
                  "callback is NULL: pass the function to call with the owner's usage");
    }
    const auto deliver = [callback, context](const quota::Usage& usage) {
      const quota_usage view = view_of(usage);
      callback(context, &view);
    };
    const std::string_view name = text(limit, limit_length, "the limit name");
    auto made = std::make_unique<quota_watch>(
        quota_watch{owner == nullptr && owner_length == 0
                        ? target.watch(name, deliver)
                        : target.watch(name, text(owner, owner_length, "the owner"), deliver)});
    *watch = made.release();
  });
}

void quota_watch_end(quota_watch* watch) { delete watch; }

const char* quota_last_error(void) { return last_error.message; }

const char* quota_status_name(int status) {
  switch (status) {
    case QUOTA_OK:
      return "ok";
    case QUOTA_ERROR_INVALID_ARGUMENT:
      return "invalid_argument";
    case QUOTA_ERROR_UNKNOWN_LIMIT:
      return "unknown_limit";
    case QUOTA_ERROR_BUSY:
      return "busy";
    case QUOTA_ERROR_SCHEMA_TOO_NEW:
      return "schema_too_new";
    case QUOTA_ERROR_NOT_MIGRATED:
      return "not_migrated";
    case QUOTA_ERROR_CHECKSUM_MISMATCH:
      return "checksum_mismatch";
    case QUOTA_ERROR_NOT_A_DATABASE:
      return "not_a_database";
    case QUOTA_ERROR_IO:
      return "io";
    case QUOTA_ERROR_OUT_OF_MEMORY:
      return "out_of_memory";
    case QUOTA_ERROR_INTERNAL:
      return "internal";
    case QUOTA_ERROR_PERMISSION_DENIED:
      return "permission_denied";
    case QUOTA_ERROR_IDEMPOTENCY_CONFLICT:
      return "idempotency_conflict";
    default:
      return "?";
  }
}

const char* quota_reason_name(int reason) {
  switch (reason) {
    case QUOTA_REASON_OK:
      return "ok";
    case QUOTA_REASON_RATE_LIMITED:
      return "rate_limited";
    case QUOTA_REASON_COST_EXCEEDS_CAPACITY:
      return "cost_exceeds_capacity";
    case QUOTA_REASON_OWNER_DENIED:
      return "owner_denied";
    case QUOTA_REASON_HOOK_DENIED:
      return "hook_denied";
    case QUOTA_REASON_STORE_UNAVAILABLE:
      return "store_unavailable";
    case QUOTA_REASON_BLOCKED:
      return "blocked";
    case QUOTA_REASON_LEASE_EXPIRED:
      return "lease_expired";
    default:
      return "?";
  }
}

const char* quota_algorithm_name(int algorithm) {
  switch (algorithm) {
    case QUOTA_SLIDING_LOG:
      return "sliding_log";
    case QUOTA_FIXED_WINDOW:
      return "fixed_window";
    case QUOTA_SLIDING_WINDOW:
      return "sliding_window";
    case QUOTA_TOKEN_BUCKET:
      return "token_bucket";
    case QUOTA_CONCURRENCY:
      return "concurrency";
    default:
      return "?";
  }
}

}  // extern "C"
