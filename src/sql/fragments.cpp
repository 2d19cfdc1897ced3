// The fragment table: each algorithm's arithmetic, once per dialect (src/sql/fragments.h).
//
// The inputs (kInputs) are the columns of the decision's layers (src/statements.cpp). Counts
// saturate at 2^62; every product is bounded as the comments of each fragment say.
#include "sql/fragments.h"

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>

namespace quota::detail::sql {
namespace {

struct Fragment {
  std::string_view name;
  std::string_view sqlite;
  std::string_view postgresql;  // empty: the same text as SQLite's
};

// clang-format off
constexpr Fragment kFragments[] = {
    // The clock rule: an owner's state is evaluated at t, never before the time it remembers.
    {"clock.t", "{max}({now}, coalesce({s_seen}, 0))", ""},

    // -- Windows (fixed_window, sliding_window on quota_windows) --------------------------
    // Windows of period_ms from the epoch: window k = floor(t / period_ms); a row written
    // under another period counts in the window that holds its seen_ms.
    {"period.window_key", "{t} / {period_ms}", ""},
    {"period.row_key",
     "CASE WHEN {s_period} = {period_ms} THEN {s_window_key} ELSE {s_seen} / {period_ms} END", ""},
    {"period.window_end", "({window_key} + 1) * {period_ms}", ""},
    // Whether the row's window is the window of t or a later one (gc).
    {"period.row_counts", "{row_key} >= {window_key}", ""},
    // Calendar windows: a window's key is its end (calendar_end, src/statements.cpp).
    {"calendar.window_key", "{calendar_end}", ""},
    {"calendar.row_key", "{s_window_key}", ""},
    {"calendar.window_end", "{window_key}", ""},
    {"calendar.row_counts", "{s_window_key} > {t}", ""},
    // What remains of the current window (P - e in the docs).
    {"window.rest", "{period_ms} - {t} % {period_ms}", ""},
    // The row's count in the current window ({take}: what a refund gives back) and in the
    // previous one.
    {"window.used", "CASE WHEN {row_key} = {window_key} THEN {s_used}{take} ELSE 0 END", ""},
    {"window.previous_used",
     "CASE {row_key} WHEN {window_key} THEN {s_previous} WHEN {window_key} - 1 THEN {s_used}\n"
     "                       ELSE 0 END", ""},
    // The count after the operation, which records the cost when {records}.
    {"window.used_after",
     "{min}({used} + CASE WHEN {records} THEN {cost} ELSE 0 END, 4611686018427387904)", ""},

    // fixed_window: usage is the current window's count; the window ends at {window_end}.
    {"fixed_window.fits", "{used} + {cost} <= {maximum}", ""},
    {"fixed_window.remaining", "{maximum} - {used_after}", ""},
    {"fixed_window.retry", "{window_end} - {t}", ""},
    {"fixed_window.reset_at", "CASE WHEN {used_after} > 0 THEN {window_end} ELSE {t} END", ""},
    {"fixed_window.shown_used", "{used_after}", ""},
    // What gc may delete (besides the idle test): a row whose count no longer counts.
    {"fixed_window.gc_dead", "NOT coalesce({s_used} > 0 AND {row_counts}, FALSE)", ""},

    // sliding_window: usage is cur + prev * (P - e) / P, decided exactly in integers as
    // prev * rest <= (maximum - cur - cost) * P, where the right side is at most maximum * P
    // (<= 2^62 by the limit's definition) and the left side is compared by division, so that
    // no product can overflow whatever prev is.
    // A denied request waits inside the current window when the previous window's weight
    // alone is in the way: until prev * (rest - d) <= (maximum - need) * P, need = used_after
    // + cost. Otherwise it waits into the next window, where this window's count weighs as
    // prev did: e'' = P - floor((maximum - cost) * P / used_after) into it, or the whole of it
    // when that floor is 0.
    {"sliding_window.fits",
     "CASE WHEN {used} + {cost} <= {maximum}"
     "     THEN {previous_used} <= (({maximum} - {used} - {cost}) * {period_ms}) / {rest} ELSE FALSE END",
     ""},
    {"sliding_window.remaining",
     "CASE WHEN {used_after} >= {maximum} THEN 0"
     "     WHEN {previous_used} > (({maximum} - {used_after}) * {period_ms}) / {rest} THEN 0"
     "     ELSE (({maximum} - {used_after}) * {period_ms} - {previous_used} * {rest}) / {period_ms} END",
     ""},
    {"sliding_window.retry",
     "CASE WHEN {used_after} + {cost} <= {maximum} AND {previous_used} > 0"
     "          AND (({maximum} - {used_after} - {cost}) * {period_ms}) / {previous_used} > 0"
     "     THEN {rest} - (({maximum} - {used_after} - {cost}) * {period_ms}) / {previous_used}"
     "     ELSE {rest} + CASE WHEN {used_after} = 0 THEN 0"
     "                      ELSE {max}(0, {period_ms} - (({maximum} - {cost}) * {period_ms}) / {used_after})"
     "                 END END",
     ""},
    {"sliding_window.reset_at",
     "CASE WHEN {used_after} > 0 THEN ({window_key} + 2) * {period_ms}"
     "     WHEN {previous_used} > 0 THEN ({window_key} + 1) * {period_ms} ELSE {t} END",
     ""},
    // The usage shown, cur + ceil(prev * rest / P), is (prev / P) * rest plus the rounded-up
    // weight of r = prev % P, computed without the product r * rest (beyond 64 bits for
    // periods above 35 days): rest is split at H = 2^18 into a * H + b, so r * rest = x * H +
    // r * b with x = r * a < 2^52, and x = (x / P) * P + x % P leaves ceil(r * rest / P) =
    // (x / P) * H + ceil(((x % P) * H + r * b) / P), every term below 2^54, exact for every
    // period up to 2^35 ms.
    {"sliding_window.shown_used",
     "{used_after} + ({previous_used} / {period_ms}) * {rest} + {sliding_window.weighted_rest}", ""},
    {"sliding_window.weighted_rest",
     "(({previous_used} % {period_ms}) * ({rest} / 262144) / {period_ms}) * 262144"
     " + ((({previous_used} % {period_ms}) * ({rest} / 262144)) % {period_ms} * 262144"
     " + ({previous_used} % {period_ms}) * ({rest} % 262144) + {period_ms} - 1) / {period_ms}",
     ""},
    // gc: used counts in windows row_key and row_key + 1 (as the previous window),
    // previous_used in window row_key only.
    {"sliding_window.gc_dead",
     "NOT coalesce({s_used} > 0 AND {row_key} + 1 >= {window_key}, FALSE)"
     " AND NOT coalesce({s_previous} > 0 AND {row_key} >= {window_key}, FALSE)",
     ""},

    // -- token_bucket, on quota_buckets ---------------------------------------------------
    // level is tokens * period_ms, so a refill of maximum tokens per period adds exactly
    // maximum units per millisecond. The refill compares the elapsed time with the time to
    // fill instead of multiplying, so no product exceeds capacity * period_ms (<= 2^61 by the
    // limit's definition); a debt is floored at -2^62, two records of the whole capacity, so
    // every sum of a level and a debt stays below 2^63.
    {"token_bucket.full_level", "{capacity} * {period_ms}", ""},
    // The stored level under the limit as it is now: clamped to the capacity, or re-scaled
    // to whole tokens (rounded down, a debt floored) when the period has changed.
    {"token_bucket.start", R"(CASE
                 WHEN {s_period} = {period_ms} THEN {min}({s_level}, {capacity} * {period_ms})
                 WHEN {s_level} / {s_period} >= {capacity} THEN {capacity} * {period_ms}
                 ELSE {max}(CASE WHEN {s_level} >= 0 THEN {s_level} / {s_period}
                               ELSE -(({s_period} - 1 - {s_level}) / {s_period}) END,
                          -(4611686018427387904 / {period_ms})) * {period_ms} END)", ""},
    {"token_bucket.elapsed", "{t} - coalesce({s_seen}, {t})", ""},
    {"token_bucket.time_to_full", "({full_level} - {start} - 1) / {maximum} + 1", ""},
    // The level refilled from s_seen to t, at most full.
    {"token_bucket.refill", R"(CASE WHEN {start} >= {full_level} THEN {full_level}
               WHEN {token_bucket.elapsed} >= {token_bucket.time_to_full} THEN {full_level}
               ELSE {start} + {maximum} * ({token_bucket.elapsed}) END)", ""},
    {"token_bucket.fits", "{level} >= {cost} * {period_ms}", ""},
    // The level after the operation (recording when {records}; a debt floored at -2^62).
    {"token_bucket.level_after", R"(CASE WHEN NOT ({records}) THEN {level}
           WHEN {cost} > ({level} + 4611686018427387904) / {period_ms} THEN -4611686018427387904
           ELSE {level} - {cost} * {period_ms} END)", ""},
    {"token_bucket.remaining", "{max}({level_after} / {period_ms}, 0)", ""},
    {"token_bucket.retry", "({cost} * {period_ms} - {level_after} - 1) / {maximum} + 1", ""},
    {"token_bucket.reset_at", R"(CASE WHEN {level_after} >= {full_level} THEN {t}
         ELSE {t} + ({full_level} - {level_after} - 1) / {maximum} + 1 END)", ""},
    {"token_bucket.shown_used", R"({capacity} - CASE WHEN {level_after} >= 0 THEN {level_after} / {period_ms}
                    ELSE -(({period_ms} - 1 - {level_after}) / {period_ms}) END)", ""},
    // gc: a bucket full at t stays full at every later time, as a new owner's.
    {"token_bucket.gc_dead", "{start} >= {full_level} OR {token_bucket.elapsed} >= {token_bucket.time_to_full}",
     ""},

    // -- sliding_log, on quota_log_owners and quota_log -----------------------------------
    // Usage at t is s_total minus live_base, the running total before the first event with
    // at_ms > t - period_ms (the dialect's {live_base}). A refund gives back the newest
    // events first, down to the running total live_base + used, and the newest event left
    // is the first one that reaches that total ({newest_kept}).
    {"sliding_log.window_start", "{t} - {period_ms}", ""},
    {"sliding_log.used", "coalesce({s_total} - {live_base}, 0)", ""},
    {"sliding_log.refund_used", "{max}(coalesce({s_total} - {live_base}, 0) - {refund}, 0)", ""},
    {"sliding_log.fits", "{used} + {cost} <= {maximum}", ""},
    {"sliding_log.recorded", "CASE WHEN {records} THEN {cost} ELSE 0 END", ""},
    {"sliding_log.total",
     "CASE WHEN {recorded} = 0 THEN {s_total} WHEN {used} = 0 THEN {recorded} "
     "ELSE {s_total} + {recorded} END", ""},
    {"sliding_log.refund_total", "coalesce({live_base} + {used}, {s_total})", ""},
    {"sliding_log.newest", "{s_newest_at}", ""},
    {"sliding_log.refund_newest", "coalesce({newest_kept}, {s_newest_at})", ""},
    {"sliding_log.remaining", "{max}({maximum} - {used_after}, 0)", ""},
    {"sliding_log.shown_used", "{used_after}", ""},
    // A denial waits until `excess` units expire: until the first live event whose running
    // total covers them, or the event this request records.
    {"sliding_log.retry", "coalesce({covering_event}, {t}) + {period_ms} - {t}", ""},
    {"sliding_log.reset_at", R"(CASE WHEN {used_after} = 0 THEN {t}
         WHEN {recorded} > 0 THEN {t} + {period_ms}
         ELSE {newest} + {period_ms} END)", ""},
    {"sliding_log.newest_after", "CASE WHEN {recorded} > 0 THEN {t} ELSE {newest} END", ""},
    // gc: an event at or before the start of the owner's window at t.
    {"sliding_log.gc_dead_event", "{at_ms} <= {sliding_log.window_start}", ""},

    // -- The answer, the same for every algorithm -----------------------------------------
    // The wait of an operation: none when allowed, never when the cost exceeds the capacity,
    // else the algorithm's {retry}.
    {"answer.retry", "CASE WHEN {allowed} THEN 0 WHEN {cost} > {capacity} THEN -1 ELSE {retry} END", ""},
    // The usage shown (check, Engine::usage, the quota_usage view): an exempt owner uses no
    // quota, whatever it recorded before the exemption (kept, and counted again if the
    // exemption goes).
    {"answer.used", "CASE WHEN {policy} IS NOT DISTINCT FROM 'exempt' THEN 0 ELSE {shown_used} END", ""},

    // -- The quota_usage view (usage_view.cpp) --------------------------------------------
    // reset_at_ms as ISO 8601 text in UTC.
    {"view.reset_at_text", "strftime('%Y-%m-%dT%H:%M:%fZ', {reset_at_ms} / 1000.0, 'unixepoch')",
     "CASE WHEN {reset_at_ms} BETWEEN -62135596800000 AND 253402300799999\n"
     "            THEN to_char(timestamp '1970-01-01' + {reset_at_ms} * interval '1 millisecond',\n"
     "                         'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') END"},
};
// clang-format on

// The inputs: the decision's columns, which `finish` reads by their own names.
constexpr std::string_view kInputs[] = {
    "t",             // the time the state is evaluated at (the clock rule)
    "now",           // the request's time
    "cost",          // the request's cost
    "refund",        // a refund's units
    "maximum",       // the limit's maximum as the owner sees it
    "capacity",      // the most one request may take: maximum, or a bucket's burst
    "period_ms",     // the limit's period
    "policy",        // the owner's override policy (NULL: none)
    "allowed",       // the verdict as if enforcing
    "s_seen",        // the row's seen_ms (NULL: no row)
    "s_period",      // the row's period_ms
    "s_window_key",  // the row's window_key
    "s_used",        // the row's used
    "s_previous",    // the row's previous_used
    "s_level",       // the row's level (NULL: a full bucket)
    "s_total",       // the log owner's running total
    "s_newest_at",   // its newest event's time
    "window_key",    // the key of the window that holds t
    "row_key",       // the key of the window the row counts in
    "row_counts",    // whether the row's window is t's or later (gc)
    "calendar_end",  // a calendar window's end
    "rest",          // what remains of the current window
    "used",          // the usage before the operation
    "previous_used", // the previous window's count
    "used_after",    // the usage after the operation
    "shown_used",    // the usage the answer shows
    "full_level",    // a full bucket's level
    "start",         // the stored level under the limit as it is now
    "level",         // the level refilled to t
    "level_after",   // the level after the operation
    "live_base",     // the log's running total before its first live event
    "recorded",      // the units the operation records
    "reset_at_ms",   // when usage is back to zero
    "at_ms",         // an event's time (gc)
};

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (!first && ((c >= '0' && c <= '9') || c == '.'));
}

const Fragment* find_fragment(std::string_view name) {
  for (const Fragment& fragment : kFragments) {
    if (fragment.name == name) return &fragment;
  }
  return nullptr;
}

// The text of a same-in-both-dialects fragment; nullptr for a dialect's own or none.
const Fragment* common_fragment(std::string_view name) {
  const Fragment* fragment = find_fragment(name);
  return fragment && fragment->postgresql.empty() ? fragment : nullptr;
}

// Calls `replace(name)` for each `{name}` of `text`; a nullopt answer keeps the braces.
template <typename Replace>
std::string substitute(std::string_view text, Replace&& replace) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '{' && i + 1 < text.size() && is_name_char(text[i + 1], true)) {
      std::size_t end = i + 2;
      while (end < text.size() && is_name_char(text[end], false)) ++end;
      if (end < text.size() && text[end] == '}') {
        const std::string_view name = text.substr(i + 1, end - i - 1);
        if (std::optional<std::string> value = replace(name)) {
          out += *value;
        } else {
          out.append(text.substr(i, end + 1 - i));
        }
        i = end + 1;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

std::optional<std::string_view> dialect_value(std::string_view name, const Dialect& dialect) {
  const std::pair<std::string_view, std::string_view> values[] = {
      {"max", dialect.max},
      {"min", dialect.min},
      {"barrier", dialect.barrier},
      {"database_now", dialect.database_now},
      {"as_integer", dialect.as_integer},
      {"limit", dialect.limit},
      {"owner", dialect.owner},
      {"cost_param", dialect.cost},
      {"now_ms", dialect.now_ms},
      {"log_live_base", dialect.live_base},
      {"covering_event", dialect.covering_event},
      {"newest_kept", dialect.newest_kept},
      {"request_cost", dialect.request_cost},
      {"request_now", dialect.request_now},
  };
  for (const auto& [key, value] : values) {
    if (key == name) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string fill(std::string_view text, const Bindings& bindings) {
  return substitute(text, [&](std::string_view name) -> std::optional<std::string> {
    for (const auto& [key, value] : bindings) {
      if (key == name) return value;
    }
    if (const Fragment* fragment = common_fragment(name)) return fill(fragment->sqlite, bindings);
    return std::nullopt;
  });
}

std::string finish(std::string_view text, const Dialect& dialect) {
  return substitute(text, [&](std::string_view name) -> std::optional<std::string> {
    if (const auto value = dialect_value(name, dialect)) return std::string(*value);
    if (find_fragment(name)) return finish(fragment_text(name, dialect), dialect);
    if (std::find(std::begin(kInputs), std::end(kInputs), name) != std::end(kInputs)) {
      return std::string(name);
    }
    throw std::logic_error("SQL template names {" + std::string(name) +
                           "}, which no fragment, dialect or input defines");
  });
}

std::string ref(std::string_view name) {
  if (!find_fragment(name)) {
    throw std::logic_error("no SQL fragment named " + std::string(name));
  }
  std::string text;
  text.reserve(name.size() + 2);
  text += '{';
  text.append(name);
  text += '}';
  return text;
}

std::vector<std::string_view> fragment_names() {
  std::vector<std::string_view> names;
  for (const Fragment& fragment : kFragments) names.push_back(fragment.name);
  return names;
}

std::string_view fragment_text(std::string_view name, const Dialect& dialect) {
  const Fragment* fragment = find_fragment(name);
  if (!fragment) throw std::logic_error("no SQL fragment named " + std::string(name));
  if (dialect.name == kPostgresql.name && !fragment->postgresql.empty()) {
    return fragment->postgresql;
  }
  return fragment->sqlite;
}

}  // namespace quota::detail::sql
