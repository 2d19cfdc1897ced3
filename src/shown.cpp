#include "shown.h"

#include <fmt/format.h>

#include <algorithm>

namespace quota::detail {

namespace {

bool ends_word(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\'' ||
         c == '"' || c == '`';
}

bool is_key_character(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '%' || c == '.' || c == '-';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A key as a parser would read it: %HH decoded, in lower case.
std::string key_read(std::string_view key) {
  std::string read;
  for (std::size_t at = 0; at < key.size(); ++at) {
    char c = key[at];
    if (c == '%' && at + 2 < key.size() && hex_digit(key[at + 1]) >= 0 &&
        hex_digit(key[at + 2]) >= 0) {
      c = static_cast<char>(hex_digit(key[at + 1]) * 16 + hex_digit(key[at + 2]));
      at += 2;
    }
    read += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return read;
}

bool names_secret(std::string_view key) {
  const std::string read = key_read(key);
  return read.find("pass") != std::string::npos || read.find("pwd") != std::string::npos ||
         read.find("secret") != std::string::npos;
}

// The values of secret keys: KEY=VALUE, the value to the end of its word or of an '&' or ';'
// (a URI's query), or between quotes when it begins with one (libpq's key='a b').
std::string without_secret_values(std::string_view text) {
  std::string result;
  std::size_t copied = 0;
  for (std::size_t equals = text.find('='); equals != std::string_view::npos;
       equals = text.find('=', equals + 1)) {
    std::size_t key = equals;
    while (key > copied && is_key_character(text[key - 1])) --key;
    if (key == equals || !names_secret(text.substr(key, equals - key))) continue;
    std::size_t begin = equals + 1;
    std::size_t end = begin;
    if (begin < text.size() && (text[begin] == '\'' || text[begin] == '"')) {
      const char quote = text[begin];
      ++begin;
      end = begin;
      while (end < text.size() && text[end] != quote) end += text[end] == '\\' ? 2 : 1;
      end = std::min(end, text.size());
    } else {
      while (end < text.size() && !ends_word(text[end]) && text[end] != '&' && text[end] != ';') {
        ++end;
      }
    }
    result.append(text.substr(copied, begin - copied));
    result += "***";
    copied = end;
    equals = end == 0 ? 0 : end - 1;
  }
  result.append(text.substr(std::min(copied, text.size())));
  return result;
}

// The password of a word's user-info: from the first ':' after "//" (or the word's start) to
// its last '@'.
std::string without_user_info_passwords(std::string_view text) {
  std::string result;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = begin;
    while (end < text.size() && !ends_word(text[end])) ++end;
    const std::string_view word = text.substr(begin, end - begin);
    const std::size_t at = word.rfind('@');
    std::size_t authority = word.find("//");
    authority = (authority == std::string_view::npos || authority > at) ? 0 : authority + 2;
    const std::size_t colon = at == std::string_view::npos ? at : word.find(':', authority);
    if (colon != std::string_view::npos && colon < at &&
        word.substr(colon + 1, at - colon - 1) != "***") {
      result.append(word.substr(0, colon + 1));
      result += "***";
      result.append(word.substr(at));
    } else {
      result.append(word);
    }
    if (end < text.size()) result += text[end];
    begin = end + 1;
  }
  return result;
}

}  // namespace

std::string redacted(std::string_view text) {
  return without_user_info_passwords(without_secret_values(text));
}

std::string bounded(std::string_view whole) {
  const std::string value = redacted(whole);
  std::size_t cut = value.size();
  if (cut > kShownBound) {
    cut = kShownBound;
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string shown;
  for (const char c : std::string_view(value).substr(0, cut)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      shown += fmt::format("\\x{:02X}", byte);
    } else {
      shown += c;
    }
  }
  if (cut < value.size()) shown += fmt::format("…({} bytes)", value.size());
  return shown;
}

std::string shell_quoted(std::string_view word) {
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace quota::detail
