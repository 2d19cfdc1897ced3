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

Result result_of(const Row& row, std::size_t first) {
  Result result;
  result.allowed = integer_of(row.at(first)) != 0;
  result.reason = parse_reason(text_of(row.at(first + 1))).value_or(Reason::rate_limited);
  result.remaining = integer_of(row.at(first + 2));
  result.retry_after_ms = integer_of(row.at(first + 3));
  result.reset_at_ms = integer_of(row.at(first + 4));
  result.denied = integer_of(row.at(first + 5));
  result.shadow_denied = integer_of(row.at(first + 6)) != 0;
  return result;
}

}  // namespace quota::detail
