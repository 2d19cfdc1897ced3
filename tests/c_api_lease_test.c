/* The C API's concurrency leases (quota_acquire_lease, quota_acquire_lease_keyed,
 * quota_renew_lease, quota_release_lease, quota_leases, and the calls that answer the leases
 * they take: quota_consume_with_lease, quota_record_with_lease, quota_consume_all_leasing,
 * quota_acquire_all_leasing), from C: compiled as C11 and linked like a
 * C user would.
 *
 *   c_api_lease_test SCRATCH_DIR
 *
 * Files go to a new folder inside SCRATCH_DIR, removed at the end. Each check prints nothing
 * when it holds; a failure prints its line and the library's last error, and the program exits
 * 1. Time is a fixed clock that the test moves. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The message of the last failure contains `words`. */
#define SAYS(words) (strstr(quota_last_error(), words) != NULL)

static const int64_t start_ms = 1700000000000;
static int64_t now_ms = 1700000000000;
static int64_t fixed_clock(void* context) { return *(const int64_t*)context; }

static char scratch[4096];
static char database[4200];

static quota_engine* open_engine(void) {
  quota_options options;
  quota_options_init(&options);
  options.clock = fixed_clock;
  options.clock_context = &now_ms;
  quota_engine* engine = NULL;
  CHECK(quota_open(database, strlen(database), &options, &engine) == QUOTA_OK);
  CHECK(engine != NULL);
  return engine;
}

/* 32 lowercase or uppercase hex digits. */
static int is_lease_id(const char* id) {
  if (strlen(id) != QUOTA_LEASE_ID_LENGTH) return 0;
  for (const char* c = id; *c; ++c) {
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || (*c >= 'A' && *c <= 'F'))) {
      return 0;
    }
  }
  return 1;
}

/* What quota_leases reported. */
struct listed {
  int calls;
  char ids[4][QUOTA_LEASE_ID_LENGTH + 1];
  char owners[4][8];
  int64_t costs[4];
  int64_t expiries[4];
  int64_t acquired[4];
};

static void on_lease(void* context, const quota_lease_info* lease) {
  struct listed* listed = context;
  if (listed->calls < 4 && lease->lease_length == QUOTA_LEASE_ID_LENGTH &&
      lease->owner_length < sizeof listed->owners[0]) {
    memcpy(listed->ids[listed->calls], lease->lease, lease->lease_length);
    listed->ids[listed->calls][lease->lease_length] = '\0';
    memcpy(listed->owners[listed->calls], lease->owner, lease->owner_length);
    listed->owners[listed->calls][lease->owner_length] = '\0';
    listed->costs[listed->calls] = lease->cost;
    listed->expiries[listed->calls] = lease->expires_at_ms;
    listed->acquired[listed->calls] = lease->acquired_at_ms;
  }
  ++listed->calls;
}

static size_t count_leases(quota_engine* engine) {
  struct listed listed;
  memset(&listed, 0, sizeof listed);
  size_t count = 99;
  CHECK(quota_leases(engine, TEXT("uploads"), NULL, 0, on_lease, &listed, &count) == QUOTA_OK);
  CHECK(count == (size_t)listed.calls);
  return count;
}

static void test_names_and_definition(quota_engine* engine) {
  CHECK(strcmp(quota_algorithm_name(QUOTA_CONCURRENCY), "concurrency") == 0);
  CHECK(strcmp(quota_reason_name(QUOTA_REASON_LEASE_EXPIRED), "lease_expired") == 0);
  quota_limit stored;
  CHECK(quota_ensure(engine, TEXT("uploads"), QUOTA_CONCURRENCY, 2, 60000, QUOTA_NO_BURST,
                     &stored) == QUOTA_OK);
  CHECK(stored.algorithm == QUOTA_CONCURRENCY && stored.maximum == 2 && stored.period_ms == 60000 &&
        stored.burst == QUOTA_NO_BURST);
  CHECK(quota_define(engine, TEXT("send"), QUOTA_SLIDING_LOG, 5, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);

  /* A concurrency limit takes no burst, and a TTL of 1 s to 1 day. */
  CHECK(quota_define(engine, TEXT("bad"), QUOTA_CONCURRENCY, 2, 60000, 3) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define(engine, TEXT("bad"), QUOTA_CONCURRENCY, 2, 999, QUOTA_NO_BURST) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_define(engine, TEXT("bad"), 5, 2, 60000, QUOTA_NO_BURST) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("QUOTA_CONCURRENCY"));
  int removed = 1;
  CHECK(quota_remove(engine, TEXT("bad"), &removed) == QUOTA_OK && removed == 0);
}

static void test_acquire_renew_release(quota_engine* engine) {
  quota_lease_result a, b, c;
  memset(&a, 0x5A, sizeof a);
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &a) == QUOTA_OK);
  CHECK(a.result.allowed == 1 && a.result.reason == QUOTA_REASON_OK);
  CHECK(a.result.remaining == 1 && a.result.retry_after_ms == 0);
  CHECK(is_lease_id(a.lease));
  CHECK(a.expires_at_ms == start_ms + 60000 && a.result.reset_at_ms == start_ms + 60000);
  CHECK(a.replayed == 0);

  now_ms = start_ms + 1000;
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &b) == QUOTA_OK);
  CHECK(b.result.allowed == 1 && b.result.remaining == 0 && is_lease_id(b.lease));
  CHECK(strcmp(a.lease, b.lease) != 0);
  CHECK(b.expires_at_ms == start_ms + 61000);

  /* Full: denied until the first lease expires, and no lease taken. */
  now_ms = start_ms + 2000;
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &c) == QUOTA_OK);
  CHECK(c.result.allowed == 0 && c.result.reason == QUOTA_REASON_RATE_LIMITED);
  CHECK(c.result.retry_after_ms == 58000 && c.result.denied == 1);
  CHECK(c.lease[0] == '\0' && c.expires_at_ms == 0);
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 3, &c) == QUOTA_OK);
  CHECK(c.result.allowed == 0 && c.result.reason == QUOTA_REASON_COST_EXCEEDS_CAPACITY);
  CHECK(c.result.retry_after_ms == -1);
  /* Another owner has its own capacity. */
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u2"), 2, &c) == QUOTA_OK);
  CHECK(c.result.allowed == 1 && c.result.remaining == 0 && is_lease_id(c.lease));

  /* The list: every owner's, then one owner's. */
  struct listed listed;
  memset(&listed, 0, sizeof listed);
  size_t count = 0;
  CHECK(quota_leases(engine, TEXT("uploads"), NULL, 0, on_lease, &listed, &count) == QUOTA_OK);
  CHECK(count == 3 && listed.calls == 3);
  CHECK(strcmp(listed.owners[0], "u1") == 0 && strcmp(listed.ids[0], a.lease) == 0);
  CHECK(listed.costs[0] == 1 && listed.expiries[0] == start_ms + 60000 &&
        listed.acquired[0] == start_ms);
  CHECK(strcmp(listed.ids[1], b.lease) == 0 && listed.acquired[1] == start_ms + 1000);
  CHECK(strcmp(listed.owners[2], "u2") == 0 && listed.costs[2] == 2);
  memset(&listed, 0, sizeof listed);
  CHECK(quota_leases(engine, TEXT("uploads"), TEXT("u2"), on_lease, &listed, NULL) == QUOTA_OK);
  CHECK(listed.calls == 1 && strcmp(listed.ids[0], c.lease) == 0);
  memset(&listed, 0, sizeof listed);
  CHECK(quota_leases(engine, TEXT("uploads"), TEXT("nobody"), on_lease, &listed, &count) ==
        QUOTA_OK);
  CHECK(count == 0 && listed.calls == 0);

  /* Renewal: the limit's TTL (0), then one of the call's own. */
  quota_lease_result renewed;
  now_ms = start_ms + 10000;
  CHECK(quota_renew_lease(engine, a.lease, strlen(a.lease), 0, &renewed) == QUOTA_OK);
  CHECK(renewed.result.allowed == 1 && strcmp(renewed.lease, a.lease) == 0);
  CHECK(renewed.expires_at_ms == start_ms + 70000);
  CHECK(renewed.result.remaining == 0 && renewed.result.reset_at_ms == start_ms + 70000);
  CHECK(quota_renew_lease(engine, a.lease, strlen(a.lease), 5000, &renewed) == QUOTA_OK);
  CHECK(renewed.result.allowed == 1 && renewed.expires_at_ms == start_ms + 15000);
  CHECK(quota_renew_lease(engine, a.lease, strlen(a.lease), 0, NULL) == QUOTA_OK);

  /* Release frees the units at once; twice is harmless. */
  int was_held = -1;
  CHECK(quota_release_lease(engine, a.lease, strlen(a.lease), &was_held) == QUOTA_OK);
  CHECK(was_held == 1);
  CHECK(quota_release_lease(engine, a.lease, strlen(a.lease), &was_held) == QUOTA_OK);
  CHECK(was_held == 0);
  CHECK(quota_release_lease(engine, a.lease, strlen(a.lease), NULL) == QUOTA_OK);
  CHECK(quota_renew_lease(engine, a.lease, strlen(a.lease), 0, &renewed) == QUOTA_OK);
  CHECK(renewed.result.allowed == 0 && renewed.result.reason == QUOTA_REASON_LEASE_EXPIRED);
  CHECK(renewed.result.retry_after_ms == -1 && renewed.lease[0] == '\0');
  /* An id that was never issued is simply not held. */
  CHECK(quota_release_lease(engine, TEXT("0123456789abcdef0123456789abcdef"), &was_held) ==
        QUOTA_OK);
  CHECK(was_held == 0);

  quota_lease_result d;
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &d) == QUOTA_OK);
  CHECK(d.result.allowed == 1 && d.result.remaining == 0);

  /* A holder that never releases: its units come back at its expiry, not before. */
  now_ms = b.expires_at_ms - 1;
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &c) == QUOTA_OK);
  CHECK(c.result.allowed == 0 && c.result.retry_after_ms == 1);
  now_ms = b.expires_at_ms;
  CHECK(quota_renew_lease(engine, b.lease, strlen(b.lease), 0, &renewed) == QUOTA_OK);
  CHECK(renewed.result.reason == QUOTA_REASON_LEASE_EXPIRED);
  CHECK(quota_release_lease(engine, b.lease, strlen(b.lease), &was_held) == QUOTA_OK);
  CHECK(was_held == 0);
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &c) == QUOTA_OK);
  CHECK(c.result.allowed == 1);
  CHECK(quota_release_lease(engine, c.lease, strlen(c.lease), NULL) == QUOTA_OK);
  CHECK(quota_release_lease(engine, d.lease, strlen(d.lease), NULL) == QUOTA_OK);
  now_ms = start_ms + 200000; /* u2's lease has expired too */
  CHECK(count_leases(engine) == 0);
}

static void test_bad_input(quota_engine* engine) {
  quota_lease_result untouched;
  memset(&untouched, 0, sizeof untouched);
  untouched.result.remaining = 777;
  untouched.expires_at_ms = 888;
  strcpy(untouched.lease, "kept");

  /* NULL pointers. */
  CHECK(quota_acquire_lease(NULL, TEXT("uploads"), TEXT("u1"), 1, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("engine is NULL"));
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("result is NULL"));
  CHECK(quota_acquire_lease(engine, NULL, 7, TEXT("u1"), 1, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("the limit name is NULL"));
  CHECK(quota_renew_lease(NULL, TEXT("0123456789abcdef0123456789abcdef"), 0, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_release_lease(NULL, TEXT("0123456789abcdef0123456789abcdef"), NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_leases(NULL, TEXT("uploads"), NULL, 0, on_lease, NULL, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_leases(engine, TEXT("uploads"), NULL, 0, NULL, NULL, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("callback is NULL"));
  CHECK(count_leases(engine) == 0); /* nothing was acquired by the refused calls */

  /* Bad lease ids. */
  CHECK(quota_renew_lease(engine, NULL, 0, 0, &untouched) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("lease id is empty"));
  CHECK(quota_renew_lease(engine, NULL, 32, 0, &untouched) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("the lease id is NULL"));
  CHECK(quota_release_lease(engine, "", 0, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  char long_id[65];
  memset(long_id, 'a', sizeof long_id);
  CHECK(quota_release_lease(engine, long_id, sizeof long_id, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("65 bytes"));

  /* Bad TTLs. */
  const int64_t ttls[] = {-1, 999, 86400001};
  for (size_t i = 0; i < sizeof ttls / sizeof ttls[0]; ++i) {
    CHECK(quota_renew_lease(engine, TEXT("0123456789abcdef0123456789abcdef"), ttls[i],
                            &untouched) == QUOTA_ERROR_INVALID_ARGUMENT);
    CHECK(SAYS("ttl_ms") && SAYS("or 0 for the limit's TTL"));
  }

  /* Bad costs and owners, not a concurrency limit, no limit at all. */
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 0, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), "", 0, 1, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_acquire_lease(engine, TEXT("send"), TEXT("u1"), 1, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("not a concurrency limit"));
  CHECK(quota_leases(engine, TEXT("send"), NULL, 0, on_lease, NULL, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("not a concurrency limit"));
  CHECK(quota_acquire_lease(engine, TEXT("nope"), TEXT("u1"), 1, &untouched) ==
        QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(quota_leases(engine, TEXT("nope"), NULL, 0, on_lease, NULL, NULL) ==
        QUOTA_ERROR_UNKNOWN_LIMIT);

  /* A failed call leaves *result as it was. */
  CHECK(untouched.result.remaining == 777 && untouched.expires_at_ms == 888);
  CHECK(strcmp(untouched.lease, "kept") == 0);
  CHECK(count_leases(engine) == 0);

  /* And succeeds after: the last error is cleared. */
  quota_lease_result ok;
  CHECK(quota_acquire_lease(engine, TEXT("uploads"), TEXT("u1"), 1, &ok) == QUOTA_OK);
  CHECK(strcmp(quota_last_error(), "") == 0);
  CHECK(quota_release_lease(engine, ok.lease, strlen(ok.lease), NULL) == QUOTA_OK);
}

/* How many leases `owner` holds on `limit`. */
static size_t leases_of(quota_engine* engine, const char* limit, size_t limit_length,
                        const char* owner, size_t owner_length) {
  size_t count = 99;
  CHECK(quota_leases(engine, limit, limit_length, owner, owner_length, on_lease,
                     &(struct listed){0}, &count) == QUOTA_OK);
  return count;
}

static void test_keyed_acquire(quota_engine* engine) {
  CHECK(quota_define(engine, TEXT("exports"), QUOTA_CONCURRENCY, 2, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  now_ms = start_ms + 300000;
  const int64_t first_ms = now_ms;

  /* The first request with a key takes a lease. */
  quota_lease_result first, retry;
  memset(&first, 0x5A, sizeof first);
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("acct"), 1, TEXT("job-1"),
                                  &first) == QUOTA_OK);
  CHECK(first.result.allowed == 1 && first.result.reason == QUOTA_REASON_OK);
  CHECK(first.result.remaining == 1 && is_lease_id(first.lease));
  CHECK(first.expires_at_ms == first_ms + 60000 && first.replayed == 0);
  CHECK(leases_of(engine, TEXT("exports"), TEXT("acct")) == 1);

  /* Its retry answers the same lease, replayed, and takes no second unit. */
  now_ms = first_ms + 1000;
  memset(&retry, 0x5A, sizeof retry);
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("acct"), 1, TEXT("job-1"),
                                  &retry) == QUOTA_OK);
  CHECK(retry.replayed == 1 && strcmp(retry.lease, first.lease) == 0);
  CHECK(retry.result.allowed == 1 && retry.result.remaining == 1);
  CHECK(retry.expires_at_ms == first.expires_at_ms);
  CHECK(leases_of(engine, TEXT("exports"), TEXT("acct")) == 1);
  quota_lease_result plain;
  CHECK(quota_acquire_lease(engine, TEXT("exports"), TEXT("acct"), 1, &plain) == QUOTA_OK);
  CHECK(plain.result.allowed == 1 && plain.result.remaining == 0 && plain.replayed == 0);
  CHECK(leases_of(engine, TEXT("exports"), TEXT("acct")) == 2);

  /* The same key for another cost is the conflict error, changing nothing. */
  quota_lease_result untouched;
  memset(&untouched, 0, sizeof untouched);
  untouched.result.remaining = 777;
  strcpy(untouched.lease, "kept");
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("acct"), 2, TEXT("job-1"),
                                  &untouched) == QUOTA_ERROR_IDEMPOTENCY_CONFLICT);
  CHECK(SAYS("job-1"));
  /* and so is the key of a consume used for an acquire */
  quota_result consumed;
  int replayed = -1;
  CHECK(quota_consume_keyed(engine, TEXT("exports"), TEXT("acct"), 1, TEXT("job-1"), &consumed,
                            &replayed) == QUOTA_ERROR_IDEMPOTENCY_CONFLICT);
  CHECK(untouched.result.remaining == 777 && strcmp(untouched.lease, "kept") == 0);
  CHECK(leases_of(engine, TEXT("exports"), TEXT("acct")) == 2);

  /* Bad keys are refused and change nothing: empty, 256 bytes, NULL with a length. */
  char key[257];
  memset(key, 'k', sizeof key);
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("other"), 1, "", 0, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("idempotency key") && SAYS("1 to 255 bytes"));
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("other"), 1, NULL, 0, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("1 to 255 bytes"));
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("other"), 1, key, 256,
                                  &untouched) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("256 bytes"));
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("other"), 1, NULL, 5, &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("the idempotency key is NULL"));
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("other"), 1, TEXT("k"), NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("result is NULL"));
  CHECK(quota_acquire_lease_keyed(NULL, TEXT("exports"), TEXT("other"), 1, TEXT("k"), &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(quota_acquire_lease_keyed(engine, TEXT("send"), TEXT("other"), 1, TEXT("k"), &untouched) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("not a concurrency limit"));
  CHECK(quota_acquire_lease_keyed(engine, TEXT("nope"), TEXT("other"), 1, TEXT("k"), &untouched) ==
        QUOTA_ERROR_UNKNOWN_LIMIT);
  CHECK(untouched.result.remaining == 777 && strcmp(untouched.lease, "kept") == 0);
  CHECK(leases_of(engine, TEXT("exports"), TEXT("other")) == 0);
  /* None of the refused keys was stored: "k" is free for a request of its own. */
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("other"), 2, TEXT("k"), &retry) ==
        QUOTA_OK);
  CHECK(retry.result.allowed == 1 && retry.replayed == 0 && retry.result.remaining == 0);

  /* A key of 255 bytes is the longest. */
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("long"), 1, key, 255, &retry) ==
        QUOTA_OK);
  CHECK(retry.result.allowed == 1 && retry.replayed == 0 && strcmp(quota_last_error(), "") == 0);

  /* A retry after the release still answers the first answer and takes nothing. */
  CHECK(quota_release_lease(engine, first.lease, strlen(first.lease), NULL) == QUOTA_OK);
  CHECK(quota_release_lease(engine, plain.lease, strlen(plain.lease), NULL) == QUOTA_OK);
  CHECK(quota_acquire_lease_keyed(engine, TEXT("exports"), TEXT("acct"), 1, TEXT("job-1"),
                                  &retry) == QUOTA_OK);
  CHECK(retry.replayed == 1 && strcmp(retry.lease, first.lease) == 0);
  CHECK(leases_of(engine, TEXT("exports"), TEXT("acct")) == 0);
}

/* quota_consume_with_lease: the lease a consume took, whatever the limit's algorithm. */
static void test_consume_with_lease(quota_engine* engine) {
  CHECK(quota_define(engine, TEXT("slots"), QUOTA_CONCURRENCY, 1, 60000, QUOTA_NO_BURST) ==
        QUOTA_OK);
  quota_lease_result taken, denied, rate, keyed, again;
  CHECK(quota_consume_with_lease(engine, TEXT("slots"), TEXT("c1"), 1, &taken) == QUOTA_OK);
  CHECK(taken.result.allowed == 1 && is_lease_id(taken.lease));
  CHECK(taken.expires_at_ms == now_ms + 60000 && taken.replayed == 0);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("c1")) == 1);
  /* Full: denied, no lease named. */
  CHECK(quota_consume_with_lease(engine, TEXT("slots"), TEXT("c1"), 1, &denied) == QUOTA_OK);
  CHECK(denied.result.allowed == 0 && denied.lease[0] == '\0' && denied.expires_at_ms == 0);
  int held = 0;
  CHECK(quota_release_lease(engine, taken.lease, strlen(taken.lease), &held) == QUOTA_OK);
  CHECK(held == 1 && leases_of(engine, TEXT("slots"), TEXT("c1")) == 0);
  /* A rate limit: a consume, and no lease. */
  CHECK(quota_consume_with_lease(engine, TEXT("send"), TEXT("c1"), 1, &rate) == QUOTA_OK);
  CHECK(rate.result.allowed == 1 && rate.lease[0] == '\0' && rate.expires_at_ms == 0);
  /* With a key, consume's: the retry answers the same lease and takes none. */
  CHECK(quota_consume_with_lease_keyed(engine, TEXT("slots"), TEXT("c2"), 1, TEXT("job-9"),
                                       &keyed) == QUOTA_OK);
  CHECK(keyed.result.allowed == 1 && is_lease_id(keyed.lease) && keyed.replayed == 0);
  CHECK(quota_consume_with_lease_keyed(engine, TEXT("slots"), TEXT("c2"), 1, TEXT("job-9"),
                                       &again) == QUOTA_OK);
  CHECK(again.replayed == 1 && strcmp(again.lease, keyed.lease) == 0);
  quota_result consumed;
  int replayed = 0;
  CHECK(quota_consume_keyed(engine, TEXT("slots"), TEXT("c2"), 1, TEXT("job-9"), &consumed,
                            &replayed) == QUOTA_OK);
  CHECK(replayed == 1);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("c2")) == 1);
  CHECK(quota_consume_with_lease(engine, TEXT("slots"), TEXT("c3"), 1, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("result is NULL"));
  CHECK(leases_of(engine, TEXT("slots"), TEXT("c3")) == 0);
}

/* quota_record_with_lease: record takes a lease even over the capacity, and names it. */
static void test_record_with_lease(quota_engine* engine) {
  quota_lease_result within, over, rate, keyed, again;
  CHECK(quota_record_with_lease(engine, TEXT("slots"), TEXT("r1"), 1, &within) == QUOTA_OK);
  CHECK(within.result.allowed == 1 && is_lease_id(within.lease));
  CHECK(within.expires_at_ms == now_ms + 60000);
  CHECK(quota_record_with_lease(engine, TEXT("slots"), TEXT("r1"), 1, &over) == QUOTA_OK);
  CHECK(over.result.allowed == 0 && is_lease_id(over.lease) && strcmp(over.lease, within.lease));
  CHECK(over.expires_at_ms == now_ms + 60000);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("r1")) == 2);
  int held = 0;
  CHECK(quota_release_lease(engine, over.lease, strlen(over.lease), &held) == QUOTA_OK && held);
  CHECK(quota_release_lease(engine, within.lease, strlen(within.lease), &held) == QUOTA_OK && held);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("r1")) == 0);
  /* A rate limit: recorded, no lease. */
  CHECK(quota_record_with_lease(engine, TEXT("send"), TEXT("r1"), 1, &rate) == QUOTA_OK);
  CHECK(rate.result.allowed == 1 && rate.lease[0] == '\0' && rate.expires_at_ms == 0);
  /* With a key, record's: the retry answers the same lease and takes none. */
  CHECK(quota_record_with_lease_keyed(engine, TEXT("slots"), TEXT("r2"), 1, TEXT("rec-1"),
                                      &keyed) == QUOTA_OK);
  CHECK(is_lease_id(keyed.lease) && keyed.replayed == 0);
  CHECK(quota_record_with_lease_keyed(engine, TEXT("slots"), TEXT("r2"), 1, TEXT("rec-1"),
                                      &again) == QUOTA_OK);
  CHECK(again.replayed == 1 && strcmp(again.lease, keyed.lease) == 0);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("r2")) == 1);
  CHECK(quota_release_lease(engine, keyed.lease, strlen(keyed.lease), &held) == QUOTA_OK);
  /* Bad input: changes nothing. */
  CHECK(quota_record_with_lease(engine, TEXT("slots"), TEXT("r3"), 1, NULL) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("result is NULL"));
  CHECK(quota_record_with_lease_keyed(engine, TEXT("slots"), TEXT("r3"), 1, "", 0, &keyed) ==
        QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("r3")) == 0);
}

/* What quota_consume_all_leasing and quota_acquire_all_leasing said. */
struct granted {
  int calls;
  char limit[8];
  char owner[8];
  char lease[QUOTA_LEASE_ID_LENGTH + 1];
  int64_t expires_at_ms;
  quota_engine* release_with; /* when set, the callback frees the lease at once */
  int released;
};

static void on_grant(void* context, const quota_lease_grant* grant) {
  struct granted* granted = context;
  ++granted->calls;
  if (grant->limit_length < sizeof granted->limit && grant->owner_length < sizeof granted->owner &&
      grant->lease_length == QUOTA_LEASE_ID_LENGTH) {
    memcpy(granted->limit, grant->limit, grant->limit_length);
    granted->limit[grant->limit_length] = '\0';
    memcpy(granted->owner, grant->owner, grant->owner_length);
    granted->owner[grant->owner_length] = '\0';
    memcpy(granted->lease, grant->lease, grant->lease_length);
    granted->lease[grant->lease_length] = '\0';
  }
  granted->expires_at_ms = grant->expires_at_ms;
  if (granted->release_with != NULL) {
    quota_release_lease(granted->release_with, grant->lease, grant->lease_length,
                        &granted->released);
  }
}

/* quota_consume_all_leasing and quota_acquire_all_leasing: the leases of an all-or-nothing
 * consume over rate and concurrency limits. */
static void test_all_leasing(quota_engine* engine) {
  const char* const names[] = {"send", "slots"};
  const size_t lengths[] = {4, 5};
  quota_result result;
  size_t deciding = 9;
  size_t leases = 9;
  struct granted granted;
  memset(&granted, 0, sizeof granted);
  CHECK(quota_consume_all_leasing(engine, names, lengths, 2, TEXT("d1"), 1, &result, &deciding,
                                  on_grant, &granted, &leases) == QUOTA_OK);
  CHECK(result.allowed == 1 && leases == 1 && granted.calls == 1);
  CHECK(strcmp(granted.limit, "slots") == 0 && strcmp(granted.owner, "d1") == 0);
  CHECK(is_lease_id(granted.lease) && granted.expires_at_ms == now_ms + 60000);
  CHECK(leases_of(engine, TEXT("slots"), TEXT("d1")) == 1);
  /* Full: denied on slots, nothing taken, nothing said. */
  struct granted none;
  memset(&none, 0, sizeof none);
  CHECK(quota_consume_all_leasing(engine, names, lengths, 2, TEXT("d1"), 1, &result, &deciding,
                                  on_grant, &none, &leases) == QUOTA_OK);
  CHECK(result.allowed == 0 && deciding == 1 && leases == 0 && none.calls == 0);
  int held = 0;
  CHECK(quota_release_lease(engine, granted.lease, strlen(granted.lease), &held) == QUOTA_OK &&
        held == 1);
  /* Rate limits only: no lease. */
  CHECK(quota_consume_all_leasing(engine, names, lengths, 1, TEXT("d1"), 1, &result, NULL, on_grant,
                                  &none, NULL) == QUOTA_OK);
  CHECK(result.allowed == 1 && none.calls == 0);

  /* acquire_all: the same, and the callback may release the lease it is given. */
  struct granted freed;
  memset(&freed, 0, sizeof freed);
  freed.release_with = engine;
  CHECK(quota_acquire_all_leasing(engine, names, lengths, 2, TEXT("d1"), 1, 0, NULL, &result,
                                  &deciding, on_grant, &freed, &leases) == QUOTA_OK);
  CHECK(result.allowed == 1 && leases == 1 && freed.calls == 1 && freed.released == 1);
  CHECK(strcmp(freed.limit, "slots") == 0 && is_lease_id(freed.lease));
  CHECK(leases_of(engine, TEXT("slots"), TEXT("d1")) == 0);

  /* A NULL callback: refused, nothing consumed (the other calls' answers say it). */
  quota_result untouched;
  untouched.allowed = 7;
  CHECK(quota_consume_all_leasing(engine, names, lengths, 2, TEXT("d2"), 1, &untouched, NULL, NULL,
                                  NULL, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("on_lease is NULL"));
  CHECK(untouched.allowed == 7);
  CHECK(quota_acquire_all_leasing(engine, names, lengths, 2, TEXT("d2"), 1, 0, NULL, &untouched,
                                  NULL, NULL, NULL, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(SAYS("on_lease is NULL"));
  CHECK(leases_of(engine, TEXT("slots"), TEXT("d2")) == 0);
  quota_result send;
  CHECK(quota_check(engine, TEXT("send"), TEXT("d2"), 5, &send) == QUOTA_OK && send.allowed);
  /* Bad names: as quota_consume_all's. */
  CHECK(quota_consume_all_leasing(engine, NULL, NULL, 2, TEXT("d2"), 1, &result, NULL, on_grant,
                                  &none, NULL) == QUOTA_ERROR_INVALID_ARGUMENT);
  CHECK(none.calls == 0 && leases_of(engine, TEXT("slots"), TEXT("d2")) == 0);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_api_lease_test SCRATCH_DIR\n");
    return 2;
  }
  snprintf(scratch, sizeof scratch, "%s/c-api-lease-XXXXXX", argv[1]);
  if (mkdtemp(scratch) == NULL) {
    perror(scratch);
    return 2;
  }
  snprintf(database, sizeof database, "%s/leases.db", scratch);
  quota_engine* engine = open_engine();
  test_names_and_definition(engine);
  test_acquire_renew_release(engine);
  test_bad_input(engine);
  test_keyed_acquire(engine);
  test_consume_with_lease(engine);
  test_record_with_lease(engine);
  test_all_leasing(engine);
  quota_close(engine);

  static const char* const suffixes[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; ++i) {
    char path[4300];
    snprintf(path, sizeof path, "%s%s", database, suffixes[i]);
    unlink(path);
  }
  CHECK(rmdir(scratch) == 0);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
