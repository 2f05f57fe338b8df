#include "judge/arena_layout.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kforge::judge {
namespace {

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

ArenaLayout plan_arena(const std::vector<uint64_t>& max_bytes, uint64_t page_size, uint64_t alignment) {
  if (page_size == 0 || (page_size & (page_size - 1)) != 0) throw std::invalid_argument("page size not a power of two");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > page_size) {
    throw std::invalid_argument("alignment must be a power of two no larger than a page");
  }
  ArenaLayout l;
  l.page_size = page_size;
  l.alignment = alignment;
  uint64_t at = 0;
  l.guards.emplace_back(at, page_size);
  at += page_size;
  for (uint64_t bytes : max_bytes) {
    // Empty tensors still get a page so that every slot has a valid address.
    uint64_t capacity = round_up(std::max<uint64_t>(round_up(bytes, alignment), 1), page_size);
    l.regions.push_back({at, capacity});
    at += capacity;
    l.guards.emplace_back(at, page_size);
    at += page_size;
  }
  l.size = at;
  return l;
}

std::vector<ByteRange> canary_bands(const ArenaLayout& layout, std::vector<ByteRange> tensors, uint64_t band) {
  std::sort(tensors.begin(), tensors.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> bands;
  auto add = [&](uint64_t from, uint64_t to) {
    if (from >= to) return;
    if (!bands.empty() && bands.back().end() >= from) {
      bands.back().bytes = std::max(bands.back().end(), to) - bands.back().offset;
    } else {
      bands.push_back({from, to - from});
    }
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t prev_end = i == 0 ? 0 : tensors[i - 1].end();
    const uint64_t next_start = i + 1 < tensors.size() ? tensors[i + 1].offset : layout.size;
    const ByteRange& t = tensors[i];
    add(std::max(prev_end, t.offset > band ? t.offset - band : 0), t.offset);
    add(t.end(), std::min(next_start, std::min(layout.size, t.end() + band)));
  }
  return bands;
}

uint64_t ArenaLayout::data_offset(size_t slot, uint64_t nbytes) const {
  const ArenaRegion& r = regions.at(slot);
  uint64_t padded = round_up(nbytes, alignment);
  if (padded > r.capacity) {
    throw std::out_of_range("tensor of " + std::to_string(nbytes) + " bytes does not fit arena slot " +
                            std::to_string(slot) + " (" + std::to_string(r.capacity) + " bytes)");
  }
  return r.begin + r.capacity - padded;
}

}  // namespace kforge::judge
