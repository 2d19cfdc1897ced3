// Engine::gc's work, apart from the Engine so that its SQL lives in one file (src/gc.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "quota/engine.h"

namespace SQLite {
class Database;
}

namespace quota::detail {

// Runs `work` with the connection to itself: the engine's lock held, SQLite's exceptions
// turned into quota::Error.
using Exclusive = std::function<void(const std::function<void(SQLite::Database&)>& work)>;

// Engine::gc at `now`: see its contract in include/quota/engine.h. Each batch runs in one
// call of `exclusive`; `progress` is called between them.
std::int64_t collect_garbage(const Exclusive& exclusive, std::int64_t now, std::size_t batch_rows,
                             const std::function<void(const GcProgress&)>& progress);

}  // namespace quota::detail
