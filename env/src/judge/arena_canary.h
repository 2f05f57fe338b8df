// Out-of-bounds writes into the arena (docs/threat-model.md, the check
// `out_of_bounds_write`). Before a case's calls, the bytes around each of its
// tensors that no tensor occupies (judge/arena_layout.h, canary_bands) are
// filled with kCanaryByte; after every call they must still hold it. On a
// GPU the arena has no guard pages, so a kernel writing past the end of its
// output (or before its start) corrupts the arena silently; on the CPU the
// guard pages catch writes past a tensor's padding, and the canary catches
// the padding and the slack before a tensor. The check reads only the bands
// (at most 64 KiB on each side of each tensor), with ATen on the arena's own
// device, and synchronizes once.
#pragma once

#include <string>
#include <vector>

#include "judge/arena_layout.h"
#include "judge/judge_device.h"

namespace kforge::judge {

struct NamedExtent {
  std::string label;  // "input x", "output out"
  ByteRange range;
};

class ArenaCanary {
 public:
  // Fills the bands around `tensors` in `arena` (asynchronously on the
  // arena's device; the caller synchronizes before the runner is called).
  void arm(SharedArena* arena, std::vector<NamedExtent> tensors, uint64_t band = kCanaryBandBytes);
  // "" while every band holds the canary; else what was overwritten, e.g.
  // "kf_forward wrote 16 bytes outside its tensors, the first 4 bytes past the
  // end of output out".
  std::string check() const;
  bool armed() const { return arena_ != nullptr; }

 private:
  SharedArena* arena_ = nullptr;
  std::vector<NamedExtent> tensors_;
  std::vector<ByteRange> bands_;
};

}  // namespace kforge::judge
