// The one random source of data synthesis. Every decision draws from an Rng
// seeded from (run seed, slot, attempt, purpose), so a task depends only on
// those numbers: never on thread scheduling, timing or the standard library's
// distributions (whose output differs between implementations).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace kforge::synth {

// splitmix64 step: the mixing function used to derive seeds.
uint64_t mix64(uint64_t x);
// A seed derived from a base and a list of integers (order matters).
uint64_t derive_seed(uint64_t base, std::initializer_list<uint64_t> parts);

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  // Uniform in [0, 1).
  double uniform();
  // Uniform integer in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi);
  bool chance(double p);
  // Index drawn with probability proportional to weights (all >= 0, sum > 0).
  size_t weighted(const std::vector<double>& weights);
  // An integer drawn log-uniformly in [lo, hi].
  int64_t log_uniform(int64_t lo, int64_t hi);
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[static_cast<size_t>(range(0, static_cast<int64_t>(items.size()) - 1))];
  }

 private:
  uint64_t state_[4];
};

}  // namespace kforge::synth
