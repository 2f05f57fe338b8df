// Typed reads of a term's optional parameters with their defaults. Errors come
// from Field, so they name the file, the field path and the YAML line.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kforge/core/document.h"

namespace kforge::reward::internal {

inline double number_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  return f ? f->as_number() : fallback;
}

inline double nonnegative_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  return f ? f->as_nonnegative_number() : fallback;
}

inline double positive_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  return f ? f->as_positive_number() : fallback;
}

// Penalties are <= 0: a positive "penalty" is a sign error that would pay the
// policy for failing or cheating, so it is rejected rather than obeyed.
inline double penalty_value(const Field& f) {
  const double v = f.as_number();
  if (v > 0.0) f.fail("a number <= 0 (a penalty)");
  return v;
}

inline double penalty_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  return f ? penalty_value(*f) : fallback;
}

inline std::string enum_or(ObjectReader& r, const std::string& key, const std::vector<std::string>& allowed,
                           const std::string& fallback) {
  auto f = r.optional(key);
  return f ? f->as_enum(allowed) : fallback;
}

// Reads `lo` and `hi` and checks lo < hi, naming `hi` when they are crossed.
inline std::pair<double, double> clip_bounds(ObjectReader& r, double lo_default, double hi_default) {
  const double lo = number_or(r, "lo", lo_default);
  auto hi_field = r.optional("hi");
  const double hi = hi_field ? hi_field->as_number() : hi_default;
  if (!(lo < hi)) {
    const std::string message = "hi (" + std::to_string(hi) + ") must be greater than lo (" + std::to_string(lo) + ")";
    if (hi_field) hi_field->fail_message(message);
    r.required("lo").fail_message(message);
  }
  return {lo, hi};
}

inline double clip(double v, double lo, double hi) { return std::min(hi, std::max(lo, v)); }

}  // namespace kforge::reward::internal
