// Idempotency keys (SPEC §14; docs/concepts.md, "Retries"): a consume, record, consume_all or
// acquire_lease made with a key stores its answer with the key (and the lease it took, if
// any), in the same transaction as the request; a request with the same limit, owner and key
// within the key's lifetime is answered from it.
//
// The statements below are the whole protocol, written once with numbered parameters (as
// every statement of the engine other than the request statements, src/store.h), the same
// on SQLite and PostgreSQL; `quotactl sql consume NAME --key` prints them. In one
// transaction (on SQLite one that holds the write lock from its start, BEGIN IMMEDIATE):
//   1. kFindKey: the key's unexpired row. Found: its request text equal to this request's is
//      a replay (answer from the row, charge nothing); different, a conflict. The engine
//      reads it before the transaction (find_replay): a stored answer never changes while
//      its key lives, so a replay takes no write lock.
//   2. kClaimKey: insert the key's row (an expired row is taken over). On PostgreSQL a second
//      request with the same key waits here for the first one's transaction; when the first
//      committed, the claim changes no row, and the second reads the first's answer (1.).
//   3. the request's own statement (or consume_all's), then kStoreAnswer: its answer into
//      the claimed row. Commit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/policy.h"
#include "quota/result.h"
#include "store.h"

namespace quota::detail {

// ?1 limit, ?2 owner, ?3 key, ?4 now: request, decided_by, allowed, reason, remaining,
// retry_after_ms, reset_at_ms, denied, shadow_denied, lease, lease_expires_at_ms of the key's
// row while now < expires_at_ms.
inline constexpr const char* kFindKey =
    "SELECT request, decided_by, allowed, reason, remaining, retry_after_ms, reset_at_ms, "
    "denied, shadow_denied, lease, lease_expires_at_ms FROM quota_idempotency "
    "WHERE limit_name = ?1 AND owner = ?2 AND key = ?3 AND expires_at_ms > ?4";

// ?1 limit, ?2 owner, ?3 key, ?4 request, ?5 expires_at_ms, ?6 now: the key's row, with no
// answer yet; an expired row of the key is taken over. Changes 1 row, or 0 when the key's
// row is unexpired (another transaction stored it first).
inline constexpr const char* kClaimKey =
    "INSERT INTO quota_idempotency (limit_name, owner, key, request, expires_at_ms) "
    "VALUES (?1, ?2, ?3, ?4, ?5) "
    "ON CONFLICT (limit_name, owner, key) DO UPDATE SET request = excluded.request, "
    "decided_by = NULL, allowed = NULL, reason = NULL, remaining = NULL, "
    "retry_after_ms = NULL, reset_at_ms = NULL, denied = NULL, shadow_denied = NULL, "
    "lease = NULL, lease_expires_at_ms = NULL, expires_at_ms = excluded.expires_at_ms "
    "WHERE quota_idempotency.expires_at_ms <= ?6";

// ?1 limit, ?2 owner, ?3 key, ?4 decided_by, ?5 allowed, ?6 reason, ?7 remaining,
// ?8 retry_after_ms, ?9 reset_at_ms, ?10 denied, ?11 shadow_denied, ?12 lease,
// ?13 lease_expires_at_ms (the lease this place's limit took; NULL: none).
inline constexpr const char* kStoreAnswer =
    "UPDATE quota_idempotency SET decided_by = ?4, allowed = (?5 <> 0), reason = ?6, "
    "remaining = ?7, "
    "retry_after_ms = ?8, reset_at_ms = ?9, denied = ?10, shadow_denied = (?11 <> 0), "
    "lease = ?12, lease_expires_at_ms = ?13 "
    "WHERE limit_name = ?1 AND owner = ?2 AND key = ?3";

inline constexpr std::size_t kMaxKeyBytes = 255;


// What a keyed request asked, as the key's row stores it: "consume 1", "record 5",
// "acquire 2" (acquire_lease), "consume_all 1 a:u,b:u" (every limit:owner of the call,
// sorted; "a=500:u" for a limit whose own cost differs from the call's).
std::string request_text(std::string_view operation, std::int64_t cost);
std::string request_text(const std::vector<Charge>& charges, std::int64_t cost);

// A key's place: one row per limit and owner (a consume_all has one per charge).
struct KeyPlace {
  std::string_view limit;
  std::string_view owner;
};

// A stored answer: what the first request with the key answered.
struct StoredAnswer {
  std::string request;
  std::string decided_by;  // consume_all's deciding limit; empty otherwise
  Result result;           // result.replayed: answered from the key's row
  // The leases the request took, each stored in its own place's row (a place holds at most
  // one: that of its limit and owner), in the order of the places.
  std::vector<LeaseGrant> leases = {};
};

// The parts of run_keyed (src/idempotency.cpp).
std::optional<StoredAnswer> find_answer(Store& store, const KeyPlace& place, std::string_view key,
                                        std::int64_t now);
// A replay of `found` (read from one of `places`) for `request` (result.replayed set), with
// the leases of every place; or throws the conflict error.
StoredAnswer replay(Store& store, const std::vector<KeyPlace>& places, StoredAnswer found,
                    const std::string& request, std::string_view key, std::int64_t now);
bool claim(Store& store, const KeyPlace& place, std::string_view key, const std::string& request,
           std::int64_t now, std::int64_t ttl_ms);
void store_answer(Store& store, const KeyPlace& place, std::string_view key,
                  const StoredAnswer& answer);

// A replay, read before any transaction: a key's stored answer never changes while the key
// lives (kClaimKey takes over only an expired row), so a request whose key is stored is
// answered from its rows without the write lock. The replay of the answer stored in one of
// `places` (result.replayed set), a conflict thrown (ErrorCode::idempotency_conflict), or
// nullopt when no place holds the key: the request then goes to run_keyed.
std::optional<StoredAnswer> find_replay(Store& store, const std::vector<KeyPlace>& places,
                                        std::string_view key, const std::string& request,
                                        std::int64_t now);

// Runs a keyed request that find_replay did not answer, inside the caller's savepoint: claims
// every place (a claim that changes nothing finds the key stored since by another
// transaction, answered as find_replay does), runs `decide` and stores its answer in each.
// On a replay or an error the caller rolls its savepoint back (a claim may have been written
// before another place's row was found); otherwise it releases it. `now`: the request's
// time; the key's rows live until now + ttl_ms.
template <typename Decide>
StoredAnswer run_keyed(Store& store, const std::vector<KeyPlace>& places, std::string_view key,
                       const std::string& request, std::int64_t now, std::int64_t ttl_ms,
                       Decide&& decide) {
  for (const KeyPlace& place : places) {
    if (claim(store, place, key, request, now, ttl_ms)) continue;
    // The key's row is unexpired: stored by another transaction since find_replay looked
    // (PostgreSQL: the claim waited for it to end).
    if (auto found = find_answer(store, place, key, now)) {
      return replay(store, places, std::move(*found), request, key, now);
    }
    throw Error(ErrorCode::busy, "another request with the same idempotency key was being "
                                 "decided at the same time: try again");
  }
  StoredAnswer answer = decide();
  answer.request = request;
  for (const KeyPlace& place : places) store_answer(store, place, key, answer);
  return answer;
}

}  // namespace quota::detail
