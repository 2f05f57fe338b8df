#include "kforge/data_synth/rng.h"

#include <cmath>

#include "kforge/core/splitmix64.h"

namespace kforge::synth {

uint64_t mix64(uint64_t x) { return splitmix64(x); }

uint64_t derive_seed(uint64_t base, std::initializer_list<uint64_t> parts) {
  uint64_t h = mix64(base);
  for (uint64_t p : parts) h = mix64(h ^ mix64(p + 0x632be59bd9b4e019ull));
  return h;
}

// xoshiro256**: small, fast and fully specified, so a seed means the same
// tasks on every platform.
Rng::Rng(uint64_t seed) {
  uint64_t s = seed;
  for (auto& word : state_) {
    s = mix64(s);
    word = s;
  }
}

uint64_t Rng::next() {
  auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int64_t Rng::range(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);
}

bool Rng::chance(double p) { return uniform() < p; }

size_t Rng::weighted(const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  double x = uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return i;
    x -= weights[i];
  }
  return weights.size() - 1;
}

int64_t Rng::log_uniform(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const double a = std::log(static_cast<double>(lo)), b = std::log(static_cast<double>(hi) + 1.0);
  const auto v = static_cast<int64_t>(std::floor(std::exp(a + uniform() * (b - a))));
  return v < lo ? lo : (v > hi ? hi : v);
}

}  // namespace kforge::synth
