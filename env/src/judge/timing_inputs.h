// Inputs for timed calls: different contents for every call
// (docs/architecture.md#timing, #reward-hacking), so that caching outputs
// across calls, keyed on anything (pointers, shapes, or the contents
// themselves), never pays during timing.
//
// Rotating a few fixed input sets is not enough: a candidate that remembers
// the outputs of each set (keyed on a few input values, or by comparing whole
// inputs, which for a matmul is far cheaper than computing it) replays them
// once every set has been seen. Drawing fresh inputs for every call is exact
// but costs a random-number pass per call; on the CPU backend ATen draws
// normals at ~30 ns per element, more than most kernels being timed.
//
// So a pool of `pool_sets` sets is drawn once (ref::make_inputs with seeds
// that are random per evaluation), and each round derives a new set from two
// different pool sets a and b, each rolled (flat, circular) by its own random
// offset, combined so that each element keeps the task's init distribution:
//   normal(μ, σ)          μ + (a-μ)·cos θ + (b-μ)·sin θ   (θ random per round)
//   uniform [lo, hi)      lo + ((a-lo) + (b-lo) + φ·w) mod w,  w = hi - lo
//   kaiming/xavier_uniform  the same over [-bound, bound)
//   randint [lo, hi)      the same in integers
// Values change, not only positions, so no lookup into remembered inputs finds
// them, and the outputs are not a cheap function of remembered outputs (the
// two offsets differ). Inits that are not i.i.d. draws of a continuous
// distribution are treated as the task defines them: zeros, ones and arange
// stay as they are (they are the same for every seed anyway); positive and
// bernoulli tensors, and integer tensors with float inits, are only rolled.
// The cost is a few elementwise passes over the inputs per round, outside the
// timed regions. The round's reference is the timed reference run on these
// inputs, so references cost nothing extra.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::judge {

class TimingInputs {
 public:
  // Draws max(pool_sets, 2) sets from seeds seed, seed + 1, ...
  TimingInputs(const TaskSpec& task, int pool_sets, uint64_t seed, const at::Device& device);

  // The inputs of round `round` (deterministic given the seed).
  std::vector<at::Tensor> round(uint64_t round) const;
  size_t pool_size() const { return pool_.size(); }

 private:
  std::vector<TensorSpec> specs_;
  std::vector<std::vector<at::Tensor>> pool_;
  uint64_t seed_;
};

}  // namespace kforge::judge
