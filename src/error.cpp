#include "quota/error.h"

#include <algorithm>

#include "shown.h"

namespace quota {
namespace {

// ASCII letters in lower case, the rest as it is.
std::string folded(std::string_view text) {
  std::string result(text);
  for (char& c : result) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return result;
}

// The optimal string alignment distance: Levenshtein's, with a swap of two neighbouring
// characters counting 1 (--cots for --cost).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string bounded(std::string_view value) { return detail::bounded(value); }
std::string redacted(std::string_view text) { return detail::redacted(text); }

std::vector<std::string> likely_meant(std::string_view word,
                                      const std::vector<std::string>& candidates) {
  const std::size_t length = word.size() - std::min(word.find_first_not_of('-'), word.size());
  const std::size_t most = std::min<std::size_t>(length <= 4 ? 1 : 2, length - (length > 0));
  std::vector<std::string> closest;
  if (std::find(candidates.begin(), candidates.end(), word) != candidates.end()) return closest;
  const std::string folded_word = folded(word);
  std::size_t best = most;
  for (const std::string& candidate : candidates) {
    // The distance is at least the difference in length (and a long word is not compared).
    const std::size_t longer = std::max(word.size(), candidate.size());
    if (longer - std::min(word.size(), candidate.size()) > best) continue;
    const std::size_t distance = edit_distance(folded_word, folded(candidate));
    if (distance > best) continue;
    if (distance < best) closest.clear();
    best = distance;
    if (std::find(closest.begin(), closest.end(), candidate) == closest.end()) {
      closest.push_back(candidate);
    }
  }
  return closest;
}

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
    case ErrorCode::idempotency_conflict:
      return "idempotency_conflict";
  }
  return "?";
}

}  // namespace quota
