// The statements of concurrency limits, built once per dialect from the templates below.
//
// An acquire is one upsert of the owner's row of quota_lease_owners, as a sliding log's
// consume is one upsert of its owner's row: the decision reads the units held by the owner's
// leases unexpired at t and, when the lease fits (or for record, always), writes last_lease,
// whose trigger inserts the lease into quota_leases in the same statement. So the decision runs
// with the owner's row locked: on SQLite under the write lock, which the statement takes before
// it reads; on PostgreSQL under the row lock of the upsert, its lease reads made by VOLATILE
// functions that read after the lock is held (migrations/postgresql/0012_concurrency_leases.sql).
// On PostgreSQL the proposed row of the INSERT is the decision over an owner without a row;
// an existing owner's conflict decides again over its row in DO UPDATE, as PostgreSQL's
// statements of the other algorithms do (src/sql/dialect.h, "The proposed row"). On SQLite
// the proposed row reads the owner's row and decides once (kSqliteWrite).
//
// Example (limit "uploads": concurrency, maximum 2, TTL 10000 ms; owner "u"):
//   acquire :now=1000  -> allowed 1, remaining 1, lease L1, expires_at_ms 11000
//   acquire :now=2000  -> allowed 1, remaining 0, lease L2, expires_at_ms 12000
//   acquire :now=3000  -> allowed 0, rate_limited, retry 8000 (L1 expires at 11000)
//   release L1 :now=4000 -> held 1;  acquire :now=4000 -> allowed 1 (L3, until 14000)
// tests/common/lease_test.cpp runs these. With a block of 60000 ms (migration 0014), the
// denial at 3000 would also block u until 63000: every acquire then answers 'blocked' (retry
// 63000 - t) until 63000, released leases or not (tests/common/lease_lockout_test.cpp).
#include "sql/lease_statements.h"

#include <stdexcept>
#include <string_view>

#include "sql/fragments.h"

namespace quota::detail::sql {
namespace {

// The reads of the owner's leases, where the dialects differ: SQLite's subqueries, and on
// PostgreSQL the same reads as VOLATILE functions that take their own snapshot (see above).
// key_limit and key_owner are the owner's key, t the time, excess the units to wait for.
struct LeaseReads {
  const char* held;         // units held by leases unexpired at t
  const char* last_expiry;  // the last expiry of those leases (NULL: none)
  const char* freed_at;     // the first expiry by which they free {excess} units (NULL: never)
  const char* new_id;       // a fresh lease id: 32 random hex digits
  const char* refuse;       // fails the statement with the message in {message}
};

constexpr const char* kOwnerLeases =
    "e.owner = key_owner AND e.limit_name = key_limit AND e.expires_at_ms > t";

constexpr LeaseReads kSqliteReads = {
    "(SELECT coalesce(sum(e.cost), 0) FROM quota_leases AS e WHERE {owner_leases})",
    "(SELECT max(e.expires_at_ms) FROM quota_leases AS e WHERE {owner_leases})",
    "(SELECT min(x.expires_at_ms) FROM quota_leases AS x"
    " WHERE x.owner = key_owner AND x.limit_name = key_limit AND x.expires_at_ms > t"
    " AND (SELECT sum(e.cost) FROM quota_leases AS e WHERE {owner_leases}"
    " AND e.expires_at_ms <= x.expires_at_ms) >= {excess})",
    "lower(hex(randomblob(16)))",
    "json_extract('{}', '{message}')",
};

constexpr LeaseReads kPostgresqlReads = {
    "quota_leases_held(key_limit, key_owner, t)",
    "quota_leases_last_expiry(key_limit, key_owner, t)",
    "quota_leases_freed_at(key_limit, key_owner, t, {excess})",
    "replace(CAST(gen_random_uuid() AS text), '-', '')",
    "quota_refuse('{message}')",
};

const LeaseReads& reads_of(const Dialect& dialect) {
  return dialect.name == kPostgresql.name ? kPostgresqlReads : kSqliteReads;
}

// The decision, over {inputs}: key_limit, key_owner, maximum (the limit's; NULL: no such
// concurrency limit), capacity (the owner's, after its override), period_ms (the TTL), cost,
// now, policy, shadow, block_ms, s_seen, s_denied, s_shadow_denied, s_blocked_until. An exempt
// owner is always allowed and takes no lease; a denied one never is. {recorded}, {denied} and
// {blocked_until} are the operation's.
//
// A denial waits until the held leases free `excess` units. A record's own new lease is one
// of them, freed at t + TTL, which a lease renewed for longer outlives: the wait ends at the
// first of the other leases' expiries before t + TTL that frees them all without it
// ({freed_at}), else at t + TTL once the others have freed what is left, excess_later
// ({freed_after}).
//
// Lockouts are the other algorithms' (src/statements.cpp, migrations/0007_lockouts.sql): a
// block holds while t is before the owner's stored end, on a limit with block_ms that is not
// in shadow mode, for an owner that is not exempt. `allowed` stays the verdict of the leases
// (and the override), so that a blocked answer waits for the longer of the block and the
// leases; an acquire denied as rate_limited starts a block of block_ms and waits at least that.
// Every wait is measured from t, and answered from the caller's own time `now`.
constexpr const char* kDecision = R"(
  SELECT *,
    CASE WHEN reason = 'blocked' AND own_retry >= 0
         THEN {max}(s_blocked_until - t, own_retry) + (t - now) {started}
         WHEN own_retry > 0 THEN own_retry + (t - now) ELSE own_retry END AS retry_after_ms,
    {blocked_until} AS blocked_until_ms
  FROM (
  SELECT *,
    CASE WHEN allowed AND NOT blocked THEN 'ok'
         WHEN policy IS NOT DISTINCT FROM 'deny' THEN 'owner_denied' WHEN blocked THEN 'blocked'
         WHEN cost > capacity THEN 'cost_exceeds_capacity' ELSE 'rate_limited' END AS reason,
    CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN capacity
         WHEN policy IS NOT DISTINCT FROM 'deny' OR blocked THEN 0
         ELSE {max}(capacity - held_after, 0) END AS remaining,
    CASE WHEN policy IS NOT DISTINCT FROM 'deny' THEN -1 WHEN allowed THEN 0
         WHEN cost > capacity THEN -1
         WHEN NOT recorded OR {freed_at} < t + period_ms THEN coalesce({freed_at}, t + period_ms) - t
         WHEN excess <= cost THEN period_ms
         ELSE {max}(t + period_ms, {freed_after}) - t END AS own_retry,
    {max}(coalesce({last_expiry}, t), CASE WHEN recorded THEN t + period_ms ELSE t END)
      AS reset_at_ms,
    CASE WHEN recorded THEN t + period_ms END AS expires_at_ms,
    CASE WHEN recorded THEN {new_id} END AS lease
  FROM (
    SELECT *,
      held + CASE WHEN recorded THEN cost ELSE 0 END AS held_after,
      held + CASE WHEN recorded THEN cost ELSE 0 END + cost - capacity AS excess,
      held + CASE WHEN recorded THEN cost ELSE 0 END - capacity AS excess_later,
      denied_before + {as_integer}({denied}) AS denied
    FROM (
      SELECT *, {recorded} AS recorded
      FROM (
        SELECT *,
          CASE policy WHEN 'exempt' THEN TRUE WHEN 'deny' THEN FALSE
               ELSE cost <= capacity AND held + cost <= capacity END AS allowed
        FROM (
          SELECT *, {held} AS held, coalesce(s_denied, 0) AS denied_before,
            coalesce(s_blocked_until > t AND block_ms IS NOT NULL AND NOT shadow
                     AND policy IS DISTINCT FROM 'exempt', FALSE) AS blocked
          FROM (
            SELECT *, {clock.t} AS t
            FROM ({inputs}) AS inputs {barrier}
          ) AS clocked {barrier}
        ) AS counted
      ) AS decided {barrier}
    ) AS booked
  ) AS answered
  ) AS reasoned)";

// The owner's capacity: its override's maximum (its own for the limit, else its '*' one).
constexpr const char* kCapacity =
    "CASE WHEN l.name IS NULL THEN NULL WHEN coalesce(o.policy, a.policy) = 'maximum' "
    "THEN CASE WHEN o.policy IS NULL THEN a.maximum ELSE o.maximum END ELSE l.maximum END";

constexpr const char* kOverrides = R"(
      LEFT JOIN quota_overrides AS o ON o.limit_name = {key_limit} AND o.owner = {key_owner}
      LEFT JOIN quota_overrides AS a ON a.limit_name = '*' AND a.owner = {key_owner})";

// A write's inputs: the request, the limit (if it is a concurrency limit) and the row {row}:
// on PostgreSQL quota_lease_owners in DO UPDATE and `nobody`, joined to nothing, in the
// proposed row; on SQLite the owner's row `s`, joined by its key (kOwnerRow).
constexpr const char* kWriteInputs = R"(
      SELECT r.limit_name AS key_limit, r.owner AS key_owner, r.cost AS cost, r.now AS now,
             l.maximum AS maximum, {capacity} AS capacity, l.period_ms AS period_ms,
             coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow, l.block_ms AS block_ms,
             {row}.seen_ms AS s_seen, {row}.denied AS s_denied,
             {row}.shadow_denied AS s_shadow_denied, {row}.blocked_until_ms AS s_blocked_until
      FROM (SELECT {limit} AS limit_name, {owner} AS owner, {request_cost} AS cost,
                   {request_now} AS now) AS r
      LEFT JOIN quota_limits AS l ON l.name = r.limit_name AND l.algorithm = 'concurrency'{overrides}{nobody})";

constexpr const char* kNobody = "\n      LEFT JOIN quota_lease_owners AS nobody ON FALSE";
constexpr const char* kOwnerRow =
    "\n      LEFT JOIN quota_lease_owners AS s ON s.limit_name = r.limit_name AND s.owner = r.owner";

constexpr const char* kCheckInputs = R"(
      SELECT l.name AS key_limit, {owner} AS key_owner, {request_cost} AS cost,
             {request_now} AS now, l.maximum AS maximum, {capacity} AS capacity,
             l.period_ms AS period_ms, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, s.seen_ms AS s_seen, s.denied AS s_denied,
             s.shadow_denied AS s_shadow_denied, s.blocked_until_ms AS s_blocked_until
      FROM quota_limits AS l
      LEFT JOIN quota_lease_owners AS s ON s.owner = {owner} AND s.limit_name = l.name{overrides}
      WHERE l.name = {limit} AND l.algorithm = 'concurrency')";

// The quota_usage view's inputs: the check's over every owner's row, at the database's clock,
// for a cost of 1.
constexpr const char* kViewInputs = R"(
      SELECT l.name AS key_limit, s.owner AS key_owner, 1 AS cost,
             {database_now} AS now, l.maximum AS maximum, {capacity} AS capacity,
             l.period_ms AS period_ms, coalesce(o.policy, a.policy) AS policy, l.shadow AS shadow,
             l.block_ms AS block_ms, s.seen_ms AS s_seen, s.denied AS s_denied,
             s.shadow_denied AS s_shadow_denied, s.blocked_until_ms AS s_blocked_until
      FROM quota_lease_owners AS s
      JOIN quota_limits AS l ON l.name = s.limit_name{overrides}
      WHERE l.algorithm = 'concurrency')";

constexpr const char* kUsageRows = R"(SELECT key_limit AS limit_name, key_owner AS owner, used,
         remaining, denied, reset_at_ms, shadow_denials AS shadow_denied, blocked_until_ms
  FROM ({check}) AS usage_concurrency)";

constexpr const char* kColumns =
    "maximum, period_ms, cost, seen_ms, denied, shadow_denied, last_allowed, last_reason,\n"
    "   last_remaining, last_retry_after_ms, last_reset_at_ms, last_shadow_denied, last_lease,\n"
    "   last_expires_at_ms, blocked_until_ms";
constexpr const char* kValues =
    "maximum, period_ms, cost, t, denied, {shadow_count}, {granted}, reason,\n"
    "          remaining, retry_after_ms, reset_at_ms, {shadow_flag}, lease, expires_at_ms,\n"
    "          blocked_until_ms";

// The answer of a write: the row as the decision left it.
constexpr const char* kReturning = R"(
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_shadow_denied AS shadow_denied, last_lease AS lease, last_expires_at_ms AS expires_at_ms)";

// PostgreSQL's write: the proposed row decides for an owner without a row; an existing
// owner's conflict decides again in DO UPDATE, over the row it has locked (never over a
// snapshot read before the lock: src/sql/dialect.h, "The proposed row").
constexpr const char* kWrite = R"(INSERT INTO quota_lease_owners (limit_name, owner, {columns})
SELECT key_limit, key_owner, {values}
FROM ({proposed}) AS decision WHERE TRUE
ON CONFLICT (limit_name, owner) DO UPDATE SET
  ({columns}) =
  (SELECT {values}
   FROM ({decision}) AS decision){returning})";

// SQLite's write decides once: the statement holds the write lock from its first
// instruction, so the proposed row, which reads the owner's row through a join, is the
// decision over the state that the write changes, and a conflict writes it as it is. (Twice
// as cheap as deciding again in DO UPDATE: docs/performance-notes.md, "What an acquire
// costs".)
constexpr const char* kSqliteWrite = R"(INSERT INTO quota_lease_owners (limit_name, owner, {columns})
SELECT key_limit, key_owner, {values}
FROM ({decision}) AS decision WHERE TRUE
ON CONFLICT (limit_name, owner) DO UPDATE SET
  ({columns}) =
  ({excluded}){returning})";

constexpr const char* kCheck = R"(SELECT allowed AND NOT blocked AS allowed, reason, remaining,
  retry_after_ms, reset_at_ms, denied, FALSE AS shadow_denied,
  CASE WHEN policy IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE held END AS used,
  coalesce(s_shadow_denied, 0) AS shadow_denials, capacity,
  CASE WHEN blocked THEN s_blocked_until END AS blocked_until_ms{usage_key}
FROM ({decision}) AS decision)";

// A plain limit's acquire and record on SQLite (StatementKind::plain_concurrency; the plain
// statements of src/statements.cpp, "A plain limit's consume and record", do the same for the
// window and bucket algorithms): an UPDATE of an existing owner's row, so that nothing is
// proposed and the INSERT's ephemeral copy of the table it reads is not made, deciding by the
// same kDecision over inputs where the policies are constants (no override, no shadow mode).
// Its guard is the limit's `plain` flag (migration 0010): a limit that is no longer plain, or
// no longer a concurrency limit, leaves the decision without a row, the SET writes NULL into
// maximum, and the table's "unknown limit" check refuses the statement, which changes
// nothing; the engine reads the limit again and runs the general statement. An owner without
// a row matches nothing and answers no row: the engine runs the general statement, which
// makes it. The engine binds a valid cost and time (NULL: the database's clock).
constexpr const char* kPlainInputs = R"(
      SELECT l.name AS key_limit, {owner} AS key_owner, {cost_param} AS cost,
             coalesce({now_ms}, {database_now}) AS now, l.maximum AS maximum,
             l.maximum AS capacity, l.period_ms AS period_ms, NULL AS policy, FALSE AS shadow,
             NULL AS block_ms, quota_lease_owners.seen_ms AS s_seen,
             quota_lease_owners.denied AS s_denied,
             quota_lease_owners.shadow_denied AS s_shadow_denied,
             quota_lease_owners.blocked_until_ms AS s_blocked_until
      FROM quota_limits AS l
      WHERE l.name = {limit} AND l.algorithm = 'concurrency' AND l.plain)";

constexpr const char* kPlainWrite = R"(UPDATE quota_lease_owners SET
  ({columns}) =
  (SELECT {values}
   FROM ({decision}) AS decision)
WHERE limit_name = {limit} AND owner = {owner}{returning})";

struct OperationParts {
  const char* recorded;       // does it take the lease?
  const char* denied;         // does it count a denial?
  const char* granted;        // the answer's allowed
  const char* shadow_count;   // the owner's shadow_denied after it
  const char* shadow_flag;    // the answer's shadow_denied
  const char* blocked_until;  // the end of the owner's block after it (NULL: none)
  const char* started;        // a WHEN of the answer's wait, for a denial that starts a block
};

// A blocked operation keeps the end it found; an acquire denied as rate_limited (never in
// shadow mode) starts a block; any other write clears an end that has passed.
constexpr const char* kBlockKept = "CASE WHEN blocked THEN s_blocked_until END";
constexpr const char* kBlockStarted =
    "CASE WHEN blocked THEN s_blocked_until "
    "WHEN reason = 'rate_limited' AND NOT shadow THEN t + block_ms END";

OperationParts parts_of(Operation operation) {
  switch (operation) {
    case Operation::check:
      return {"FALSE", "FALSE", "allowed AND NOT blocked", "", "", kBlockKept, ""};
    case Operation::consume:
      // Shadow mode: never denied; a would-be denial takes nothing and is counted apart.
      return {"allowed AND NOT blocked AND policy IS DISTINCT FROM 'exempt'",
              "(NOT allowed OR blocked) AND NOT shadow",
              "(allowed AND NOT blocked) OR shadow",
              "coalesce(s_shadow_denied, 0) + {as_integer}(NOT allowed AND shadow)",
              "NOT allowed AND shadow",
              kBlockStarted,
              "WHEN reason = 'rate_limited' AND NOT shadow "
              "THEN {max}(own_retry, coalesce(block_ms, 0)) + (t - now) "};
    case Operation::record:
      return {"policy IS DISTINCT FROM 'exempt'", "FALSE", "allowed AND NOT blocked",
              "coalesce(s_shadow_denied, 0)", "FALSE", kBlockKept, ""};
    default:
      break;
  }
  throw std::logic_error("no lease statement for this operation");
}

std::string decision(Operation operation, const Dialect& dialect, const std::string& inputs) {
  const OperationParts parts = parts_of(operation);
  const LeaseReads& reads = reads_of(dialect);
  const Bindings owner_leases = {{"owner_leases", kOwnerLeases}};
  return fill(kDecision, {{"inputs", inputs},
                          {"recorded", parts.recorded},
                          {"denied", parts.denied},
                          {"blocked_until", parts.blocked_until},
                          {"started", parts.started},
                          {"held", fill(reads.held, owner_leases)},
                          {"last_expiry", fill(reads.last_expiry, owner_leases)},
                          {"freed_at", fill(reads.freed_at, {{"owner_leases", kOwnerLeases},
                                                             {"excess", "excess"}})},
                          {"freed_after", fill(reads.freed_at, {{"owner_leases", kOwnerLeases},
                                                                {"excess", "excess_later"}})},
                          {"new_id", reads.new_id}});
}

// The inputs of a write that reads the owner's row as `row`, joined by `join` (or, for
// quota_lease_owners in DO UPDATE, the conflicting row itself: no join).
std::string write_inputs(const char* row, const char* join) {
  return fill(kWriteInputs, {{"capacity", kCapacity},
                             {"overrides", fill(kOverrides, {{"key_limit", "r.limit_name"},
                                                             {"key_owner", "r.owner"}})},
                             {"row", row},
                             {"nobody", join}});
}

// kColumns, each as `excluded.` spells it.
std::string excluded_columns() {
  std::string spelled;
  std::string_view columns = kColumns;
  while (!columns.empty()) {
    const std::size_t comma = columns.find(',');
    std::string_view column = columns.substr(0, comma);
    while (!column.empty() && (column.front() == ' ' || column.front() == '\n')) {
      column.remove_prefix(1);
    }
    if (!spelled.empty()) spelled += ", ";
    spelled += "excluded.";
    spelled += column;
    columns = comma == std::string_view::npos ? std::string_view() : columns.substr(comma + 1);
  }
  return spelled;
}

std::string build(Operation operation, const Dialect& dialect) {
  if (operation == Operation::check) {
    const std::string inputs =
        fill(kCheckInputs, {{"capacity", kCapacity},
                            {"overrides", fill(kOverrides, {{"key_limit", "l.name"},
                                                            {"key_owner", "{owner}"}})}});
    return finish(fill(kCheck, {{"decision", decision(operation, dialect, inputs)},
                                {"usage_key", ""}}),
                  dialect);
  }
  const OperationParts parts = parts_of(operation);
  const std::string values = fill(kValues, {{"shadow_count", parts.shadow_count},
                                            {"granted", parts.granted},
                                            {"shadow_flag", parts.shadow_flag}});
  if (dialect.name == kPostgresql.name) {
    return finish(
        fill(kWrite,
             {{"columns", kColumns},
              {"values", values},
              {"proposed", decision(operation, dialect, write_inputs("nobody", kNobody))},
              {"decision", decision(operation, dialect, write_inputs("quota_lease_owners", ""))},
              {"returning", kReturning}}),
        dialect);
  }
  return finish(fill(kSqliteWrite,
                     {{"columns", kColumns},
                      {"values", values},
                      {"decision", decision(operation, dialect, write_inputs("s", kOwnerRow))},
                      {"excluded", excluded_columns()},
                      {"returning", kReturning}}),
                dialect);
}

// The plain statement of `operation` (consume or record): on SQLite kPlainWrite; on
// PostgreSQL the general statement, whose DO UPDATE already decides once for an existing owner
// and whose proposed row is the one decision over no row (an UPDATE's lease reads would be
// made before the row lock on the first attempt).
std::string build_plain(Operation operation, const Dialect& dialect) {
  if (dialect.name == kPostgresql.name) return build(operation, dialect);
  const OperationParts parts = parts_of(operation);
  const std::string values = fill(kValues, {{"shadow_count", parts.shadow_count},
                                            {"granted", parts.granted},
                                            {"shadow_flag", parts.shadow_flag}});
  return finish(fill(kPlainWrite, {{"columns", kColumns},
                                   {"values", values},
                                   {"decision", decision(operation, dialect, kPlainInputs)},
                                   {"returning", kReturning}}),
                dialect);
}

// renew's and release's parameters, in each dialect's spelling: SQLite's names, PostgreSQL's
// numbers with their types.
struct Parameter {
  const char* sqlite;
  const char* postgresql;
};

std::string spelled(const Dialect& dialect, const Parameter& parameter) {
  return dialect.name == kPostgresql.name ? parameter.postgresql : parameter.sqlite;
}

// The request's time (NULL: the database's clock), refused unless a whole number >= 0.
constexpr const char* kTime =
    "CASE WHEN {now} IS NULL THEN {database_now}"
    " WHEN {now} = CAST({now} AS bigint) AND CAST({now} AS bigint) >= 0 THEN CAST({now} AS bigint)"
    " ELSE {refuse_time} END";

constexpr const char* kRenew = R"(UPDATE quota_leases
SET expires_at_ms = r.t + coalesce(r.ttl, l.period_ms)
FROM (SELECT {lease} AS lease,
             CASE WHEN {ttl} IS NULL THEN NULL
                  WHEN {ttl} = CAST({ttl} AS bigint) AND CAST({ttl} AS bigint) BETWEEN 1000 AND 86400000
                  THEN CAST({ttl} AS bigint) ELSE {refuse_ttl} END AS ttl,
             {time} AS t) AS r,
     quota_limits AS l
WHERE quota_leases.id = r.lease AND l.name = quota_leases.limit_name
  AND quota_leases.expires_at_ms > r.t
RETURNING TRUE AS allowed, 'ok' AS reason, id AS lease, limit_name, owner, cost, expires_at_ms)";

constexpr const char* kRelease = R"(DELETE FROM quota_leases WHERE id = {lease}
RETURNING expires_at_ms > {time} AS held, id AS lease, limit_name, owner, cost, expires_at_ms)";

std::string refusal(const Dialect& dialect, const char* message) {
  return fill(reads_of(dialect).refuse, {{"message", message}});
}

std::string build_renew(const Dialect& dialect) {
  const std::string now = spelled(dialect, {":now", "CAST($3 AS bigint)"});
  const std::string time =
      fill(kTime, {{"now", now},
                   {"refuse_time",
                    refusal(dialect, "the time must be a whole number of Unix milliseconds >= 0 "
                                     "(NULL: the database clock)")}});
  return finish(fill(kRenew, {{"lease", spelled(dialect, {":lease", "CAST($1 AS text)"})},
                              {"ttl", spelled(dialect, {":ttl", "CAST($2 AS bigint)"})},
                              {"refuse_ttl",
                               refusal(dialect, "the ttl must be a whole number of ms from 1000 "
                                                "to 86400000 (NULL: the TTL of the limit)")},
                              {"time", time}}),
                dialect);
}

std::string build_release(const Dialect& dialect) {
  const std::string now = spelled(dialect, {":now", "CAST($2 AS bigint)"});
  const std::string time =
      fill(kTime, {{"now", now},
                   {"refuse_time",
                    refusal(dialect, "the time must be a whole number of Unix milliseconds >= 0 "
                                     "(NULL: the database clock)")}});
  return finish(fill(kRelease, {{"lease", spelled(dialect, {":lease", "CAST($1 AS text)"})},
                                {"time", time}}),
                dialect);
}

struct Built {
  std::string check, consume, record, renew, release, plain_consume, plain_record;
};

Built build_all(const Dialect& dialect) {
  return {build(Operation::check, dialect),          build(Operation::consume, dialect),
          build(Operation::record, dialect),         build_renew(dialect),
          build_release(dialect),                    build_plain(Operation::consume, dialect),
          build_plain(Operation::record, dialect)};
}

const Built& built(const Dialect& dialect) {
  static const Built sqlite = build_all(kSqlite);
  static const Built postgresql = build_all(kPostgresql);
  return dialect.name == kPostgresql.name ? postgresql : sqlite;
}

}  // namespace

const std::string& lease_statement(const Dialect& dialect, Operation operation) {
  switch (operation) {
    case Operation::check:
      return built(dialect).check;
    case Operation::consume:
      return built(dialect).consume;
    case Operation::record:
      return built(dialect).record;
    default:
      break;
  }
  throw std::logic_error("no lease statement for this operation");
}

const std::string& plain_lease_statement(const Dialect& dialect, Operation operation) {
  switch (operation) {
    case Operation::consume:
      return built(dialect).plain_consume;
    case Operation::record:
      return built(dialect).plain_record;
    default:
      break;
  }
  throw std::logic_error("no plain lease statement for this operation");
}

const std::string& renew_statement(const Dialect& dialect) { return built(dialect).renew; }

std::string lease_usage_rows(const Dialect& dialect) {
  const std::string inputs =
      fill(kViewInputs, {{"capacity", kCapacity},
                         {"overrides", fill(kOverrides, {{"key_limit", "s.limit_name"},
                                                         {"key_owner", "s.owner"}})}});
  const std::string check =
      fill(kCheck, {{"decision", decision(Operation::check, dialect, inputs)},
                    {"usage_key", ", key_limit, key_owner"}});
  return finish(fill(kUsageRows, {{"check", check}}), dialect);
}

const std::string& release_statement(const Dialect& dialect) { return built(dialect).release; }

const char* lease_list_query() {
  return "SELECT id, owner, cost, expires_at_ms, acquired_at_ms FROM quota_leases "
         "WHERE limit_name = ?1 AND (CAST(?2 AS text) IS NULL OR owner = CAST(?2 AS text)) "
         "AND expires_at_ms > ?3 ORDER BY owner, expires_at_ms, id";
}

const char* leases_held_query() {
  return "SELECT l.name, COUNT(q.id), CAST(COALESCE(SUM(q.cost), 0) AS bigint) "
         "FROM quota_limits l LEFT JOIN quota_leases q "
         "ON q.limit_name = l.name AND q.expires_at_ms > ?1 "
         "WHERE l.algorithm = 'concurrency' GROUP BY l.name ORDER BY l.name";
}

const char* concurrency_limit_query() {
  return "SELECT period_ms FROM quota_limits WHERE name = ?1 AND algorithm = 'concurrency'";
}

}  // namespace quota::detail::sql
