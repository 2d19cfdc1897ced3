// The registry of the schema's quota_* tables (src/sql/families.h), with each state table's
// gc rule (docs: the comment at the top of src/gc.cpp says when a row may go).
#include "sql/families.h"

#include <stdexcept>

namespace quota::detail::sql {
namespace {

// quota_log: an expired event, or one without its owner's row.
constexpr const char* kDeadEvent = R"(
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR EXISTS (
    SELECT 1 FROM quota_limits AS l
    LEFT JOIN quota_log_owners AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
    WHERE l.name = s.limit_name
      AND l.algorithm IN ('sliding_log')
      AND (o.owner IS NULL OR {dead_event})))";

// quota_log_owners: an owner without events whose row answers as no row would.
constexpr const char* kDeadLogOwner = R"(
  NOT EXISTS (SELECT 1 FROM quota_log AS e
              WHERE e.limit_name = s.limit_name AND e.owner = s.owner)
  AND (NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
       OR ({idle}
           AND EXISTS (SELECT 1 FROM quota_limits AS l
                       WHERE l.name = s.limit_name AND l.algorithm IN ('sliding_log')))))";

// quota_windows: an owner whose counts can no longer count ({fixed_window} and
// {sliding_window}: the algorithms' gc_dead fragments, src/sql/fragments.cpp).
constexpr const char* kDeadWindow = R"(
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR ({idle}
      AND EXISTS (
        SELECT 1 FROM quota_limits AS l
        WHERE l.name = s.limit_name
          AND ((l.algorithm = 'fixed_window' AND {fixed_window})
               OR (l.algorithm = 'sliding_window' AND {sliding_window})))))";

// quota_buckets: a full bucket (at now, under the limit as it is) answers as a new owner's.
constexpr const char* kDeadBucket = R"(
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR ({idle}
      AND EXISTS (
        SELECT 1 FROM quota_limits AS l
        WHERE l.name = s.limit_name AND l.algorithm = 'token_bucket'
          AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                          WHERE o.owner = s.owner AND o.limit_name IN (s.limit_name, '*')
                            AND o.policy = 'maximum')
          AND ({token_bucket}))))";

// quota_leases: a lease expired at gc's now, or one whose limit is gone or is no longer a
// concurrency limit (src/sql/lease_statements.cpp counts a lease while expires_at_ms > t).
constexpr const char* kDeadLease = R"(
  s.expires_at_ms <= ?1
  OR NOT EXISTS (SELECT 1 FROM quota_limits AS l
                 WHERE l.name = s.limit_name AND l.algorithm = 'concurrency'))";

// quota_lease_owners: an owner without unexpired leases whose row answers as no row would.
constexpr const char* kDeadLeaseOwner = R"(
  NOT EXISTS (SELECT 1 FROM quota_leases AS e
              WHERE e.owner = s.owner AND e.limit_name = s.limit_name AND e.expires_at_ms > ?1)
  AND (NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
       OR ({idle}
           AND EXISTS (SELECT 1 FROM quota_limits AS l
                       WHERE l.name = s.limit_name AND l.algorithm = 'concurrency'))))";

// quota_idempotency: a key is dead once its lifetime has ended.
constexpr const char* kDeadKey = "s.expires_at_ms <= ?1";

}  // namespace

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {"log",
       {Algorithm::sliding_log},
       {"quota_log_owners", {"owner", "limit_name"}, kDeadLogOwner},
       StateTable{"quota_log", {"owner", "limit_name", "at_ms"}, kDeadEvent}},
      {"windows",
       {Algorithm::fixed_window, Algorithm::sliding_window},
       {"quota_windows", {"owner", "limit_name"}, kDeadWindow},
       std::nullopt},
      {"bucket",
       {Algorithm::token_bucket},
       {"quota_buckets", {"owner", "limit_name"}, kDeadBucket},
       std::nullopt},
      {"leases",
       {Algorithm::concurrency},
       {"quota_lease_owners", {"owner", "limit_name"}, kDeadLeaseOwner},
       StateTable{"quota_leases", {"id"}, kDeadLease}},
  };
  return all;
}

const Family& family_of(Algorithm algorithm) {
  for (const Family& family : families()) {
    for (Algorithm member : family.algorithms) {
      if (member == algorithm) return family;
    }
  }
  throw std::logic_error("an algorithm without a family");
}

const StateTable& keys_table() {
  static const StateTable keys{"quota_idempotency", {"limit_name", "owner", "key"}, kDeadKey};
  return keys;
}

std::vector<const StateTable*> owner_tables() {
  std::vector<const StateTable*> tables;
  for (const Family& family : families()) {
    tables.push_back(&family.owners);
    if (family.items) tables.push_back(&*family.items);
  }
  tables.push_back(&keys_table());
  return tables;
}

std::vector<const StateTable*> sweep_order() {
  std::vector<const StateTable*> tables;
  for (const Family& family : families()) {
    if (family.items) tables.push_back(&*family.items);
    tables.push_back(&family.owners);
  }
  tables.push_back(&keys_table());
  return tables;
}

const std::vector<OtherTable>& other_tables() {
  static const std::vector<OtherTable> others = {
      {"quota_limits", "configuration"},
      {"quota_overrides", "configuration"},
      {"quota_anchors", "configuration"},
      {"quota_migrations", "bookkeeping"},
      // Rows inserted for their triggers and deleted by them in the same statement.
      {"quota_resets", "trigger queue"},
      {"quota_new_owners", "trigger queue"},  // SQLite's only
  };
  return others;
}

std::string forget_owner(const StateTable& table) {
  return std::string("DELETE FROM ") + table.name + " WHERE limit_name = ?1 AND owner = ?2";
}

std::string owner_limits() {
  std::string text;
  for (const Family& family : families()) {
    if (!text.empty()) text += " UNION ALL ";
    text += std::string("SELECT limit_name FROM ") + family.owners.name + " WHERE owner = ?1";
  }
  return text;
}

std::string table_list(const std::vector<const StateTable*>& tables) {
  std::string list;
  for (const StateTable* table : tables) {
    if (!list.empty()) list += ", ";
    list += table->name;
  }
  return list;
}

}  // namespace quota::detail::sql
