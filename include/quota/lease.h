// Concurrency leases: how many at once (Algorithm::concurrency, SPEC §13).
//
// A concurrency limit bounds the units an owner holds at once. Engine::acquire_lease takes
// `cost` units as one lease when the owner's unexpired leases leave room, and answers with the
// lease's id and expiry; the holder releases it when done (release_lease), or renews it while
// it works for longer than the TTL (renew_lease). A holder that dies holds nothing after the
// lease's TTL: nothing waits on a crashed process. quota::Lease does the release in its
// destructor. An acquire is decided as a consume is (hooks, metrics, the failure policy); with
// an idempotency key, its retry answers the same lease. Engine::consume_all takes leases with
// rate limits at once, all or nothing (Decision::leases, quota/policy.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "quota/export.h"
#include "quota/result.h"

namespace quota {

class Engine;

// The answer of acquire_lease and renew_lease: the Result of every operation (allowed,
// reason, remaining, retry_after_ms: the wait until enough held units expire, reset_at_ms:
// the owner's last lease expiry, denied, shadow_denied) and the lease.
struct LeaseResult : Result {
  // The lease's opaque id (32 hex digits, unique in the database); empty when no lease was
  // taken: denied, an exempt owner (which uses no quota), a shadow-mode allowance, or an
  // allowance of Options::failure_policy fail_open while the database failed
  // (Reason::store_unavailable: allowed, but nothing is held and nothing needs releasing).
  std::string lease;
  // When the lease expires (Unix ms): t + TTL; 0 when no lease was taken.
  std::int64_t expires_at_ms = 0;

  friend bool operator==(const LeaseResult&, const LeaseResult&) = default;
};

// Throws Error (invalid_argument) unless `lease` is of the form acquire_lease issues: 32 hex
// digits in lower case. renew_lease and release_lease check it, the same on both backends, so
// a malformed id is invalid input, never a lease that is simply not held; for programs that
// check an id before opening a database (quotactl does).
QUOTA_API void validate_lease_id(std::string_view lease);

// An unexpired lease, as Engine::leases lists it.
struct LeaseInfo {
  std::string lease;
  std::string owner;
  std::int64_t cost = 0;
  std::int64_t expires_at_ms = 0;
  std::int64_t acquired_at_ms = 0;  // when it was taken (the owner's time then)

  friend bool operator==(const LeaseInfo&, const LeaseInfo&) = default;
};

// A lease held for the lifetime of this object: acquired by the constructor, released by the
// destructor (which never throws: a failed release leaves the lease to expire at its TTL).
// Move-only. A denied acquire makes a Lease that holds nothing (held() false) and says why
// (result()).
class QUOTA_API Lease {
 public:
  Lease() = default;
  // Engine::acquire_lease(limit, owner, cost); throws as it does. `engine` must outlive the
  // Lease.
  Lease(Engine& engine, std::string_view limit, std::string_view owner, std::int64_t cost = 1);
  // The same with an idempotency key: a retry with the key holds the first acquire's lease
  // (result().replayed true), so the Lease of either releases it.
  Lease(Engine& engine, std::string_view limit, std::string_view owner, std::int64_t cost,
        std::string_view idempotency_key);
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  // Whether a lease is held (taken, and not released through this object).
  bool held() const { return engine_ != nullptr && !result_.lease.empty(); }
  explicit operator bool() const { return held(); }
  const std::string& id() const { return result_.lease; }
  std::int64_t expires_at_ms() const { return result_.expires_at_ms; }
  // The acquire's answer (after renew: the renewal's).
  const LeaseResult& result() const { return result_; }

  // Engine::renew_lease of this lease. A renewal that answers lease_expired leaves held()
  // true: release still deletes what is left of it.
  LeaseResult renew(std::optional<std::chrono::milliseconds> ttl = std::nullopt);
  // Releases now (Engine::release_lease) and holds nothing after; false when nothing was held
  // (never taken, already released, or expired). Throws Error as release_lease does.
  bool release();

 private:
  Engine* engine_ = nullptr;
  LeaseResult result_;
};

}  // namespace quota
