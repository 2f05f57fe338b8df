// String helpers shared by the parsers and the tools' renderings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/core/trim.h"

namespace kforge::env::internal {

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

using ::kforge::trim;

inline std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// "4096 B", "48.0 KiB" (exact bytes below 10 KiB, where they matter most).
std::string format_bytes(int64_t bytes);
// "62.5%"
std::string format_percent(double fraction);
// Fixed-point with `digits` decimals, trailing zeros kept ("1.50").
std::string format_fixed(double value, int digits);

}  // namespace kforge::env::internal
