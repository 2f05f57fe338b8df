#include "kforge/core/number_text.h"

#include <algorithm>
#include <cstdio>

namespace kforge {
namespace {

// Enough for any double in either format with the digit counts callers use
// ("%.17g" is 24 characters; "%.2f" of 1e308 is 312).
std::string printed(const char* format, int precision, double value) {
  char buf[400];
  const int n = std::snprintf(buf, sizeof(buf), format, precision, value);
  if (n < 0) return "?";
  return std::string(buf, std::min(static_cast<size_t>(n), sizeof(buf) - 1));
}

}  // namespace

std::string format_significant(double value, int digits) { return printed("%.*g", digits, value); }

std::string format_fixed(double value, int decimals) { return printed("%.*f", decimals, value); }

}  // namespace kforge
