// gc: deleting the state that no longer affects any answer.
//
// The state tables of migrations/0001_initial.sql keep rows that stop mattering as time
// passes:
//
//   CREATE TABLE quota_log(limit_name, owner, at_ms, cost, total);  -- sliding_log events
//   CREATE TABLE quota_log_owners(limit_name, owner, total, ..., denied, seen_ms, ...);
//   CREATE TABLE quota_windows(limit_name, owner, window_key, used, ..., denied, seen_ms, ...);
//
// An owner's rows are visited only when that owner makes a request, so an owner that stops
// making requests (a one-time visitor's IP address) would keep them forever.
//
// When a row no longer affects any answer. gc takes the engine's clock as now, and the limits
// as they are. A later operation is evaluated at t = max(its time, seen_ms) (the clock rule),
// so as long as the clock does not go back behind the gc, t >= max(now, seen_ms). A row may
// go when the decisions of src/statements.cpp compute the same answers and write the same
// state without it, at every such t:
//
//   An event (quota_log) with at_ms <= max(now, seen_ms) - period_ms. The decision counts
//     usage from the first event with at_ms > t - period_ms (the owner's running total minus
//     that event's total before it), and the wait after a denial from that event on: an
//     expired event is never read again. (The record trigger deletes it too, in batches:
//     at the latest at the owner's first record one prune interval after it expired,
//     migrations/0005_log_prune.sql.)
//   A sliding_log owner (quota_log_owners) with no events left, denied = 0 and
//     seen_ms <= now. Without events its usage is 0 at every t and its next record restarts
//     the running total from zero; t, denied and every answer are those of a new owner.
//   A fixed_window owner (quota_windows) with denied = 0, seen_ms <= now and no count in
//     the window of now or later: used = 0 or row_key < floor(now / period_ms), with row_key
//     as the decision computes it (window_key, or the window that holds seen_ms when the
//     period has changed since the row was written). The decision reads its count as 0 at
//     every t, as for a new owner. The previous_used that the next write would derive from
//     it is never read by fixed_window (and a change of algorithm discards the state).
//   (seen_ms > now cannot come without usage or a denial from the engine's own writes, but
//     a row must never go while the clock rule needs the time it remembers.)
//   Any row of a limit that does not exist, and an event without its owner's row: the
//     limits' triggers, reset and gc itself delete such rows together with the rest, so they
//     are only ever left by hand, and could only make a new owner's answers wrong.
//
//   A sliding_window owner (quota_windows) with denied = 0, seen_ms <= now, whose used can
//     no longer weigh (used = 0 or row_key + 1 < floor(now / period_ms): its window is
//     neither the current nor the previous one) and whose previous_used can no longer weigh
//     (previous_used = 0 or row_key < floor(now / period_ms)).
//   A token_bucket owner (quota_buckets) with denied = 0, seen_ms <= now whose bucket is full
//     at now under the limit as it is (the decision's reading of the stored level, refilled
//     to now): it stays full at every later t, as a new owner's bucket is. An owner with a
//     maximum override (its own capacity and rate) is kept: full is judged by the limit's
//     numbers only.
//   Every rule above also requires shadow_denied = 0 (migration 0003): shadow-mode
//     would-be denials are shown like denials.
//
// Examples (limits "log": sliding_log, "win": fixed_window, both maximum 5 per 1000 ms;
// gc at now = 10500):
//   log/u: events at 9400 and 9600       -> the event at 9400 is deleted (9400 <= 10500 -
//                                           1000); the one at 9600 and u stay
//   log/v: an event at 9000              -> the event is deleted, then v
//   log/w: an event at 9000, 2 denials   -> the event is deleted; w stays (denied is shown
//                                           and returned)
//   win/u: window_key 9, used 3          -> deleted (window 9 ended at 10000)
//   win/v: window_key 10, used 1         -> stays (window 10 holds now)
// tests/gc_test.cpp runs these examples.
//
// How it works. Each table is swept in primary-key order, at most batch_rows rows per batch:
// one SELECT reads the rows after the previous batch's last key, each with whether it is
// dead, then each dead row is deleted by its key, all in one short write transaction. The
// conditions are evaluated inside that transaction, so a request that another connection
// made meanwhile counts. The events are swept first, so that the owners left without events
// go in the same gc.
#include "gc.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "statements.h"

namespace quota::detail {
namespace {

// The conditions on a row `s` of the swept table under which gc deletes it (:now is gc's
// now). Each algorithm's rule is restricted to its own limits; an algorithm without a rule
// keeps all its state.

// {idle}, in each owner rule: nothing that the owner's row alone shows (denials, shadow
// denials, a time ahead of gc's now) keeps it.
constexpr const char* kIdle =
    "coalesce(s.denied, 0) = 0 AND coalesce(s.shadow_denied, 0) = 0 "
    "AND coalesce(s.seen_ms, 0) <= :now";

// quota_log: an expired event, or one without its owner's row.
constexpr const char* kDeadEvent = R"(
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR EXISTS (
    SELECT 1 FROM quota_limits AS l
    LEFT JOIN quota_log_owners AS o ON o.limit_name = s.limit_name AND o.owner = s.owner
    WHERE l.name = s.limit_name
      AND l.algorithm IN ('sliding_log')
      AND (o.owner IS NULL
           OR s.at_ms <= max(:now, coalesce(o.seen_ms, 0)) - l.period_ms)))";

// quota_log_owners: an owner without events whose row answers as no row would.
constexpr const char* kDeadLogOwner = R"(
  NOT EXISTS (SELECT 1 FROM quota_log AS e
              WHERE e.limit_name = s.limit_name AND e.owner = s.owner)
  AND (NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
       OR ({idle}
           AND EXISTS (SELECT 1 FROM quota_limits AS l
                       WHERE l.name = s.limit_name AND l.algorithm IN ('sliding_log')))))";

// quota_windows: an owner whose counts can no longer count.
constexpr const char* kDeadWindow = R"(
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR ({idle}
      AND EXISTS (
        SELECT 1 FROM quota_limits AS l
        WHERE l.name = s.limit_name
          AND (
            -- fixed_window: used counts in window row_key only.
            (l.algorithm = 'fixed_window'
             AND NOT coalesce(s.used > 0
                              AND CASE WHEN s.period_ms = l.period_ms THEN s.window_key
                                       ELSE s.seen_ms / l.period_ms END >= :now / l.period_ms,
                              0))
            -- sliding_window: used counts in windows row_key and row_key + 1 (as the
            -- previous window), previous_used in window row_key only.
            OR (l.algorithm = 'sliding_window'
                AND NOT coalesce(s.used > 0
                                 AND CASE WHEN s.period_ms = l.period_ms THEN s.window_key
                                          ELSE s.seen_ms / l.period_ms END + 1
                                     >= :now / l.period_ms, 0)
                AND NOT coalesce(s.previous_used > 0
                                 AND CASE WHEN s.period_ms = l.period_ms THEN s.window_key
                                          ELSE s.seen_ms / l.period_ms END
                                     >= :now / l.period_ms, 0))
          ))))";

// quota_buckets: a full bucket (at now, under the limit as it is) answers as a new owner's.
// {start} is the decision's reading of the stored level (src/statements.cpp).
constexpr const char* kDeadBucket = R"(
  NOT EXISTS (SELECT 1 FROM quota_limits AS l WHERE l.name = s.limit_name)
  OR ({idle}
      AND EXISTS (
        SELECT 1 FROM quota_limits AS l
        WHERE l.name = s.limit_name AND l.algorithm = 'token_bucket'
          AND NOT EXISTS (SELECT 1 FROM quota_overrides AS o
                          WHERE o.owner = s.owner AND o.limit_name IN (s.limit_name, '*')
                            AND o.policy = 'maximum')
          AND ({start} >= l.burst * l.period_ms
               OR :now - s.seen_ms >= (l.burst * l.period_ms - {start} - 1) / l.maximum + 1))))";

// An owner rule with its {idle} and, for the buckets, {start} filled in.
std::string owner_rule(const char* rule) {
  return fmt::format(
      fmt::runtime(rule), fmt::arg("idle", kIdle),
      fmt::arg("start", bucket_start("s.level", "s.period_ms", "l.period_ms", "l.burst")));
}

// A table that gc sweeps.
struct Sweep {
  const char* table;
  std::vector<std::string> key;  // its unique key's columns, in the index's order
  std::string dead;
};

const std::vector<Sweep>& sweeps() {
  static const std::vector<Sweep> all{
      // Events first: the owners they leave without events then go in the same gc.
      {"quota_log", {"owner", "limit_name", "at_ms"}, kDeadEvent},
      {"quota_log_owners", {"owner", "limit_name"}, owner_rule(kDeadLogOwner)},
      {"quota_windows", {"owner", "limit_name"}, owner_rule(kDeadWindow)},
      {"quota_buckets", {"owner", "limit_name"}, owner_rule(kDeadBucket)},
  };
  return all;
}

struct FinalizeStatement {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using StatementHandle = std::unique_ptr<sqlite3_stmt, FinalizeStatement>;

struct FreeValue {
  void operator()(sqlite3_value* value) const { sqlite3_value_free(value); }
};
using Value = std::unique_ptr<sqlite3_value, FreeValue>;
using Key = std::vector<Value>;

StatementHandle prepare(SQLite::Database& db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  const int status = sqlite3_prepare_v2(db.getHandle(), sql.c_str(), -1, &raw, nullptr);
  if (status != SQLITE_OK) throw SQLite::Exception(db.getHandle(), status);
  return StatementHandle(raw);
}

// Binds :key1, :key2... (named: SQLite numbers named parameters in order of appearance,
// and :now comes first).
void bind_key(sqlite3_stmt* statement, const Key& key) {
  for (std::size_t i = 0; i < key.size(); ++i) {
    const std::string name = fmt::format(":key{}", i + 1);
    sqlite3_bind_value(statement, sqlite3_bind_parameter_index(statement, name.c_str()),
                       key[i].get());
  }
}

void bind_named(sqlite3_stmt* statement, const char* name, std::int64_t value) {
  if (const int index = sqlite3_bind_parameter_index(statement, name)) {
    sqlite3_bind_int64(statement, index, value);
  }
}

// "limit_name, owner", ":key1, :key2", "limit_name = :key1 AND owner = :key2"
std::string joined(const std::vector<std::string>& key, std::string_view format,
                   std::string_view separator) {
  std::string text;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (i > 0) text += separator;
    text += fmt::format(fmt::runtime(format), fmt::arg("column", key[i]), fmt::arg("n", i + 1));
  }
  return text;
}

// The next rows of `sweep` after the key :key1.. (or from the first row), with whether each
// is dead.
std::string select_sql(const Sweep& sweep, bool after) {
  const std::string columns = joined(sweep.key, "{column}", ", ");
  return fmt::format(
      "SELECT {columns}, ({dead}) FROM {table} AS s{where} ORDER BY {columns} "
      "LIMIT :batch_rows",
      fmt::arg("columns", columns), fmt::arg("dead", sweep.dead), fmt::arg("table", sweep.table),
      fmt::arg("where", after ? fmt::format(" WHERE ({}) > ({})", columns,
                                            joined(sweep.key, ":key{n}", ", "))
                              : std::string()));
}

std::string delete_sql(const Sweep& sweep) {
  return fmt::format("DELETE FROM {} WHERE {}", sweep.table,
                     joined(sweep.key, "{column} = :key{n}", " AND "));
}

// One batch's write transaction: BEGIN IMMEDIATE (the write lock from the start, so that
// the busy handler waits for it), or a savepoint inside the application's open transaction.
class BatchTransaction {
 public:
  explicit BatchTransaction(SQLite::Database& db)
      : db_(db), nested_(sqlite3_get_autocommit(db.getHandle()) == 0) {
    db_.exec(nested_ ? "SAVEPOINT quota_gc" : "BEGIN IMMEDIATE");
  }
  BatchTransaction(const BatchTransaction&) = delete;
  BatchTransaction& operator=(const BatchTransaction&) = delete;
  ~BatchTransaction() {
    if (committed_) return;
    try {
      db_.exec(nested_ ? "ROLLBACK TO quota_gc; RELEASE quota_gc" : "ROLLBACK");
    } catch (const SQLite::Exception&) {
      // SQLite has rolled back already (an I/O error, or the application's transaction).
    }
  }
  void commit() {
    db_.exec(nested_ ? "RELEASE quota_gc" : "COMMIT");
    committed_ = true;
  }

 private:
  SQLite::Database& db_;
  bool nested_;
  bool committed_ = false;
};

struct BatchCount {
  std::int64_t examined = 0;
  std::int64_t deleted = 0;
};

// Examines up to `batch_rows` rows of `sweep` after `cursor` (from the first row when it is
// empty), deletes the dead ones, and moves `cursor` to the last key examined.
BatchCount sweep_batch(SQLite::Database& db, const Sweep& sweep, Key& cursor, std::int64_t now,
                       std::size_t batch_rows) {
  BatchTransaction transaction(db);
  const StatementHandle select = prepare(db, select_sql(sweep, !cursor.empty()));
  bind_key(select.get(), cursor);
  bind_named(select.get(), ":now", now);
  bind_named(select.get(), ":batch_rows", static_cast<std::int64_t>(batch_rows));

  // The keys are read first and the rows deleted after: a SELECT does not promise what it
  // sees of changes made while it runs.
  const int key_size = static_cast<int>(sweep.key.size());
  std::vector<Key> dead;
  Key last;
  BatchCount count;
  int status;
  while ((status = sqlite3_step(select.get())) == SQLITE_ROW) {
    ++count.examined;
    last.clear();
    for (int i = 0; i < key_size; ++i) {
      last.emplace_back(sqlite3_value_dup(sqlite3_column_value(select.get(), i)));
      if (!last.back()) throw SQLite::Exception(db.getHandle(), SQLITE_NOMEM);
    }
    if (sqlite3_column_int64(select.get(), key_size) != 0) {
      Key copy;
      for (const Value& value : last) copy.emplace_back(sqlite3_value_dup(value.get()));
      dead.push_back(std::move(copy));
    }
  }
  if (status != SQLITE_DONE) throw SQLite::Exception(db.getHandle(), status);

  if (!dead.empty()) {
    const StatementHandle erase = prepare(db, delete_sql(sweep));
    for (const Key& key : dead) {
      bind_key(erase.get(), key);
      status = sqlite3_step(erase.get());
      if (status != SQLITE_DONE) throw SQLite::Exception(db.getHandle(), status);
      count.deleted += sqlite3_changes(db.getHandle());
      sqlite3_reset(erase.get());
    }
  }
  transaction.commit();
  if (count.examined > 0) cursor = std::move(last);
  return count;
}

std::int64_t count_rows(SQLite::Database& db) {
  std::int64_t rows = 0;
  for (const Sweep& sweep : sweeps()) {
    rows += db.execAndGet(fmt::format("SELECT count(*) FROM {}", sweep.table)).getInt64();
  }
  return rows;
}

}  // namespace

std::int64_t collect_garbage(const Exclusive& exclusive, std::int64_t now, std::size_t batch_rows,
                             const std::function<void(const GcProgress&)>& progress) {
  if (batch_rows == 0) {
    throw Error(ErrorCode::invalid_argument,
                "gc needs batches of at least 1 row: pass a batch size >= 1 (default 1000)");
  }
  if (now < 0) {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("the clock returned {}: times are Unix milliseconds >= 0", now));
  }
  GcProgress done;
  exclusive([&](SQLite::Database& db) { done.total = count_rows(db); });
  for (const Sweep& sweep : sweeps()) {
    Key cursor;
    for (bool more = true; more;) {
      BatchCount batch;
      exclusive(
          [&](SQLite::Database& db) { batch = sweep_batch(db, sweep, cursor, now, batch_rows); });
      done.examined += batch.examined;
      done.deleted += batch.deleted;
      more = batch.examined == static_cast<std::int64_t>(batch_rows);
      if (batch.examined > 0 && progress) progress(done);
    }
  }
  return done.deleted;
}

}  // namespace quota::detail
