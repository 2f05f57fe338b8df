// Timing samples drawn from laws whose speedup is known, for the tests of the
// speedup's interval and of what the reward makes of it. Deterministic: the
// draws are SplitMix64 of a counter, turned into uniforms, normals (Box-Muller)
// and exponentials here, so no standard library's distribution code (which
// differs between implementations) decides a verdict.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kforge/core/splitmix64.h"

namespace kforge::judge::testing {

class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(splitmix64(seed)) {}

  double uniform() {  // in (0, 1)
    state_ = splitmix64(state_);
    return (static_cast<double>(state_ >> 11) + 0.5) / 9007199254740992.0;
  }
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  double exponential(double mean) { return -mean * std::log(uniform()); }

 private:
  uint64_t state_;
};

// One side's time per call, as a multiple of its typical (median) time.
enum class Noise {
  kLogNormal,  // exp(0.1 N): a quiet GPU-like spread
  kPreempted,  // 1 + Exp(0.03), and 1 round in 10 preempted (x 2 to 6): a busy CPU
  kHeavyTail,  // exp(0.3 N) plus Exp(0.2): wide and skewed
};

// A draw of one side's noise whose median is exactly 1 for kLogNormal; the
// others' medians are what they are, the same for both sides, so the ratio
// of two sides' medians is still the scale between them.
inline double noise(Noise kind, Draws& d) {
  switch (kind) {
    case Noise::kLogNormal:
      return std::exp(0.1 * d.normal());
    case Noise::kPreempted: {
      double x = 1.0 + d.exponential(0.03);
      if (d.uniform() < 0.1) x *= 2.0 + 4.0 * d.uniform();
      return x;
    }
    case Noise::kHeavyTail:
      return std::exp(0.3 * d.normal()) + d.exponential(0.2);
  }
  return 1.0;
}

// `rounds` interleaved rounds of a reference `ratio` times slower than the
// candidate, both sides with the same law of noise and each round scaled by
// a common drift (the machine's load of that moment) that pairing cancels.
struct PairedRounds {
  std::vector<double> reference, candidate;
};

inline PairedRounds paired_rounds(double ratio, Noise kind, size_t rounds, Draws& d, double drift = 0.0) {
  PairedRounds out;
  for (size_t k = 0; k < rounds; ++k) {
    const double common = std::exp(drift * d.normal());
    out.reference.push_back(ratio * common * noise(kind, d));
    out.candidate.push_back(common * noise(kind, d));
  }
  return out;
}

}  // namespace kforge::judge::testing
