#include "shown.h"

#include <fmt/format.h>

namespace quota::detail {

std::string bounded(std::string_view value) {
  std::size_t cut = value.size();
  if (cut > kShownBound) {
    cut = kShownBound;
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string shown;
  for (const char c : value.substr(0, cut)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      shown += fmt::format("\\x{:02X}", byte);
    } else {
      shown += c;
    }
  }
  if (cut < value.size()) shown += fmt::format("…({} bytes)", value.size());
  return shown;
}

std::string shell_quoted(std::string_view word) {
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace quota::detail
