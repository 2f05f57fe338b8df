// Typed reads of a term's optional parameters with their defaults. Errors come
// from Field, so they name the file, the field path and the YAML line.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/input_limits.h"

namespace kforge::reward::internal {

// Every number of a reward config is within +-limits::kMaxRewardMagnitude,
// so weighted sums of terms stay finite.
inline double bounded_number(const Field& f) {
  return f.as_number_in(-limits::kMaxRewardMagnitude, limits::kMaxRewardMagnitude);
}

inline double number_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  return f ? bounded_number(*f) : fallback;
}

// The errors say what the field means first ("a number >= 0"), then the
// bound that only absurd values reach.
inline double nonnegative_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  if (!f) return fallback;
  const double v = f->as_nonnegative_number();
  if (v > limits::kMaxRewardMagnitude) f->fail("a number >= 0 and at most 1e6 (limits::kMaxRewardMagnitude)");
  return v;
}

inline double positive_or(ObjectReader& r, const std::string& key, double fallback) {
  auto f = r.optional(key);
  if (!f) return fallback;
  const double v = f->as_positive_number();
  if (v > limits::kMaxRewardMagnitude) f->fail("a positive number, at most 1e6 (limits::kMaxRewardMagnitude)");
  return v;
}

// Penalties are <= 0: a positive "penalty" is a sign error that would pay the
// policy for failing or cheating, so it is rejected rather than obeyed.
inline double penalty_value(const Field& f) {
  const double v = bounded_number(f);
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
  const double hi = hi_field ? bounded_number(*hi_field) : hi_default;
  if (!(lo < hi)) {
    const std::string message = "hi (" + std::to_string(hi) + ") must be greater than lo (" + std::to_string(lo) + ")";
    if (hi_field) hi_field->fail_message(message);
    r.required("lo").fail_message(message);
  }
  return {lo, hi};
}

// `speedup_estimate`: "point" (the default: the measured speedup, as every
// config before it) or "demonstrated" (SpeedFacts::demonstrated_eager: the
// speedup the interval shows relative to the term's pivot).
inline bool demonstrated_estimate(ObjectReader& r) {
  static const std::vector<std::string> kEstimates = {"point", "demonstrated"};
  return enum_or(r, "speedup_estimate", kEstimates, "point") == "demonstrated";
}
inline const char* estimate_name(bool demonstrated) { return demonstrated ? "demonstrated" : "point"; }

// `decision_resolution`: the reward difference below which a continuous
// term does not care, so timing may stop once the reward's uncertainty is
// within it (EvalOptions::decision_resolution, off unless the environment's
// eval.stop_when_decided is set). In reward units, > 0.
inline double decision_resolution_or(ObjectReader& r) { return positive_or(r, "decision_resolution", 0.05); }

// The smaller positive of two log resolutions (0 means none asked).
inline double tighter(double current, double asked) { return current > 0 ? std::min(current, asked) : asked; }

inline double clip(double v, double lo, double hi) { return std::min(hi, std::max(lo, v)); }

}  // namespace kforge::reward::internal
