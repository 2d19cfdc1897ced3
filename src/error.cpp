#include "quota/error.h"

namespace quota {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::unknown_limit:
      return "unknown_limit";
    case ErrorCode::busy:
      return "busy";
    case ErrorCode::schema_too_new:
      return "schema_too_new";
    case ErrorCode::not_migrated:
      return "not_migrated";
    case ErrorCode::checksum_mismatch:
      return "checksum_mismatch";
    case ErrorCode::not_a_database:
      return "not_a_database";
    case ErrorCode::io:
      return "io";
    case ErrorCode::permission_denied:
      return "permission_denied";
  }
  return "?";
}

}  // namespace quota
