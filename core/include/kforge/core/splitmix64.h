// SplitMix64's output function (Steele, Lea, Flood 2014): a bijection of the
// 64-bit integers that spreads nearby inputs (seed 1, 2, 3...) across the
// whole range. The one copy every seed derivation in the tree uses: the
// synthesizer's tasks, the environment's verification and timing inputs and
// the rollout's draws depend on its exact values.
#pragma once

#include <cstdint>

namespace kforge {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Pinned: seeds derived before this header existed must keep their values.
static_assert(splitmix64(0) == 0xe220a8397b1dcdafULL && splitmix64(1) == 0x910a2dec89025cc1ULL);

}  // namespace kforge
