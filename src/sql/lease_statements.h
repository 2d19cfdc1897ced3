// The statements of concurrency limits (Algorithm::concurrency, SPEC §13): leases held in
// quota_leases, their owners' rows in quota_lease_owners (migrations/0012_concurrency_leases.sql).
//
// Like every statement of src/statements.h these are the product's SQL interface: the engine
// runs exactly these strings and `quotactl sql acquire|renew|release|check|record` prints
// them. The request statements (check, acquire = consume, record) take :limit, :owner, :cost
// and :now as the others do; renew takes :lease, :ttl (NULL: the limit's TTL) and :now;
// release takes :lease and :now. On PostgreSQL the parameters are $1, $2, ... in that order.
#pragma once

#include <string>

#include "sql/dialect.h"
#include "statements.h"

namespace quota::detail::sql {

// check, consume (acquire) or record of a concurrency limit.
//   acquire returns one row: allowed, reason, remaining, retry_after_ms, reset_at_ms, denied,
//     shadow_denied, lease (NULL when nothing was taken) and expires_at_ms (the lease's expiry).
//   record is an acquire that takes the lease even over the capacity (allowed: within it).
//   A limit's block_ms locks an owner out after a rate_limited acquire, as the other
//   algorithms' blocks do (quota_lease_owners.blocked_until_ms; check returns it).
//   check returns the columns of every check (src/statements.h), no row for an unknown limit.
// Each write fails with "unknown limit" for a limit that is not a concurrency limit.
// Operation::reset is every limit's reset (it releases all of the owner's leases); refund has
// no statement here (std::logic_error).
const std::string& lease_statement(const Dialect& dialect, Operation operation);

// A plain concurrency limit's consume (acquire) or record (StatementKind::plain_concurrency):
// the same answer as lease_statement's for an owner with a row, no row for an owner without
// one, and "unknown limit" for a limit no longer plain (src/sql/lease_statements.cpp).
const std::string& plain_lease_statement(const Dialect& dialect, Operation operation);

// renew: moves an unexpired lease's expiry to t + ttl; one row (allowed 1, reason 'ok',
// lease, limit_name, owner, cost, expires_at_ms), or none when the lease is unknown or expired.
const std::string& renew_statement(const Dialect& dialect);

// release: deletes the lease; one row (held: 1 if it was unexpired, lease, limit_name, owner,
// cost, expires_at_ms), or none when there was no such lease.
const std::string& release_statement(const Dialect& dialect);

// The unexpired leases of limit ?1 (of owner ?2, or every owner when NULL) at ?3, by owner and
// expiry: lease, owner, cost, expires_at_ms, acquired_at_ms. Store::query's spelling.
const char* lease_list_query();

// The quota_usage view's rows of concurrency limits (src/sql/usage_view.h): the check's answer
// over every row of quota_lease_owners, at the database's clock, for a cost of 1 (limit_name,
// owner, used, remaining, denied, reset_at_ms, shadow_denied, blocked_until_ms).
std::string lease_usage_rows(const Dialect& dialect);

// Every concurrency limit, with its leases unexpired at ?1 and the units they hold: name,
// leases, units (0, 0 when none). Store::query's spelling.
const char* leases_held_query();

// Whether limit ?1 is a concurrency limit: one row (its TTL, period_ms) when it is.
const char* concurrency_limit_query();

}  // namespace quota::detail::sql
