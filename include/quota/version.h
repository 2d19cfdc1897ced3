// The library's version; CMake reads it from this line.
#pragma once

#define QUOTA_VERSION_STRING "0.1.0"

namespace quota {
inline constexpr const char* kVersion = QUOTA_VERSION_STRING;
}
