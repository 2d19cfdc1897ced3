// The one source of each algorithm's arithmetic: a table of named SQL fragments, and the one
// mechanism that fills them in.
//
// A fragment is written once (per dialect where SQLite and PostgreSQL differ) over named inputs
// in braces: `{t}` is the time the owner's state is evaluated at, `{used_after}` the usage
// after the operation, `{s_used}` the stored count, and so on (kInputs in fragments.cpp lists
// them, each with its meaning). A fragment may name another fragment (`{window.rest}`), a
// dialect fragment (`{max}`, src/sql/dialect.h) or an input. The decision statements
// (src/statements.cpp) read each input as a column of the same name; gc (src/gc.cpp) and the
// plain statements' RETURNING bind the inputs to other expressions (`{t}` is gc's ?1), and the
// quota_usage view (usage_view below) is the check's decision over every owner's row. So the
// same text decides, answers, collects garbage and shows usage.
//
// Filling: `fill(text, bindings)` replaces each `{name}` of `text` that `bindings` names by
// its value (verbatim: a value is not scanned again), replaces each `{fragment.name}` of the
// table by that fragment filled with the same bindings, and leaves every other name for a
// later fill. `finish(text, dialect)` fills what is left: the dialect's fragments, the table's,
// and each input by the column of its name; any other name left is a bug (std::logic_error).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sql/dialect.h"

namespace quota::detail::sql {

// name -> value; later pairs do not override earlier ones (the first binding of a name wins).
using Bindings = std::vector<std::pair<std::string_view, std::string>>;

// `text` with the names of `bindings` and of the fragment table filled in (see above).
std::string fill(std::string_view text, const Bindings& bindings = {});

// `text` made whole for `dialect`: every name left filled, or std::logic_error.
std::string finish(std::string_view text, const Dialect& dialect);

// The fragment `name` ("fixed_window.remaining") as written, in braces: "{fixed_window.remaining}"
// (to pass as a binding's value, filled later). Throws std::logic_error for a name the table
// lacks, so that a misspelt name fails at build time of the statements, not in the database.
std::string ref(std::string_view name);

// Every fragment's name, in the table's order (for the golden files and the docs).
std::vector<std::string_view> fragment_names();

// The text of fragment `name` in `dialect`, unfilled.
std::string_view fragment_text(std::string_view name, const Dialect& dialect);

}  // namespace quota::detail::sql
