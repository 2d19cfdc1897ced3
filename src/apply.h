// Engine::apply's work apart from the engine (src/config.cpp): what differs between a
// quota::Config and the database, and whether an override fits its limit.
#pragma once

#include <vector>

#include "quota/config.h"
#include "quota/limit.h"
#include "quota/policy.h"

namespace quota::detail {

// Throws Error(invalid_argument) when `override`'s maximum and burst do not fit `limit`'s
// algorithm and period (Engine::set_override and a Config check each override with it).
void validate_override_fits(const Limit& limit, const Override& override);

// The changes that make the database's limits and overrides those of `config`: creates and
// changes of limits (in the file's order), then of overrides, then with `prune` the removals
// of the overrides and then of the limits the file does not declare. An override of a limit
// that is removed is not listed: it goes with its limit.
std::vector<Change> plan_changes(const Config& config, const std::vector<Limit>& stored_limits,
                                 const std::vector<Override>& stored_overrides, bool prune);

}  // namespace quota::detail
