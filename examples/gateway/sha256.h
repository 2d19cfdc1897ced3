// SHA-256 (FIPS 180-4), small and dependency-free, for the gateway's owner names: a service
// that limits per API key should not store the keys themselves, so it names each owner by a
// digest of its key (key_owner). sha256_test.cpp checks it against FIPS 180-4's examples.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gateway {

// The 32-byte SHA-256 digest of `data`.
std::array<std::uint8_t, 32> sha256(std::string_view data);

// The same as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

// The owner that stands for an API key: "key:" and the first 16 hex digits (64 bits) of its
// SHA-256. Readable in quota_usage and `quotactl usage`, unique among any realistic number of
// keys, and useless to whoever reads it: the key cannot be recovered from it.
std::string key_owner(std::string_view api_key);

}  // namespace gateway
