// Engine::gc's work, apart from the Engine so that its SQL lives in one file (src/gc.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quota/engine.h"

namespace quota::detail {

class Store;
struct Dialect;

// A table that gc sweeps: a row is deleted when `dead` (an SQL expression over the row `s`
// and gc's now ?1, generated from the algorithms' fragments, src/sql/fragments.cpp) holds.
struct Sweep {
  const char* table;
  std::vector<std::string> key;  // its unique key's columns, in the index's order
  std::string dead;
};

// The tables gc sweeps, in order, with their rules in `dialect`.
std::vector<Sweep> sweeps(const Dialect& dialect);

// Runs `work` with the engine's store, the engine's lock held.
using Locked = std::function<void(const std::function<void(Store&)>& work)>;

// Engine::gc at `now`: see its contract in include/quota/engine.h. Each batch runs in one
// call of `locked`; `progress` is called between them.
std::int64_t collect_garbage(const Locked& locked, std::int64_t now, std::size_t batch_rows,
                             const std::function<void(const GcProgress&)>& progress);

}  // namespace quota::detail
