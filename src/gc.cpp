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
//     period has changed since the row was written); for a calendar limit (migration 0008),
//     used = 0 or window_key <= now, window_key being the end of the row's window. The decision
//     reads its count as 0 at every t, as for a new owner. The previous_used that the next write
//     would derive from it is never read by fixed_window (and a change of algorithm discards the
//     state).
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
//   A block (blocked_until_ms, migration 0007) only ever starts with a denial, and only a
//     reset clears the denial, so the rules above never delete an owner's block.
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
// tests/sqlite/sqlite_gc_test.cpp runs these examples.
//
// How it works. Each table is swept in primary-key order, at most batch_rows rows per batch:
// one SELECT reads the rows after the previous batch's last key, each with whether it is
// dead, then each dead row is deleted by its key, all in one short write transaction. The
// conditions are evaluated inside that transaction, so a request that another connection
// made meanwhile counts. The events are swept first, so that the owners left without events
// go in the same gc.
#include "gc.h"

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sql/families.h"
#include "sql/fragments.h"
#include "statements.h"
#include "store.h"

namespace quota::detail {
namespace {

// The conditions on a row `s` of the swept table under which gc deletes it (:now is gc's
// now). Each algorithm's rule is restricted to its own limits; an algorithm without a rule
// keeps all its state.

// {idle}, in each owner rule: nothing that the owner's row alone shows (denials, shadow
// denials, a time ahead of gc's now) keeps it.
constexpr const char* kIdle =
    "coalesce(s.denied, 0) = 0 AND coalesce(s.shadow_denied, 0) = 0 "
    "AND coalesce(s.seen_ms, 0) <= ?1";

// Each state table's rule is its family's (src/sql/families.cpp), filled here with {idle} and
// the algorithms' fragments.

// The fragments' inputs as gc reads them: the swept row `s`, the limit `l` as it is, and gc's
// now (?1) as the time.
const sql::Bindings& row_inputs() {
  static const sql::Bindings inputs = {
      {"t", "?1"},
      {"period_ms", "l.period_ms"},
      {"maximum", "l.maximum"},
      {"capacity", "l.burst"},
      {"s_seen", "s.seen_ms"},
      {"s_period", "s.period_ms"},
      {"s_window_key", "s.window_key"},
      {"s_used", "s.used"},
      {"s_previous", "s.previous_used"},
      {"s_level", "s.level"},
      {"at_ms", "s.at_ms"},
  };
  return inputs;
}

// The fragment `name` over `bindings` and then gc's row inputs.
std::string over_row(std::string_view name, sql::Bindings bindings) {
  const sql::Bindings& inputs = row_inputs();
  bindings.insert(bindings.end(), inputs.begin(), inputs.end());
  return sql::fill(sql::ref(name), bindings);
}

// A rule with its fragments filled in for `dialect`.
std::string rule_for(const char* rule, const Dialect& dialect) {
  // Windows of period_ms: the window of now is ?1 / l.period_ms; a calendar row's window
  // counts until its end, its window_key.
  const std::string now_key = sql::fill(sql::ref("period.window_key"), row_inputs());
  const std::string row_key = over_row("period.row_key", {});
  const std::string period_counts =
      over_row("period.row_counts", {{"row_key", row_key}, {"window_key", now_key}});
  const std::string calendar_counts = over_row("calendar.row_counts", {});
  const std::string fixed = over_row(
      "fixed_window.gc_dead",
      {{"row_counts", "CASE WHEN l.calendar IS NOT NULL THEN " + calendar_counts + " ELSE " +
                          period_counts + " END"}});
  const std::string sliding =
      over_row("sliding_window.gc_dead", {{"row_key", row_key}, {"window_key", now_key}});
  const std::string start = over_row("token_bucket.start", {});
  const std::string full_level = over_row("token_bucket.full_level", {});
  const std::string bucket =
      over_row("token_bucket.gc_dead", {{"start", start}, {"full_level", full_level}});
  // An event is dead from the start of its owner's window at the clock rule's time.
  const std::string owner_t = over_row("clock.t", {{"now", "?1"}, {"s_seen", "o.seen_ms"}});
  const std::string event = over_row("sliding_log.gc_dead_event", {{"t", owner_t}});
  return sql::finish(sql::fill(rule, {{"idle", kIdle},
                                      {"fixed_window", fixed},
                                      {"sliding_window", sliding},
                                      {"token_bucket", bucket},
                                      {"dead_event", event}}),
                     dialect);
}

}  // namespace

std::vector<Sweep> sweeps(const Dialect& dialect) {
  std::vector<Sweep> all;
  for (const sql::StateTable* table : sql::sweep_order()) {
    all.push_back({table->name, table->key, rule_for(table->gc_dead, dialect)});
  }
  return all;
}

namespace {

using Key = std::vector<Value>;

// "limit_name, owner", "?3, ?4", "limit_name = ?1 AND owner = ?2": the key's parameters
// are numbered from `first`.
std::string joined(const std::vector<std::string>& key, std::string_view format,
                   std::string_view separator, std::size_t first) {
  std::string text;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (i > 0) text += separator;
    text += fmt::format(fmt::runtime(format), fmt::arg("column", key[i]), fmt::arg("n", first + i));
  }
  return text;
}

// The next rows of `sweep` after the key ?3.. (or from the first row), with whether each is
// dead; ?1 is gc's now, ?2 the batch's size.
std::string select_sql(const Sweep& sweep, bool after) {
  const std::string columns = joined(sweep.key, "{column}", ", ", 3);
  return fmt::format(
      "SELECT {columns}, ({dead}) FROM {table} AS s{where} ORDER BY {columns} LIMIT ?2",
      fmt::arg("columns", columns), fmt::arg("dead", sweep.dead), fmt::arg("table", sweep.table),
      fmt::arg("where", after ? fmt::format(" WHERE ({}) > ({})", columns,
                                            joined(sweep.key, "?{n}", ", ", 3))
                              : std::string()));
}

std::string delete_sql(const Sweep& sweep) {
  return fmt::format("DELETE FROM {} WHERE {}", sweep.table,
                     joined(sweep.key, "{column} = ?{n}", " AND ", 1));
}

// One batch's write transaction, in which no other connection writes state: SQLite's write
// lock from the start, PostgreSQL's state tables locked against writers; or a savepoint inside
// the application's open transaction.
class BatchTransaction {
 public:
  explicit BatchTransaction(Store& store) : store_(store) {
    store_.begin_exclusive(Exclusive::state);
  }
  BatchTransaction(const BatchTransaction&) = delete;
  BatchTransaction& operator=(const BatchTransaction&) = delete;
  ~BatchTransaction() {
    if (!committed_) store_.rollback();
  }
  void commit() {
    store_.commit();
    committed_ = true;
  }

 private:
  Store& store_;
  bool committed_ = false;
};

struct BatchCount {
  std::int64_t examined = 0;
  std::int64_t deleted = 0;
};

// Examines up to `batch_rows` rows of `sweep` after `cursor` (from the first row when it is
// empty), deletes the dead ones, and moves `cursor` to the last key examined.
BatchCount sweep_batch(Store& store, const Sweep& sweep, Key& cursor, std::int64_t now,
                       std::size_t batch_rows) {
  BatchTransaction transaction(store);
  std::vector<Value> parameters = {Value(now), Value(static_cast<std::int64_t>(batch_rows))};
  parameters.insert(parameters.end(), cursor.begin(), cursor.end());
  // The keys are read first and the rows deleted after: a SELECT does not promise what it
  // sees of changes made while it runs.
  const std::vector<Row> rows = store.query(select_sql(sweep, !cursor.empty()), parameters);
  const std::size_t key_size = sweep.key.size();
  BatchCount count;
  const std::string erase = delete_sql(sweep);
  for (const Row& row : rows) {
    ++count.examined;
    if (integer_of(row.at(key_size)) != 0) {
      count.deleted += store.execute(erase, Key(row.begin(), row.begin() + key_size));
    }
  }
  transaction.commit();
  if (!rows.empty()) cursor = Key(rows.back().begin(), rows.back().begin() + key_size);
  return count;
}

std::int64_t count_rows(Store& store, const std::vector<Sweep>& all) {
  std::int64_t rows = 0;
  for (const Sweep& sweep : all) {
    rows += integer_of(
        store.query(fmt::format("SELECT count(*) FROM {}", sweep.table), {}).at(0).at(0));
  }
  return rows;
}

}  // namespace

std::int64_t collect_garbage(const Locked& locked, std::int64_t now, std::size_t batch_rows,
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
  std::vector<Sweep> all;
  locked([&](Store& store) {
    all = sweeps(store.dialect());
    done.total = count_rows(store, all);
  });
  for (const Sweep& sweep : all) {
    Key cursor;
    for (bool more = true; more;) {
      BatchCount batch;
      locked([&](Store& store) { batch = sweep_batch(store, sweep, cursor, now, batch_rows); });
      done.examined += batch.examined;
      done.deleted += batch.deleted;
      more = batch.examined == static_cast<std::int64_t>(batch_rows);
      if (batch.examined > 0 && progress) progress(done);
    }
  }
  return done.deleted;
}

}  // namespace quota::detail
