#include "judge/lane_memory_budget.h"

#include <algorithm>

#include "judge/task_fit.h"
#include "kforge/core/error.h"

namespace kforge::judge {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// Less than this for tasks is a lane that refuses every task of any size.
constexpr uint64_t kMinTaskBytes = uint64_t{256} << 20;

std::string lanes_text(int lanes) { return std::to_string(lanes) + (lanes == 1 ? " lane" : " lanes"); }

std::string runners_text(int contexts) {
  const int runners = contexts - 1;
  return "the CUDA contexts of its judge and " + std::to_string(runners) + (runners == 1 ? " runner" : " runners");
}

}  // namespace

int lane_contexts(int spares, int profiler_spares) {
  return 1 + spares + 1 + (profiler_spares > 0 ? 1 + profiler_spares : 0);
}

uint64_t LaneMemoryBudget::candidate_bytes(uint64_t judge_bytes) const {
  const uint64_t tasks = task_bytes();
  return judge_bytes >= tasks ? 0 : (tasks - judge_bytes) / kCandidateCopies;
}

std::string LaneMemoryBudget::describe() const {
  const std::string share =
      even_share
          ? "an even share: " + device_name + "'s " + format_bytes(static_cast<double>(device_bytes)) + " less a " +
                format_bytes(static_cast<double>(reserve_bytes)) + " reserve, among " + lanes_text(lanes)
          : "placement.lane_device_memory_mib";
  return "its budget of " + format_bytes(static_cast<double>(lane_bytes)) + " (" + share + ") less " +
         format_bytes(static_cast<double>(harness_bytes())) + " for " + runners_text(contexts) +
         " and its L2 flush buffer";
}

nlohmann::json LaneMemoryBudget::to_json() const {
  return {{"device_bytes", device_bytes},   {"reserve_bytes", reserve_bytes}, {"lanes", lanes},
          {"even_share", even_share},       {"lane_bytes", lane_bytes},       {"contexts", contexts},
          {"context_bytes", context_bytes}, {"flush_bytes", flush_bytes},     {"harness_bytes", harness_bytes()},
          {"task_bytes", task_bytes()}};
}

LaneMemoryBudget plan_lane_memory(const LaneMemoryConfig& config, const std::string& device_name, uint64_t device_bytes,
                                  uint64_t flush_bytes, int contexts) {
  LaneMemoryBudget b;
  b.device_name = device_name;
  b.device_bytes = device_bytes;
  b.reserve_bytes = config.reserve_bytes;
  b.lanes = std::max(config.lanes, 1);
  b.contexts = contexts;
  b.flush_bytes = flush_bytes;
  b.even_share = config.lane_bytes == 0;
  if (config.reserve_bytes >= device_bytes) {
    throw InputError("placement.device_memory_reserve_mib: the reserve of " +
                     std::to_string(config.reserve_bytes / kMiB) + " MiB leaves nothing of " + device_name + "'s " +
                     std::to_string(device_bytes / kMiB) + " MiB for its lanes: lower it");
  }
  const uint64_t shared = device_bytes - config.reserve_bytes;
  const uint64_t even = shared / static_cast<uint64_t>(b.lanes);
  b.lane_bytes = b.even_share ? even : config.lane_bytes;
  if (!b.even_share && config.lane_bytes > even) {
    throw InputError("placement.lane_device_memory_mib: " + lanes_text(b.lanes) + " of " +
                     std::to_string(config.lane_bytes / kMiB) + " MiB add up to " +
                     std::to_string(config.lane_bytes / kMiB * static_cast<uint64_t>(b.lanes)) + " MiB, more than " +
                     device_name + "'s " + std::to_string(device_bytes / kMiB) + " MiB less its " +
                     std::to_string(config.reserve_bytes / kMiB) +
                     " MiB reserve (placement.device_memory_reserve_mib): give each lane at most " +
                     std::to_string(even / kMiB) + " MiB, or fewer placement.lanes_per_device");
  }
  if (b.task_bytes() < kMinTaskBytes) {
    const uint64_t least = b.harness_bytes() + kMinTaskBytes;
    throw InputError(std::string(b.even_share ? "placement.lanes_per_device" : "placement.lane_device_memory_mib") +
                     ": a lane's budget of " + std::to_string(b.lane_bytes / kMiB) + " MiB leaves less than " +
                     std::to_string(kMinTaskBytes / kMiB) + " MiB for tasks after " + runners_text(contexts) + " (" +
                     std::to_string(contexts) + " x " + std::to_string(b.context_bytes / kMiB) +
                     " MiB) and its L2 flush buffer (" + std::to_string(flush_bytes / kMiB) +
                     " MiB): give each lane at least " + std::to_string((least + kMiB - 1) / kMiB) +
                     " MiB (placement.lane_device_memory_mib), or fewer placement.lanes_per_device");
  }
  return b;
}

}  // namespace kforge::judge
