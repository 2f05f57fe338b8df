// Field helpers shared by the typed report summaries (timing_summary.cpp,
// profile_summary.cpp): how an optional statistic is written and read back.
#pragma once

#include <cmath>
#include <optional>

#include "kforge/core/document.h"

namespace kforge::internal {

// NaN and infinities have no JSON form: an optional statistic that is not
// finite is left out rather than written as a number nobody can parse back.
inline void put(json& j, const char* key, const std::optional<double>& v) {
  if (v && std::isfinite(*v)) j[key] = *v;
}

inline std::optional<double> optional_number(ObjectReader& r, const char* key) {
  auto f = r.optional(key);
  if (!f || f->value().is_null()) return std::nullopt;
  return f->as_number();
}

// Diagnostics are taken as they come: their shape is the producer's business
// and a new key there must not make a report unreadable.
inline json optional_value(ObjectReader& r, const char* key) {
  auto f = r.optional(key);
  return f ? f->value() : json(nullptr);
}

}  // namespace kforge::internal
