#include "judge/arena_canary.h"

#include <algorithm>

namespace kforge::judge {
namespace {

at::Tensor band_view(SharedArena* arena, const ByteRange& band) {
  return arena->view(band.offset, {static_cast<int64_t>(band.bytes)}, at::kByte);
}

}  // namespace

void ArenaCanary::arm(SharedArena* arena, std::vector<NamedExtent> tensors, uint64_t band) {
  arena_ = arena;
  tensors_ = std::move(tensors);
  std::vector<ByteRange> extents;
  for (const auto& t : tensors_) extents.push_back(t.range);
  bands_ = canary_bands(arena->layout(), extents, band);
  for (const auto& b : bands_) band_view(arena_, b).fill_(static_cast<int64_t>(kCanaryByte));
}

std::string ArenaCanary::check() const {
  if (arena_ == nullptr || bands_.empty()) return "";
  // One flag per band, reduced on the device: a single synchronization.
  std::vector<at::Tensor> damaged;
  damaged.reserve(bands_.size());
  for (const auto& b : bands_) damaged.push_back(band_view(arena_, b).ne(kCanaryByte).any());
  if (!at::stack(damaged).any().item<bool>()) return "";

  int64_t changed = 0;
  uint64_t first = 0;
  bool found = false;
  for (const auto& b : bands_) {
    const at::Tensor diff = band_view(arena_, b).ne(kCanaryByte);
    const int64_t n = diff.sum().item<int64_t>();
    if (n == 0) continue;
    changed += n;
    if (!found) {
      first = b.offset + static_cast<uint64_t>(diff.nonzero()[0][0].item<int64_t>());
      found = true;
    }
  }
  // Name the first overwritten byte by its nearest tensor.
  std::string where;
  uint64_t best = UINT64_MAX;
  for (const auto& t : tensors_) {
    if (first >= t.range.end() && first - t.range.end() < best) {
      best = first - t.range.end();
      where = std::to_string(best) + (best == 1 ? " byte" : " bytes") + " past the end of " + t.label;
    } else if (first < t.range.offset && t.range.offset - first <= best) {
      best = t.range.offset - first;
      where = std::to_string(best) + (best == 1 ? " byte" : " bytes") + " before the start of " + t.label;
    }
  }
  return "kf_forward wrote " + std::to_string(changed) + (changed == 1 ? " byte" : " bytes") +
         " outside its tensors, the first " + where;
}

}  // namespace kforge::judge
