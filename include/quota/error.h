// The one exception type the library throws.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "quota/export.h"

namespace quota {

enum class ErrorCode {
  invalid_argument,   // a bad name, owner, cost, number or option; nothing was changed
  unknown_limit,      // no limit has that name
  busy,               // the database stayed locked past Options::busy_timeout
  schema_too_new,     // the file was migrated by a newer build
  not_migrated,       // the file lacks pending migrations and Options::migrate is off
  checksum_mismatch,  // an applied migration's text differs from the one built in
  not_a_database,     // the file is not a SQLite database
  io,                 // the file cannot be opened, read or written
  // The database refused the connection's role a privilege it needs (PostgreSQL's
  // insufficient_privilege): a configuration error, not an outage, so the failure policy
  // never answers it (FailurePolicy::fail_open fails closed on it too). Grant what
  // docs/postgresql-roles.sql grants, or run what changes limits and migrates as the owner.
  permission_denied,
  // An idempotency key already used, for the same limit and owner within its lifetime, for
  // another request (another operation or cost, or a consume_all over another set of limits):
  // nothing was changed. Use a new key for a new request. A key is per limit and owner: the
  // same key on another limit or for another owner is not a conflict.
  idempotency_conflict,
};

QUOTA_API std::string_view to_string(ErrorCode code);

// The candidates that `word` most likely means, as a "did you mean" would offer them: those
// the fewest edits away (a letter added, removed, changed, or two neighbours swapped), at
// most 1 edit for a word of up to 4 characters and 2 for a longer one, a difference of case
// alone counting as closest of all. Empty when `word` is itself a candidate, or nothing is
// that close. Leading dashes do not count towards the length (for option names).
QUOTA_API std::vector<std::string> likely_meant(std::string_view word,
                                                const std::vector<std::string>& candidates);

// `text` with whatever looks like a secret in it written "***": a user-info's password
// ("u:***@host", "postgresql://u:***@h/db", "//u:***@h") and the value of a key whose name
// holds "pass", "pwd" or "secret" in any case or percent-encoding ("password=***",
// "PASSWORD=***"). For a message that echoes what a user typed, where a connection string may
// have been given by mistake (quotactl passes every error line through it). It may hide more
// than a secret, never less of one.
QUOTA_API std::string redacted(std::string_view text);

// `value` as the library quotes a bad value in its messages, redacted: at most 64 bytes of it
// (cut between UTF-8 characters), each control character written \xNN, then "…(N bytes)" when it
// was longer, so that a hostile value (a 10 MB name, a line break) never makes a hostile message.
// For programs that report bad input the way the library does (quotactl uses it).
QUOTA_API std::string bounded(std::string_view value);

// Thrown for every failure; the message says what happened and what to do.
class QUOTA_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  // An error about one limit (unknown_limit) also names it, and the stored limits whose names
  // are closest to it (likely_meant), so that a program can word the message its own way
  // (quotactl does).
  Error(ErrorCode code, const std::string& message, std::string_view limit,
        std::vector<std::string> meant = {})
      : std::runtime_error(message),
        code_(code),
        about_(std::make_shared<const About>(About{std::string(limit), std::move(meant)})) {}

  ErrorCode code() const noexcept { return code_; }
  // The name of the limit an unknown_limit error is about; empty for other errors.
  std::string_view limit() const noexcept { return about_ ? about_->limit : std::string_view(); }
  // For an unknown_limit error: the names of stored limits the caller likely meant (a typo
  // or a different case away), closest first; often empty.
  const std::vector<std::string>& meant() const noexcept {
    static const std::vector<std::string> none;
    return about_ ? about_->meant : none;
  }

 private:
  struct About {
    std::string limit;
    std::vector<std::string> meant;
  };
  ErrorCode code_;
  std::shared_ptr<const About> about_;  // shared, so that copying the error never throws
};

}  // namespace quota
