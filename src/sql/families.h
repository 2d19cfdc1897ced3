// The registry of the schema's quota_* tables: the state of each algorithm family (the rows a
// limit keeps per owner), the idempotency keys, and the short named list of the others.
//
// This is the one list of state tables. reset and reset_everywhere (what they forget),
// Engine::owner_usage (where an owner has state), quota::admin::summarize (status's state
// rows), gc (what it sweeps, with each table's rule) and PostgreSQL's LOCK TABLE of a gc batch
// iterate it; tests/common/table_registry_test.cpp fails when a quota_* table of a migrated
// schema is in none of its lists.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "quota/limit.h"

namespace quota::detail::sql {

// A table of rows that name a limit (limit_name) and an owner (owner).
struct StateTable {
  const char* name;
  std::vector<std::string> key;  // its unique key's columns, in its index's order (gc's sweep)
  // gc's rule: an SQL expression over the row `s` and gc's now ?1 under which the row no
  // longer affects any answer; {idle} and the algorithms' {...} are filled by src/gc.cpp.
  const char* gc_dead;
};

// An algorithm family: the algorithms that share one shape of state.
struct Family {
  const char* name;  // "log", "windows", "bucket", "leases"
  std::vector<Algorithm> algorithms;
  // One row per limit and owner: what a consume writes, where owner_usage finds the owner.
  StateTable owners;
  // Rows held under an owner's row (the log's events, the leases), if the family has them.
  std::optional<StateTable> items;
};

// Every family, each algorithm in exactly one.
const std::vector<Family>& families();
const Family& family_of(Algorithm algorithm);

// quota_idempotency: per limit and owner, but no algorithm's state (a stored answer).
const StateTable& keys_table();

// Every table whose rows name a limit and an owner, in the order reset deletes them: each
// family's owners' table before its items (as the schema's reset triggers do, so that a reset
// and a request lock them in one order), then the keys.
std::vector<const StateTable*> owner_tables();

// The same tables in the order gc sweeps them: a family's items before its owners, whom they
// may leave without items (and so dead in the same gc), then the keys.
std::vector<const StateTable*> sweep_order();

// The other quota_* tables: none holds rows that reset, status or gc count as state.
struct OtherTable {
  const char* name;
  const char* role;  // "configuration", "bookkeeping" or "trigger queue"
};
const std::vector<OtherTable>& other_tables();

// Deletes the rows of limit ?1 and owner ?2 from `table`: what reset forgets there.
std::string forget_owner(const StateTable& table);

// The names of the limits where owner ?1 has a row of state (of any family), one per row.
std::string owner_limits();

// "quota_log, quota_log_owners, ...": the names of `tables`, for a statement's table list.
std::string table_list(const std::vector<const StateTable*>& tables);

}  // namespace quota::detail::sql
