// The SQL the engine runs: one statement per operation and algorithm.
//
// These texts are the product's SQL interface. The engine prepares exactly these strings,
// `quotactl sql` prints them, and any SQLite client may run them with the named parameters
// :limit, :owner, :cost (NULL means 1) and :now (NULL means the database's current time).
#pragma once

#include <string>

#include "quota/limit.h"

namespace quota::detail {

enum class Operation { check, consume, record, reset };

// The statement for `operation` on a limit of `algorithm` (reset is the same for all).
// Every statement returns one row with allowed, reason, remaining, retry_after_ms,
// reset_at_ms and denied; check returns no row for an unknown limit, the others fail with
// "unknown limit".
const std::string& statement(Operation operation, Algorithm algorithm);

// The parts of `statement()` that the database's own view and gc statements reuse.
const char* operation_name(Operation operation);

}  // namespace quota::detail
