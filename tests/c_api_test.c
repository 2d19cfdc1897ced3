/* The C API (include/quota/quota.h), from C: compiled as C11 and linked like a C user would.
 *
 *   c_api_test SCRATCH_DIR
 *
 * Files go to a new folder inside SCRATCH_DIR, removed at the end.
 * Each check prints nothing when it holds; the first failure prints its line and the library's
 * last error, and the program exits 1. Time is a fixed clock that the test moves. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quota/quota.h"

static int failures = 0;

#define CHECK(condition)                                                                    \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: \"%s\")\n", __FILE__, __LINE__, \
              #condition, quota_last_error());                                              \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)

/* Strings with their lengths, as every call takes them. */
#define TEXT(literal) literal, sizeof(literal) - 1

static int64_t now_ms = 1700000000000;
static int64_t fixed_clock(void* context) { return *(const int64_t*)context; }

static char scratch[4096];
static const char* path_in_scratch(const char* name) {
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", scratch, name);
  return path;
}

static quota_engine* open_engine(const char* name) {
  quota_options options;
  quota_options_init(&options);
  options.clock = fixed_clock;
  options.clock_context = &now_ms;
  quota_engine* engine = NULL;
  const char* path = path_in_scratch(name);
  CHECK(quota_open(path, strlen(path), &options, &engine) == QUOTA_OK);
  CHECK(engine != NULL);
  return engine;
}

static void test_names_and_defaults(void) {
  CHECK(strcmp(quota_version(), QUOTA_TEST_VERSION) == 0);
  quota_options options;
  memset(&options, 0xAB, sizeof options);
  quota_options_init(&options);
  CHECK(options.size == sizeof(quota_options));
  CHECK(options.create == 1 && options.migrate == 1 && options.synchronous_full == 0);
  CHECK(options.busy_timeout_ms == 5000);
  CHECK(options.group_commit == 1);
  CHECK(options.clock == NULL && options.clock_context == NULL);
  CHECK(strcmp(quota_status_name(QUOTA_OK), "ok") == 0);
  CHECK(strcmp(quota_status_name(QUOTA_ERROR_UNKNOWN_LIMIT), "unknown_limit") == 0);
  CHECK(strcmp(quota_status_name(QUOTA_ERROR_OUT_OF_MEMORY), "out_of_memory") == 0);
  CHECK(strcmp(quota_status_name(99), "?") == 0);
  CHECK(strcmp(quota_reason_name(QUOTA_REASON_COST_EXCEEDS_CAPACITY), "cost_exceeds_capacity") ==
        0);
  CHECK(strcmp(quota_reason_name(QUOTA_REASON_BLOCKED), "blocked") == 0);
  CHECK(strcmp(quota_algorithm_name(QUOTA_TOKEN_BUCKET), "token_bucket") == 0);
  CHECK(strcmp(quota_algorithm_name(-1), "?") == 0);
}

static void test_operations(void) {
  quota_engine* engine = open_engine("operations.db");
  quota_result r;
  CHECK(quota_define(engine, TEXT("send"), QUOTA_SLIDING_LOG, 2, 1000, QUOTA_NO_BURST) == QUOTA_OK);
  CHECK(strcmp(quota_last_error(), "") == 0);

  CHECK(quota_consume(engine, TEXT("send"), TEXT("user123"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.reason == QUOTA_REASON_OK && r.remaining == 1);
  CHECK(r.retry_after_ms == 0 && r.reset_at_ms == now_ms + 1000 && r.denied == 0);

  /* An owner is its bytes: only the first 7 of this buffer count, and no NUL is needed. */
  const char owner_buffer[] = {'u', 's', 'e', 'r', '1', '2', '3', 'X', 'Y'};
  CHECK(quota_consume(engine, TEXT("send"), owner_buffer, 7, 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 0);

  /* A denial is an answer, not an error. */
  now_ms += 10;
  CHECK(quota_consume(engine, TEXT("send"), TEXT("user123"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_RATE_LIMITED && r.remaining == 0);
  CHECK(r.retry_after_ms == 990 && r.denied == 1);

  /* check never writes: the same answer twice, and the denied counter stays. */
  quota_result first, second;
  CHECK(quota_check(engine, TEXT("send"), TEXT("user123"), 1, &first) == QUOTA_OK);
  CHECK(quota_check(engine, TEXT("send"), TEXT("user123"), 1, &second) == QUOTA_OK);
  CHECK(first.allowed == 0 && second.allowed == 0 && first.denied == 1 && second.denied == 1);
  CHECK(first.retry_after_ms == second.retry_after_ms);

  /* retry_after_ms is exact: one ms early is still denied, on time is allowed. */
  now_ms += 989;
  CHECK(quota_consume(engine, TEXT("send"), TEXT("user123"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.retry_after_ms == 1);
  now_ms += 1;
  CHECK(quota_consume(engine, TEXT("send"), TEXT("user123"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 1); /* both earlier events expired together */

  /* A cost above the capacity can never succeed. */
  CHECK(quota_consume(engine, TEXT("send"), TEXT("other"), 3, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_COST_EXCEEDS_CAPACITY);
  CHECK(r.retry_after_ms == -1);

  /* record goes beyond the limit; reset forgets it all. */
  CHECK(quota_record(engine, TEXT("send"), TEXT("other"), 5, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.remaining == 0);
  CHECK(quota_reset(engine, TEXT("send"), TEXT("other"), &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 2 && r.retry_after_ms == 0);
  CHECK(r.reset_at_ms == now_ms && r.denied == 0);

  /* The result may be left out. */
  CHECK(quota_consume(engine, TEXT("send"), TEXT("other"), 1, NULL) == QUOTA_OK);
  CHECK(quota_check(engine, TEXT("send"), TEXT("other"), 1, &r) == QUOTA_OK);
  CHECK(r.remaining == 1);

  /* UTF-8 owners. */
  CHECK(quota_consume(engine, TEXT("send"), TEXT("\303\2743"), 1, &r) == QUOTA_OK); /* "ü3" */
  CHECK(r.allowed == 1);

  /* A token bucket with a burst above its rate. */
  CHECK(quota_define(engine, TEXT("bucket"), QUOTA_TOKEN_BUCKET, 1, 1000, 3) == QUOTA_OK);
  for (int i = 0; i < 3; ++i) {
    CHECK(quota_consume(engine, TEXT("bucket"), TEXT("u"), 1, &r) == QUOTA_OK);
    CHECK(r.allowed == 1 && r.remaining == 2 - i);
  }
  CHECK(quota_consume(engine, TEXT("bucket"), TEXT("u"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.retry_after_ms == 1000);

  int removed = -1;
  CHECK(quota_remove(engine, TEXT("bucket"), &removed) == QUOTA_OK && removed == 1);
  CHECK(quota_remove(engine, TEXT("bucket"), &removed) == QUOTA_OK && removed == 0);
  CHECK(quota_remove(engine, TEXT("bucket"), NULL) == QUOTA_OK);
  quota_close(engine);

  /* The state is in the file: a second engine sees user123's one event still counting. */
  engine = open_engine("operations.db");
  CHECK(quota_check(engine, TEXT("send"), TEXT("user123"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 1 && r.reset_at_ms == now_ms + 1000);
  quota_close(engine);
}

static void test_refund_and_consume_all(void) {
  quota_engine* engine = open_engine("policies.db");
  quota_result r;
  size_t deciding = 99;
  CHECK(quota_define(engine, TEXT("minute"), QUOTA_FIXED_WINDOW, 2, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  CHECK(quota_define(engine, TEXT("hour"), QUOTA_SLIDING_LOG, 5, 3600000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  const char* limits[] = {"hour", "minute"};
  const size_t lengths[] = {4, 6};
  CHECK(quota_consume_all(engine, limits, lengths, 2, TEXT("u"), 2, &r, &deciding) == QUOTA_OK);
  CHECK(r.allowed == 1 && deciding == 1 && r.remaining == 0);
  CHECK(quota_consume_all(engine, limits, lengths, 2, TEXT("u"), 1, &r, &deciding) == QUOTA_OK);
  CHECK(r.allowed == 0 && deciding == 1 && r.denied == 1);
  CHECK(quota_check(engine, TEXT("hour"), TEXT("u"), 1, &r) == QUOTA_OK);
  CHECK(r.remaining == 3); /* the denied consume_all recorded nothing on hour */
  CHECK(quota_refund(engine, TEXT("minute"), TEXT("u"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 1);
  CHECK(quota_consume_all(engine, NULL, NULL, 0, TEXT("u"), 1, &r, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_refund(engine, TEXT("nope"), TEXT("u"), 1, &r) == QUOTA_ERROR_UNKNOWN_LIMIT);

  /* acquire on the fixed clock: a wait past the deadline, or a cancelled one, returns the
   * denial at once. */
  CHECK(quota_consume(engine, TEXT("minute"), TEXT("u"), 1, &r) == QUOTA_OK && r.allowed == 1);
  CHECK(quota_acquire(engine, TEXT("minute"), TEXT("u"), 1, 0, NULL, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_RATE_LIMITED && r.retry_after_ms > 0);
  quota_cancel* cancel = NULL;
  CHECK(quota_cancel_new(&cancel) == QUOTA_OK && cancel != NULL);
  CHECK(quota_cancel_request(cancel) == QUOTA_OK);
  CHECK(quota_acquire(engine, TEXT("minute"), TEXT("u"), 1, 3600000, cancel, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.retry_after_ms > 0);
  quota_cancel_free(cancel);
  quota_cancel_free(NULL);
  CHECK(quota_cancel_new(NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_cancel_request(NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_acquire(engine, TEXT("minute"), TEXT("u"), 1, -1, NULL, &r) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  quota_close(engine);
}

/* Lockouts and one owner across every limit from C: quota_set_block, quota_owner_usage. */
struct owner_rows {
  int calls;
  char limits[64];
  int64_t used_sum;
  int64_t blocked_until_ms;
};

static void on_owner_row(void* context, const quota_usage* usage) {
  struct owner_rows* rows = (struct owner_rows*)context;
  rows->calls++;
  strncat(rows->limits, usage->limit, usage->limit_length);
  strcat(rows->limits, ",");
  rows->used_sum += usage->used;
  if (usage->blocked_until_ms != 0) rows->blocked_until_ms = usage->blocked_until_ms;
}

static void test_lockout_and_owner_view(void) {
  quota_engine* engine = open_engine("lockout.db");
  quota_result r;
  CHECK(quota_define(engine, TEXT("login"), QUOTA_FIXED_WINDOW, 2, 900000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  CHECK(quota_define(engine, TEXT("api"), QUOTA_SLIDING_LOG, 10, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  /* Bad input changes nothing: the limit keeps no lockout. */
  CHECK(quota_set_block(engine, TEXT("login"), -1) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_set_block(engine, TEXT("login"), 366LL * 86400000 + 1) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_set_block(engine, TEXT("nope"), 1000) == QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(quota_consume(engine, TEXT("login"), TEXT("eve"), 2, &r) == QUOTA_OK && r.allowed == 1);
  CHECK(quota_consume(engine, TEXT("login"), TEXT("eve"), 1, &r) == QUOTA_OK);
  CHECK(r.reason == QUOTA_REASON_RATE_LIMITED); /* no block yet */
  CHECK(quota_reset(engine, TEXT("login"), TEXT("eve"), &r) == QUOTA_OK);

  CHECK(quota_set_block(engine, TEXT("login"), 3600000) == QUOTA_OK);
  CHECK(quota_consume(engine, TEXT("login"), TEXT("eve"), 2, &r) == QUOTA_OK && r.allowed == 1);
  CHECK(quota_consume(engine, TEXT("login"), TEXT("eve"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_RATE_LIMITED && r.retry_after_ms >= 3600000);
  CHECK(quota_check(engine, TEXT("login"), TEXT("eve"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_BLOCKED && r.retry_after_ms == 3600000);
  CHECK(quota_consume(engine, TEXT("api"), TEXT("eve"), 3, &r) == QUOTA_OK && r.allowed == 1);

  struct owner_rows rows = {0, "", 0, 0};
  size_t count = 99;
  CHECK(quota_owner_usage(engine, TEXT("eve"), on_owner_row, &rows, &count) == QUOTA_OK);
  CHECK(count == 2 && rows.calls == 2);
  CHECK(strcmp(rows.limits, "api,login,") == 0);
  CHECK(rows.used_sum == 5);
  CHECK(rows.blocked_until_ms == now_ms + 3600000);
  CHECK(quota_owner_usage(engine, TEXT("eve"), NULL, NULL, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  count = 99;
  CHECK(quota_owner_usage(engine, TEXT("nobody"), on_owner_row, &rows, &count) == QUOTA_OK);
  CHECK(count == 0);

  /* 0 lifts the lockout setting: the limit no longer blocks. */
  CHECK(quota_set_block(engine, TEXT("login"), 0) == QUOTA_OK);
  CHECK(quota_check(engine, TEXT("login"), TEXT("eve"), 1, &r) == QUOTA_OK);
  CHECK(r.reason == QUOTA_REASON_RATE_LIMITED);
  quota_close(engine);
}

/* Calendar periods from C: quota_define_calendar, quota_set_anchor, quota_remove_anchor. Every
 * instant below is worked out by hand from one count of days, written next to it:
 *   2026-01-01T00:00Z = 20454 days after 1970-01-01 (56 years of 365 days, plus the 14 leap
 *   days of 1972, 1976, ..., 2024) = 20454 x 86400000 = 1767225600000 ms, a Thursday
 *   (1970-01-01 was a Thursday and 20454 = 7 x 2922).
 * and "now" is 2026-01-31T12:00Z (a Saturday: 30 days after a Thursday, 30 = 4 x 7 + 2). */
#define HOUR_MS 3600000LL
#define DAY_MS 86400000LL
#define JAN_1_2026 1767225600000LL
#define JAN_31_2026 (JAN_1_2026 + 30 * DAY_MS) /* 2026-01-31T00:00Z */

/* Consumes 1 on a limit of maximum 1 twice: allowed, then denied. Both answers point at the
 * next window's start, `next`; the denial waits exactly until then. */
static void check_window_end(quota_engine* engine, const char* limit, size_t limit_length,
                             const char* owner, size_t owner_length, int64_t next) {
  quota_result r;
  CHECK(quota_consume(engine, limit, limit_length, owner, owner_length, 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 0 && r.reset_at_ms == next);
  CHECK(quota_consume(engine, limit, limit_length, owner, owner_length, 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_RATE_LIMITED);
  CHECK(r.retry_after_ms == next - now_ms && r.reset_at_ms == next);
}

static void test_calendar(void) {
  quota_engine* engine = open_engine("calendar.db");
  quota_result r;
  const int64_t saved_now = now_ms;
  now_ms = JAN_31_2026 + 12 * HOUR_MS; /* 2026-01-31T12:00Z = 1769860800000 */

  /* A month anchored on the 31st (2026-01-31T00:00Z itself), UTC: this window began on
   * 2026-01-31T00:00Z; February lacks a 31st, so the next begins on its last day,
   * 2026-02-28T00:00Z = 2026-01-01 + (31 + 27) days = 1767225600000 + 58 x 86400000
   * = 1772236800000: 27.5 days = 2376000000 ms after now. */
  const int64_t feb_28 = JAN_1_2026 + 58 * DAY_MS;
  CHECK(feb_28 == 1772236800000LL && feb_28 - now_ms == 2376000000LL);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, QUOTA_MONTH, 0, JAN_31_2026) == QUOTA_OK);
  CHECK(strcmp(quota_last_error(), "") == 0);
  for (int i = 0; i < 3; ++i) {
    CHECK(quota_consume(engine, TEXT("monthly"), TEXT("alice"), 1, &r) == QUOTA_OK);
    CHECK(r.allowed == 1 && r.remaining == 2 - i && r.reset_at_ms == feb_28);
  }
  CHECK(quota_consume(engine, TEXT("monthly"), TEXT("alice"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reason == QUOTA_REASON_RATE_LIMITED && r.remaining == 0);
  CHECK(r.retry_after_ms == 2376000000LL && r.reset_at_ms == feb_28 && r.denied == 1);
  /* One ms before the next window: still denied, 1 ms to wait. On time: a new window, which
   * ends on 2026-03-31T00:00Z (March has a 31st) = 2026-01-01 + (31 + 28 + 30) days
   * = 1767225600000 + 89 x 86400000 = 1774915200000. */
  now_ms = feb_28 - 1;
  CHECK(quota_consume(engine, TEXT("monthly"), TEXT("alice"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.retry_after_ms == 1);
  now_ms = feb_28;
  CHECK(quota_consume(engine, TEXT("monthly"), TEXT("alice"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 2 && r.reset_at_ms == 1774915200000LL);
  now_ms = JAN_31_2026 + 12 * HOUR_MS;

  /* The other units, each with maximum 1 and its own answer, so that every QUOTA_* calendar
   * number is seen to mean its own unit. */
  /* A day at +09:00: now is 21:00 there, the next day begins at 2026-02-01T00:00+09:00
   * = 2026-01-31T15:00Z = 1769817600000 + 15 x 3600000 = 1769871600000, 3 hours away. */
  CHECK(quota_define_calendar(engine, TEXT("daily_tokyo"), 1, QUOTA_DAY, 9 * 60, QUOTA_NO_ANCHOR) ==
        QUOTA_OK);
  check_window_end(engine, TEXT("daily_tokyo"), TEXT("alice"), JAN_31_2026 + 15 * HOUR_MS);
  CHECK(JAN_31_2026 + 15 * HOUR_MS == 1769871600000LL);
  /* An ISO week, UTC: now is a Saturday; the next week begins on Monday 2026-02-02T00:00Z
   * = 2026-01-01 + 32 days = 1767225600000 + 32 x 86400000 = 1769990400000, 1.5 days away. */
  CHECK(quota_define_calendar(engine, TEXT("weekly"), 1, QUOTA_WEEK, 0, QUOTA_NO_ANCHOR) ==
        QUOTA_OK);
  check_window_end(engine, TEXT("weekly"), TEXT("alice"), JAN_1_2026 + 32 * DAY_MS);
  CHECK(JAN_1_2026 + 32 * DAY_MS == 1769990400000LL);
  /* A year at -05:00: now is 2026-01-31T07:00-05:00; the next year begins on
   * 2027-01-01T00:00-05:00 = 2027-01-01T05:00Z = 1767225600000 + 365 x 86400000 + 5 x 3600000
   * = 1798779600000. */
  CHECK(quota_define_calendar(engine, TEXT("yearly"), 1, QUOTA_YEAR, -5 * 60, QUOTA_NO_ANCHOR) ==
        QUOTA_OK);
  check_window_end(engine, TEXT("yearly"), TEXT("alice"), 1798779600000LL);
  CHECK(JAN_1_2026 + 365 * DAY_MS + 5 * HOUR_MS == 1798779600000LL);

  /* An owner's own anchor beats the limit's: bob's months begin on the 15th, so his window
   * holding now began on 2026-01-15T00:00Z and the next begins on 2026-02-15T00:00Z
   * = 2026-01-01 + (31 + 14) days = 1767225600000 + 45 x 86400000 = 1771113600000. */
  const int64_t jan_15 = JAN_1_2026 + 14 * DAY_MS;
  CHECK(quota_set_anchor(engine, TEXT("monthly"), TEXT("bob"), jan_15) == QUOTA_OK);
  for (int i = 0; i < 3; ++i) {
    CHECK(quota_consume(engine, TEXT("monthly"), TEXT("bob"), 1, &r) == QUOTA_OK);
  }
  CHECK(quota_consume(engine, TEXT("monthly"), TEXT("bob"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 0 && r.reset_at_ms == 1771113600000LL);
  CHECK(r.retry_after_ms == 1771113600000LL - now_ms);
  CHECK(JAN_1_2026 + 45 * DAY_MS == 1771113600000LL);
  /* On every limit ("*"): carol's days at +09:00 begin at 10:00 there (the anchor
   * 2026-01-01T01:00Z is 10:00 at +09:00); now is 21:00 there, so the next begins at
   * 2026-02-01T10:00+09:00 = 2026-02-01T01:00Z = 1767225600000 + 31 x 86400000 + 3600000
   * = 1769907600000. */
  CHECK(quota_set_anchor(engine, TEXT("*"), TEXT("carol"), JAN_1_2026 + HOUR_MS) == QUOTA_OK);
  check_window_end(engine, TEXT("daily_tokyo"), TEXT("carol"), 1769907600000LL);
  CHECK(JAN_1_2026 + 31 * DAY_MS + HOUR_MS == 1769907600000LL);

  /* Removing reports whether there was one, as quota_remove does. */
  int removed = -1;
  CHECK(quota_remove_anchor(engine, TEXT("monthly"), TEXT("bob"), &removed) == QUOTA_OK);
  CHECK(removed == 1);
  CHECK(quota_remove_anchor(engine, TEXT("monthly"), TEXT("bob"), &removed) == QUOTA_OK);
  CHECK(removed == 0);
  CHECK(quota_remove_anchor(engine, TEXT("*"), TEXT("carol"), NULL) == QUOTA_OK);
  CHECK(quota_remove_anchor(engine, TEXT("*"), TEXT("carol"), &removed) == QUOTA_OK);
  CHECK(removed == 0);

  /* quota_set_block keeps the calendar (it redefines the limit as it is): alice's month
   * still ends on 2026-03-31 after a lockout is added (now is back in her February window). */
  now_ms = feb_28 + DAY_MS;
  CHECK(quota_set_block(engine, TEXT("monthly"), HOUR_MS) == QUOTA_OK);
  CHECK(quota_check(engine, TEXT("monthly"), TEXT("alice"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 2 && r.reset_at_ms == 1774915200000LL);
  now_ms = JAN_31_2026 + 12 * HOUR_MS;

  /* Bad input: QUOTA_ERROR_INVALID_ARGUMENT with a message, and nothing changed. */
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, 4, 0, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "QUOTA_MONTH") != NULL);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, -1, 0, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, QUOTA_MONTH, 841, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "utc_offset_minutes 841") != NULL);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, QUOTA_MONTH, -841, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, QUOTA_MONTH, 0, -2) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "QUOTA_NO_ANCHOR") != NULL);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 3, QUOTA_MONTH, 0, 253402300800001LL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "anchor_ms 253402300800001") != NULL);
  CHECK(quota_define_calendar(engine, TEXT("monthly"), 0, QUOTA_MONTH, 0, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define_calendar(engine, TEXT("bad name!"), 3, QUOTA_MONTH, 0, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define_calendar(NULL, TEXT("monthly"), 3, QUOTA_MONTH, 0, QUOTA_NO_ANCHOR) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  /* The bounds themselves are accepted (on a limit of their own). */
  CHECK(quota_define_calendar(engine, TEXT("edge"), 1, QUOTA_DAY, 840, 0) == QUOTA_OK);
  CHECK(quota_define_calendar(engine, TEXT("edge"), 1, QUOTA_DAY, -840, 253402300800000LL) ==
        QUOTA_OK);
  /* An anchor: out of range, on a limit without a calendar, on no limit, for no owner. */
  CHECK(quota_define(engine, TEXT("plain"), QUOTA_FIXED_WINDOW, 3, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  CHECK(quota_set_anchor(engine, TEXT("monthly"), TEXT("dave"), -1) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "anchor_ms -1") != NULL);
  CHECK(quota_set_anchor(engine, TEXT("monthly"), TEXT("dave"), 253402300800001LL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_set_anchor(engine, TEXT("plain"), TEXT("dave"), jan_15) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_last_error()[0] != '\0');
  CHECK(quota_set_anchor(engine, TEXT("nope"), TEXT("dave"), jan_15) == QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(quota_set_anchor(engine, TEXT("monthly"), "", 0, jan_15) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_set_anchor(engine, TEXT("monthly"), NULL, 4, jan_15) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_remove_anchor(engine, TEXT("monthly"), NULL, 4, &removed) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  /* None of it changed anything: dave has no anchor, and the limit is still a month of 3
   * anchored on the 31st, as a new owner's first window shows (on 2026-03-01T00:00Z, inside
   * the window from 2026-02-28 to 2026-03-31T00:00Z = 1774915200000). */
  removed = -1;
  CHECK(quota_remove_anchor(engine, TEXT("monthly"), TEXT("dave"), &removed) == QUOTA_OK);
  CHECK(removed == 0);
  now_ms = feb_28 + DAY_MS;
  CHECK(quota_consume(engine, TEXT("monthly"), TEXT("erin"), 1, &r) == QUOTA_OK);
  CHECK(r.allowed == 1 && r.remaining == 2 && r.reset_at_ms == 1774915200000LL);

  quota_close(engine);
  now_ms = saved_now;
}

static void test_batch_calls(void) {
  quota_engine* engine = open_engine("batch.db");
  quota_result results[4];
  CHECK(quota_define(engine, TEXT("minute"), QUOTA_FIXED_WINDOW, 2, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  const quota_request requests[] = {{TEXT("minute"), TEXT("u"), 1},
                                    {TEXT("minute"), TEXT("v"), 2},
                                    {TEXT("minute"), TEXT("u"), 1},
                                    {TEXT("minute"), TEXT("u"), 1}};
  CHECK(quota_consume_many(engine, requests, 4, results) == QUOTA_OK);
  CHECK(results[0].allowed == 1 && results[0].remaining == 1);
  CHECK(results[1].allowed == 1 && results[1].remaining == 0);
  CHECK(results[2].allowed == 1 && results[2].remaining == 0);
  CHECK(results[3].allowed == 0 && results[3].denied == 1);
  CHECK(quota_check_many(engine, requests, 2, results) == QUOTA_OK);
  CHECK(results[0].allowed == 0 && results[1].allowed == 0);
  CHECK(quota_record_many(engine, requests + 1, 1, NULL) == QUOTA_OK);
  CHECK(quota_check(engine, TEXT("minute"), TEXT("v"), 1, &results[0]) == QUOTA_OK);
  CHECK(results[0].remaining == 0 && results[0].allowed == 0);
  CHECK(quota_consume_many(engine, NULL, 0, NULL) == QUOTA_OK);
  /* Bad input: refused before anything runs, the results untouched. */
  results[0].remaining = 77;
  CHECK(quota_consume_many(engine, NULL, 2, results) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "NULL") != NULL);
  const quota_request bad[] = {{TEXT("minute"), TEXT("w"), 1}, {TEXT("minute"), TEXT("w"), 0}};
  CHECK(quota_consume_many(engine, bad, 2, results) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "request 1") != NULL);
  const quota_request null_owner[] = {{TEXT("minute"), NULL, 3, 1}};
  CHECK(quota_consume_many(engine, null_owner, 1, results) == QUOTA_ERROR_INVALID_ARGUMENT);
  const quota_request unknown[] = {{TEXT("minute"), TEXT("w"), 1}, {TEXT("nope"), TEXT("w"), 1}};
  CHECK(quota_consume_many(engine, unknown, 2, results) == QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(results[0].remaining == 77);
  CHECK(quota_check(engine, TEXT("minute"), TEXT("w"), 1, &results[0]) == QUOTA_OK);
  CHECK(results[0].remaining == 2); /* nothing of the failed calls was kept */
  quota_close(engine);
}

static void test_errors(void) {
  quota_engine* engine = open_engine("errors.db");
  quota_result r = {7, 7, 7, 7, 7, 7};
  CHECK(quota_define(engine, TEXT("send"), QUOTA_FIXED_WINDOW, 5, 1000, QUOTA_NO_BURST) ==
        QUOTA_OK);

  CHECK(quota_consume(engine, TEXT("nope"), TEXT("u"), 1, &r) == QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(strstr(quota_last_error(), "unknown limit") != NULL);
  CHECK(r.allowed == 7 && r.remaining == 7); /* a failed call leaves the result alone */
  CHECK(quota_check(engine, TEXT("send"), TEXT("u"), 1, &r) == QUOTA_OK);
  CHECK(strcmp(quota_last_error(), "") == 0); /* success clears the message */

  CHECK(quota_consume(engine, TEXT("send"), "", 0, 1, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_consume(engine, TEXT("send"), NULL, 0, 1, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_consume(engine, TEXT("send"), NULL, 3, 1, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "NULL") != NULL);
  CHECK(quota_consume(engine, TEXT("send"), TEXT("a\0b"), 1, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_consume(engine, TEXT("send"), TEXT("\xff"), 1, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_consume(engine, TEXT("send"), TEXT("u"), 0, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_consume(NULL, TEXT("send"), TEXT("u"), 1, &r) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(quota_last_error(), "engine is NULL") != NULL);

  CHECK(quota_define(engine, TEXT("bad"), 42, 5, 1000, QUOTA_NO_BURST) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define(engine, TEXT("bad"), QUOTA_SLIDING_LOG, 5, 1000, 10) ==
        QUOTA_ERROR_INVALID_ARGUMENT); /* a burst only for a token bucket */
  CHECK(quota_define(engine, TEXT("bad name!"), QUOTA_SLIDING_LOG, 5, 1000, QUOTA_NO_BURST) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define(engine, TEXT("bad"), QUOTA_SLIDING_LOG, 0, 1000, QUOTA_NO_BURST) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  int removed = -1;
  CHECK(quota_remove(engine, TEXT("bad"), &removed) == QUOTA_OK && removed == 0);
  quota_close(engine);
  quota_close(NULL);

  /* Opening. */
  quota_engine* opened = (quota_engine*)&r; /* overwritten with NULL on failure */
  const char* text_file = path_in_scratch("not-a-database.txt");
  FILE* file = fopen(text_file, "w");
  CHECK(file != NULL);
  if (file) {
    fputs("this is not a SQLite database, but it is long enough to have a header...\n", file);
    fclose(file);
  }
  CHECK(quota_open(text_file, strlen(text_file), NULL, &opened) == QUOTA_ERROR_NOT_A_DATABASE);
  CHECK(opened == NULL);

  quota_options options;
  quota_options_init(&options);
  options.create = 0;
  const char* missing = path_in_scratch("missing.db");
  CHECK(quota_open(missing, strlen(missing), &options, &opened) == QUOTA_ERROR_IO);
  CHECK(strstr(quota_last_error(), "does not exist") != NULL);
  quota_options_init(&options);
  options.busy_timeout_ms = -1;
  CHECK(quota_open(TEXT(":memory:"), &options, &opened) == QUOTA_ERROR_INVALID_ARGUMENT);
  options.size = 0;
  CHECK(quota_open(TEXT(":memory:"), &options, &opened) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_open(TEXT(":memory:"), NULL, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_open(NULL, 0, NULL, &opened) == QUOTA_ERROR_INVALID_ARGUMENT);

  /* A caller built against an older, shorter quota_options: the fields it lacks (here the
   * clock) keep their defaults. */
  quota_options_init(&options);
  options.clock = fixed_clock; /* beyond `size`: must be ignored */
  options.clock_context = NULL;
  options.size = offsetof(quota_options, clock);
  CHECK(quota_open(TEXT(":memory:"), &options, &opened) == QUOTA_OK);
  CHECK(quota_define(opened, TEXT("s"), QUOTA_SLIDING_LOG, 1, 1000, QUOTA_NO_BURST) == QUOTA_OK);
  CHECK(quota_consume(opened, TEXT("s"), TEXT("u"), 1, &r) == QUOTA_OK && r.allowed == 1);
  quota_close(opened);
}

/* The last error belongs to the thread that made the call. */
static void* fail_in_thread(void* unused) {
  (void)unused;
  quota_result r;
  const int status = quota_consume(NULL, TEXT("x"), TEXT("y"), 1, &r);
  return (void*)(intptr_t)(status == QUOTA_ERROR_INVALID_ARGUMENT &&
                           strstr(quota_last_error(), "engine is NULL") != NULL);
}

static void test_threads(void) {
  quota_engine* engine = NULL;
  CHECK(quota_open(TEXT(":memory:"), NULL, &engine) == QUOTA_OK);
  CHECK(quota_consume(engine, TEXT("nope"), TEXT("u"), 1, NULL) == QUOTA_ERROR_UNKNOWN_LIMIT);
  pthread_t thread;
  void* thread_ok = NULL;
  CHECK(pthread_create(&thread, NULL, fail_in_thread, NULL) == 0);
  CHECK(pthread_join(thread, &thread_ok) == 0);
  CHECK(thread_ok == (void*)1);
  CHECK(strstr(quota_last_error(), "unknown limit") != NULL);
  quota_close(engine);
}

/* What a watch's callback saw, for the test to wait on. */
struct seen {
  pthread_mutex_t mutex;
  pthread_cond_t changed;
  int calls;
  int64_t used;
  int64_t remaining;
  char owner[16];
};

static void on_usage(void* context, const quota_usage* usage) {
  struct seen* seen = context;
  pthread_mutex_lock(&seen->mutex);
  ++seen->calls;
  seen->used = usage->used;
  seen->remaining = usage->remaining;
  const size_t length =
      usage->owner_length < sizeof seen->owner - 1 ? usage->owner_length : sizeof seen->owner - 1;
  memcpy(seen->owner, usage->owner, length);
  seen->owner[length] = '\0';
  pthread_cond_broadcast(&seen->changed);
  pthread_mutex_unlock(&seen->mutex);
}

/* Waits (up to 10 s) until the callback has reported `used` for `owner`. */
static int wait_used(struct seen* seen, const char* owner, int64_t used) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&seen->mutex);
  while (!(seen->calls > 0 && seen->used == used && strcmp(seen->owner, owner) == 0)) {
    if (pthread_cond_timedwait(&seen->changed, &seen->mutex, &until) != 0) break;
  }
  const int found = seen->calls > 0 && seen->used == used && strcmp(seen->owner, owner) == 0;
  pthread_mutex_unlock(&seen->mutex);
  return found;
}

static void test_watch(void) {
  quota_engine* engine = open_engine("watch.db");
  CHECK(quota_define(engine, TEXT("send"), QUOTA_SLIDING_LOG, 5, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  struct seen one = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, -1, ""};
  struct seen every = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, -1, ""};
  quota_watch* watch = NULL;
  CHECK(quota_watch_usage(engine, TEXT("send"), TEXT("u1"), on_usage, &one, &watch) == QUOTA_OK);
  CHECK(watch != NULL);
  quota_watch* all = NULL;
  CHECK(quota_watch_usage(engine, TEXT("send"), NULL, 0, on_usage, &every, &all) == QUOTA_OK);
  CHECK(wait_used(&one, "u1", 0));
  CHECK(quota_consume(engine, TEXT("send"), TEXT("u1"), 2, NULL) == QUOTA_OK);
  CHECK(wait_used(&one, "u1", 2));
  CHECK(one.remaining == 3);
  CHECK(wait_used(&every, "u1", 2));
  CHECK(quota_consume(engine, TEXT("send"), TEXT("u2"), 1, NULL) == QUOTA_OK);
  CHECK(wait_used(&every, "u2", 1));
  quota_watch_end(watch);
  const int calls = one.calls;
  CHECK(quota_consume(engine, TEXT("send"), TEXT("u1"), 1, NULL) == QUOTA_OK);
  CHECK(wait_used(&every, "u1", 3));
  CHECK(one.calls == calls); /* ended: no more calls */
  quota_watch_end(NULL);

  quota_watch* bad = (quota_watch*)&calls;
  CHECK(quota_watch_usage(engine, TEXT("send"), TEXT("u1"), NULL, NULL, &bad) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(bad == NULL);
  CHECK(strstr(quota_last_error(), "callback is NULL") != NULL);
  CHECK(quota_watch_usage(engine, TEXT("nope"), TEXT("u1"), on_usage, &one, &bad) ==
        QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(quota_watch_usage(engine, TEXT("send"), TEXT("u1"), on_usage, &one, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  quota_close(engine);
  quota_watch_end(all); /* after its engine: allowed */
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_api_test SCRATCH_DIR\n");
    return 2;
  }
  snprintf(scratch, sizeof scratch, "%s/c-api-XXXXXX", argv[1]);
  if (mkdtemp(scratch) == NULL) {
    perror(scratch);
    return 2;
  }
  test_names_and_defaults();
  test_operations();
  test_refund_and_consume_all();
  test_batch_calls();
  test_lockout_and_owner_view();
  test_calendar();
  test_errors();
  test_threads();
  test_watch();

  static const char* const files[] = {
      "operations.db",   "operations.db-wal", "operations.db-shm", "errors.db",
      "errors.db-wal",   "errors.db-shm",     "policies.db",       "policies.db-wal",
      "policies.db-shm", "batch.db",          "batch.db-wal",      "batch.db-shm",
      "lockout.db",      "lockout.db-wal",    "lockout.db-shm",    "watch.db",
      "watch.db-wal",    "watch.db-shm",      "calendar.db",       "calendar.db-wal",
      "calendar.db-shm", "not-a-database.txt"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; ++i) unlink(path_in_scratch(files[i]));
  CHECK(rmdir(scratch) == 0);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
