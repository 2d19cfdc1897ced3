// The SQL the engine runs: one statement per operation and algorithm.
//
// These texts are the product's SQL interface. The engine prepares exactly these strings,
// `quotactl sql` prints them, and any SQLite client may run them with the named parameters
// :limit, :owner, :cost (NULL means 1) and :now (NULL means the database's current time).
#pragma once

#include <string>
#include <string_view>

#include "quota/limit.h"
#include "sql/dialect.h"

namespace quota::detail {

enum class Operation { check, consume, record, reset, refund };

// The statement for `operation` on a limit of `algorithm` (reset is the same for all).
// Every statement returns one row with allowed, reason, remaining, retry_after_ms,
// reset_at_ms, denied and shadow_denied (1 when a shadow-mode consume would have been
// denied); check also returns used, shadow_denials (the owner's count) and capacity (the
// owner's: the limit's maximum or burst, or its override's). check returns no
// row for an unknown limit, the others fail with "unknown limit". refund gives back up to
// :cost units and answers like a check of cost 1.
const std::string& statement(Operation operation, Algorithm algorithm);
// The same statement in `dialect`'s spelling (src/sql/dialect.h): PostgreSQL's takes $1..$4
// for :limit, :owner, :cost and :now.
const std::string& statement(const Dialect& dialect, Operation operation, Algorithm algorithm);

// The table that holds the per-owner state of `algorithm`'s limits: quota_windows,
// quota_log_owners or quota_buckets.
const char* state_table(Algorithm algorithm);

// "check", "consume", "record", "reset" or "refund".
const char* operation_name(Operation operation);

// The SQL expression of a token bucket's stored `level` (written under `row_period`) as the
// decision reads it under the limit's `period` and `capacity`: clamped, or re-scaled to
// whole tokens. The arguments are SQL expressions (column names). gc uses it too.
std::string bucket_start(std::string_view level, std::string_view row_period,
                         std::string_view period, std::string_view capacity,
                         const Dialect& dialect = kSqlite);

}  // namespace quota::detail
