// Values as messages show them: bounded, and ready to paste.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace quota::detail {

// `text` with whatever looks like a secret in it written "***", for a message that echoes
// what a user typed (a connection string given where it does not belong, a file name that
// was meant as one): the password of a user-info, from the first ':' after "//" (or after
// the start of a word) to the word's last '@' ("u:***@host", "postgresql://u:***@h/db",
// "//u:***@h"), and the value of a key whose name holds "pass", "pwd" or "secret" in any case
// and percent-encoding ("password=***", "PASSWORD=***", "pass%77ord=***"). Words end at
// white space and quotes. It may hide more than a secret, never less of one.
std::string redacted(std::string_view text);

// `value` for a message, redacted: at most kShownBound bytes of it (cut between UTF-8 characters),
// each control character written \xNN, and then "…(N bytes)" saying how long the whole was, so that
// a hostile value (a 10 MB name, a line break) never makes a hostile message.
inline constexpr std::size_t kShownBound = 64;
std::string bounded(std::string_view value);

// `word` quoted for a POSIX shell ('…', with each ' written '\''), so that a command a
// message suggests pastes as it is.
std::string shell_quoted(std::string_view word);

}  // namespace quota::detail
