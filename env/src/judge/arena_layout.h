// Where each tensor of a request lives in the shared arena.
//
// Every tensor gets its own page-aligned region with an inaccessible guard
// page after it (and one before the first), and sits at the END of its region,
// rounded down to `alignment`: a write past the end lands in the guard page
// within `alignment` bytes and faults in the runner instead of corrupting the
// neighbouring tensor. A region is sized for the largest shape the tensor takes
// across all shape variants, so one layout (and one set of guard pages) serves
// the whole request; smaller shapes slide towards the end of the region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kforge::judge {

struct ArenaRegion {
  uint64_t begin = 0;     // first byte (page-aligned)
  uint64_t capacity = 0;  // bytes usable before the following guard page
};

struct ArenaLayout {
  uint64_t page_size = 4096;
  uint64_t alignment = 64;
  uint64_t size = 0;                                  // bytes to allocate (multiple of page_size)
  std::vector<ArenaRegion> regions;                   // one per tensor slot
  std::vector<std::pair<uint64_t, uint64_t>> guards;  // (offset, length), page-aligned

  // Offset of a tensor of `nbytes` in slot `slot`: end-aligned in its region.
  // Throws std::out_of_range if it does not fit.
  uint64_t data_offset(size_t slot, uint64_t nbytes) const;
};

// `max_bytes[i]`: the largest size slot i must hold. `alignment` must be a
// power of two no larger than `page_size`.
ArenaLayout plan_arena(const std::vector<uint64_t>& max_bytes, uint64_t page_size, uint64_t alignment = 64);

// Canary bands: bytes of the arena next to a tensor that no tensor of the
// bound case occupies, which the judge fills with kCanaryByte before calls
// and checks after them (judge/arena_canary.h). An out-of-bounds write lands
// there first: on a GPU, which has no guard pages, it would otherwise go
// unnoticed; on the CPU it catches writes into the slack before a tensor
// (its region is sized for the largest shape variant) and into the padding
// after it, which the guard pages do not cover.
inline constexpr uint8_t kCanaryByte = 0xCB;
// Up to this many bytes on each side of each tensor (the arena's whole
// slack would make every check cost as much as the largest variant).
inline constexpr uint64_t kCanaryBandBytes = 64u << 10;

struct ByteRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t end() const { return offset + bytes; }
};

// The bands around `tensors` (extents in the arena, any order, not
// overlapping), up to `band` bytes on each side, clipped to the arena and to
// the other tensors, merged where they touch, in arena order.
std::vector<ByteRange> canary_bands(const ArenaLayout& layout, std::vector<ByteRange> tensors,
                                    uint64_t band = kCanaryBandBytes);

}  // namespace kforge::judge
