#include "judge/l2_flush.h"

#include <algorithm>

namespace kforge::judge {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kFallbackL2 = 64 * kMiB;
constexpr uint64_t kMaxL2 = 1024 * kMiB;
constexpr uint64_t kGranule = 2 * kMiB;

}  // namespace

L2FlushPlan plan_l2_flush(int64_t reported_l2_bytes) {
  L2FlushPlan plan;
  if (reported_l2_bytes < static_cast<int64_t>(kMiB)) {
    plan.l2_bytes = kFallbackL2;
    plan.source = "default (the device reported " + std::to_string(reported_l2_bytes) + " bytes)";
  } else {
    plan.l2_bytes = std::min<uint64_t>(static_cast<uint64_t>(reported_l2_bytes), kMaxL2);
    plan.source = "device";
  }
  plan.flush_bytes = (2 * plan.l2_bytes + kGranule - 1) / kGranule * kGranule;
  return plan;
}

}  // namespace kforge::judge
