// The knobs of the template policy's templates and their mutations. One
// Variant picks one kernel source for a task; changing one knob is one
// mutation, and every knob changes the generated code in a way that can
// change its speed:
//
//   fuse          pointwise chains inlined into their consumer (one pass over
//                 memory), row-wise normalizations in one kernel, matmul
//                 epilogues applied at the store; off: every intermediate is
//                 written to memory by its own loop or kernel
//   block         CUDA threads per block (128, 256, 512)
//   vec           CUDA elements per vector access (1 or 4: float4 loads and
//                 stores where the row length and alignment allow)
//   unroll        CUDA elements per thread per loop trip; CPU
//                 `#pragma GCC unroll` of the inner loops (1, 2, 4, 8)
//   accumulators  independent partial results per reduction (1, 4, 8): more
//                 breaks the dependency chain of a float sum, which the
//                 compiler may not reorder on its own
//   tile          matmul: CUDA shared-memory tile (16 or 32); CPU rows of A
//                 per pass over B (1 or 4)
//   naive_matmul  the matmul loop order that reads B with a stride (a
//                 deliberately slow reference point)
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kforge::rollout::template_policy {

struct Variant {
  bool fuse = true;
  int block = 256;
  int vec = 4;
  int unroll = 1;
  int accumulators = 4;
  int tile = 16;
  bool naive_matmul = false;

  // "fuse=1 block=256 vec=4 unroll=1 acc=4 tile=16 naive_matmul=0": written
  // into the policy's message so that later turns (and forks) can read back
  // what was tried.
  std::string describe() const;
  bool operator==(const Variant& o) const { return describe() == o.describe(); }
};

// The text form back (describe()); false when `text` holds none.
bool parse_variant(const std::string& text, Variant* out);

// A random variant (each knob uniformly from its values); "cuda" or "cpp"
// decides which knobs matter, so the others keep their defaults.
Variant random_variant(const std::string& mode, std::mt19937_64& rng);
// One knob changed to another of its values.
Variant mutate(const Variant& v, const std::string& mode, std::mt19937_64& rng);

}  // namespace kforge::rollout::template_policy
