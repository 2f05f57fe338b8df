#include "runner/device_allowance.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace kforge::runner {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
// Reserved beyond the arena's multiple: small tasks' workspaces.
constexpr uint64_t kReserveFloor = 64 * kMiB;
// Where the limit is named in refusals: the key that changes it.
constexpr const char* kLimitKey =
    "its lane's share of the GPU's memory (placement.lane_device_memory_mib, placement.lanes_per_device)";

size_t index(DeviceAllowance::Pool pool) { return pool == DeviceAllowance::Pool::kStream ? 0 : 1; }

}  // namespace

std::string describe_bytes(uint64_t bytes) {
  char buf[48];
  if (bytes >= kGiB) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  } else if (bytes >= kMiB) {
    std::snprintf(buf, sizeof(buf), "%.0f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

uint64_t DeviceAllowance::pool_reserve(uint64_t limit, uint64_t free_bytes, uint64_t arena_bytes) {
  uint64_t reserve = std::min(free_bytes / 4, 4 * arena_bytes + kReserveFloor);
  if (limit > 0) reserve = std::min(reserve, limit / 4);
  return reserve;
}

void DeviceAllowance::set_reserves(uint64_t stream, uint64_t graph) {
  reserve_[0] = stream;
  reserve_[1] = graph;
}

void DeviceAllowance::set_local_memory(LocalMemory local) {
  constexpr size_t kMaxName = 256;
  if (local.kernel.size() > kMaxName) local.kernel = local.kernel.substr(0, kMaxName) + "...";
  local_ = std::move(local);
}

uint64_t DeviceAllowance::footprint_with(Pool pool, uint64_t more) const {
  uint64_t total = local_.bytes();
  for (size_t i = 0; i < 2; ++i) {
    const uint64_t high = i == index(pool) ? std::max(high_[i], live_[i] + more) : high_[i];
    total += std::max(reserve_[i], high);
  }
  return total;
}

bool DeviceAllowance::admits(Pool pool, uint64_t bytes) const {
  if (limit_ == 0) return true;
  // Sizes near 2^64 would wrap the sum: no limit admits them anyway.
  if (bytes > limit_) return false;
  return footprint_with(pool, bytes) <= limit_;
}

void DeviceAllowance::allocated(const void* ptr, Pool pool, uint64_t bytes) {
  const size_t i = index(pool);
  live_[i] += bytes;
  high_[i] = std::max(high_[i], live_[i]);
  blocks_[ptr] = {pool, bytes};
}

bool DeviceAllowance::freed(const void* ptr) {
  auto it = blocks_.find(ptr);
  if (it == blocks_.end()) return false;
  live_[index(it->second.pool)] -= it->second.bytes;
  blocks_.erase(it);
  return true;
}

std::string DeviceAllowance::local_memory_problem() const {
  if (limit_ == 0 || local_.bytes() == 0) return "";
  const uint64_t room = limit_ > reserve_[0] + reserve_[1] ? limit_ - reserve_[0] - reserve_[1] : 0;
  if (local_.bytes() <= room) return "";
  return "kernel " + local_.kernel + " needs " + std::to_string(local_.per_thread) +
         " bytes of local memory per thread, " + describe_bytes(local_.bytes()) + " for the " +
         std::to_string(local_.threads) + " threads the GPU holds at once, more than the " + describe_bytes(room) +
         " the candidate may use beside its " + describe_bytes(reserve_[0] + reserve_[1]) +
         " of reserved scratch memory: CUDA error cudaErrorMemoryAllocation (out of memory) at its launch, within " +
         kLimitKey;
}

std::string DeviceAllowance::refusal(const char* call, Pool pool, uint64_t bytes) const {
  // A size beyond the limit could wrap the footprint's sum: added saturating.
  const uint64_t now = footprint();
  const uint64_t would_be =
      bytes > limit_ ? (bytes > UINT64_MAX - now ? UINT64_MAX : now + bytes) : footprint_with(pool, bytes);
  return std::string(call) + " of " + describe_bytes(bytes) + (pool == Pool::kGraph ? " (in a graph capture)" : "") +
         " refused with cudaErrorMemoryAllocation (out of memory): the candidate's device memory would reach " +
         describe_bytes(would_be) + " (" + describe_bytes(live_bytes()) + " allocated now), and it may use " +
         describe_bytes(limit_) + ", " + kLimitKey;
}

}  // namespace kforge::runner
