// Values as messages show them: bounded, and ready to paste.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace quota::detail {

// `value` for a message: at most kShownBound bytes of it (cut between UTF-8 characters), each
// control character written \xNN, and then "…(N bytes)" saying how long the whole was, so
// that a hostile value (a 10 MB name, a line break) never makes a hostile message.
inline constexpr std::size_t kShownBound = 64;
std::string bounded(std::string_view value);

// `word` quoted for a POSIX shell ('…', with each ' written '\''), so that a command a
// message suggests pastes as it is.
std::string shell_quoted(std::string_view word);

}  // namespace quota::detail
