// Engine::gc's work, apart from the Engine so that its SQL lives in one file (src/gc.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "quota/engine.h"

namespace quota::detail {

class Store;

// Runs `work` with the engine's store, the engine's lock held.
using Locked = std::function<void(const std::function<void(Store&)>& work)>;

// Engine::gc at `now`: see its contract in include/quota/engine.h. Each batch runs in one
// call of `locked`; `progress` is called between them.
std::int64_t collect_garbage(const Locked& locked, std::int64_t now, std::size_t batch_rows,
                             const std::function<void(const GcProgress&)>& progress);

}  // namespace quota::detail
