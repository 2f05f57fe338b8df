// Text without the whitespace at either end: the one copy the parsers of
// compiler diagnostics, tool output and observations share.
#pragma once

#include <string>
#include <string_view>

namespace kforge {

// `s` without leading and trailing characters from `whitespace`.
inline std::string trim(std::string_view s, std::string_view whitespace = " \t\r\n") {
  const size_t begin = s.find_first_not_of(whitespace);
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(whitespace) - begin + 1));
}

}  // namespace kforge
