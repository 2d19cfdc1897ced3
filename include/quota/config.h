// Limits as configuration: a TOML file that declares limits (and optionally overrides), kept
// under version control and applied with Engine::apply or `quotactl apply FILE`.
//
//   # limits.toml
//   [[limit]]
//   name = "send_message"
//   algorithm = "sliding_log"      # the default
//   max = 10
//   per = "1m"                     # a DURATION (500ms, 30s, 1h30m) or day, week, month, year
//
//   [[override]]
//   limit = "send_message"         # a limit of this file, or "*" for every limit
//   owner = "u42"
//   max = 20                       # or: policy = "exempt" / "deny"
//
//   quota::Config config = quota::Config::load("limits.toml");
//   for (const quota::Change& change : engine.apply(config, {.dry_run = true})) show(change);
//
// A file is read whole before anything is applied: any error (TOML syntax, an unknown key, a
// value of the wrong type or out of range, a name given twice, two limit names that differ
// only in case, an override of a limit the file does not declare) is an
// Error(invalid_argument) whose message starts with "FILE:LINE:COLUMN: " at the first error,
// and nothing is changed. A file that cannot be read to its end is refused as well, never
// taken for a shorter one.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/export.h"
#include "quota/limit.h"
#include "quota/policy.h"

namespace quota {

// The keys of a [[limit]] table: name (required), algorithm (default sliding_log), max
// (required), per (required: a DURATION, or a calendar unit day/week/month/year, which makes a
// fixed_window calendar limit), burst (token_bucket only), shadow (default false), block (a
// DURATION), utc_offset ("+09:00"; calendar only), anchor (a TOML date-time with an offset, or
// Unix ms; calendar only). The keys of an [[override]] table: limit and owner (required),
// policy ("maximum", the default, "exempt" or "deny"), max (required for maximum, refused
// otherwise), burst (maximum on a token bucket only).
struct QUOTA_API Config {
  std::vector<Limit> limits;        // in the order of the file, each name once
  std::vector<Override> overrides;  // in the order of the file, each (limit, owner) once

  // Reads and validates the TOML file at `path`, whole. Throws Error: invalid_argument for a
  // file that does not exist, is neither a regular file nor a pipe (FIFO), is larger than
  // kConfigurationBound, or is not a valid configuration (the message starts with
  // "PATH:LINE:COLUMN: " where the file is wrong); io for one that cannot be opened or read
  // to its end (a read error is never taken for the end of the file), and for a named pipe
  // that no writer opens within `writer_wait` (it is not taken for an empty file either).
  static Config load(const std::string& path,
                     std::chrono::milliseconds writer_wait = std::chrono::seconds(5));
  // The same for what descriptor `fd` holds from its current offset to its end (standard
  // input for `quotactl apply -`): a regular file or a pipe, read until end of file however
  // long the writer takes; `source` names it in messages. The descriptor stays open.
  static Config read(int fd, std::string_view source);
  // The same for TOML text; `source` names it in messages.
  static Config parse(std::string_view text, std::string_view source = "configuration");
};

// The largest configuration file that Config::load and Config::read accept: 16 MiB.
inline constexpr std::size_t kConfigurationBound = std::size_t{16} << 20;

// DURATION: a positive whole number and a unit, ms, s, m (or min), h, d or w (500ms, 30s, 1m,
// 1h, 1d, 1w), or several such parts from the largest unit down, each unit once (1h30m,
// 2d12h); at least 1ms and at most kPeriodBound (366 days). Throws Error(invalid_argument)
// naming `what` (e.g. "--per") otherwise.
QUOTA_API std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what);

// What Engine::apply does (or, dry, would do) to one limit or override.
enum class ChangeKind {
  create,  // "+ create": the file declares it, the database lacks it
  change,  // "~ change": both have it, with different numbers
  remove,  // "- remove": the database has it, the file does not (with ApplyOptions::prune)
};

// "create", "change" or "remove".
QUOTA_API std::string_view to_string(ChangeKind kind);

struct Change {
  ChangeKind kind = ChangeKind::create;
  // A change of a limit: the limit as stored (change, remove) and as declared (create, change).
  std::optional<Limit> limit_before = std::nullopt;
  std::optional<Limit> limit_after = std::nullopt;
  // A change of an override: the same, as stored and as declared.
  std::optional<Override> override_before = std::nullopt;
  std::optional<Override> override_after = std::nullopt;

  bool is_limit() const { return limit_before || limit_after; }
};

struct ApplyOptions {
  // Also remove what the file does not declare: every other limit (with its state and its
  // overrides) and every other override. Off (the default): they are left alone.
  bool prune = false;
  // Work out the changes and change nothing.
  bool dry_run = false;
  // With prune, accept a configuration that declares no limit, which removes every limit
  // and its state. Off (the default): such an apply (dry run or not) throws
  // Error(invalid_argument) before it reads the database, as a file emptied by mistake (a
  // broken deploy) is likelier than the wish to remove everything.
  bool allow_empty = false;
};

}  // namespace quota
