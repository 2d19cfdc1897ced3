#include "store.h"

namespace quota::detail {

std::int64_t integer_of(const Value& value) {
  if (const auto* integer = std::get_if<std::int64_t>(&value)) return *integer;
  return 0;
}

std::string text_of(const Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  return {};
}

bool is_null(const Value& value) { return std::holds_alternative<std::monostate>(value); }

}  // namespace quota::detail
