// Keeps the judge's memory bounded across tasks: a judge that never gave
// memory back after a huge task starved every env on the device
// (docs/execution.md#the-judges-memory).
//
// The judge keeps freed memory on purpose (main.cpp: glibc mmap off, no
// automatic trimming), because on virtualized hosts page faults on fresh
// tensors made eager PyTorch look up to 45x slower than its work. That
// benefit is kept for tasks of normal size: after a request, only when the
// judge's resident set is above `trim_above_bytes` is the freed memory
// returned (malloc_trim), so a huge task costs page faults once, on the next
// request, and nothing after. Part of the resident set is not the heap's
// (the code of libtorch and the CUDA libraries, the driver's mappings): a
// CUDA judge sits above the bound with little to give back (on an H100 it
// held 1,039-1,060 MiB and trimmed after 68 of bench_pool's 80 candidates),
// and a trim after every request cost each request its time (12.6 ms a trim
// measured on the CPU judge) and the next one its page faults. So once it has trimmed,
// the judge trims again only when its resident set grew by
// kTrimAgainAfterGrowthBytes since (or is above `retire_above_bytes`): a
// huge task still is, a normal one is not. If the resident set is still above
// `retire_above_bytes` after that (fragmentation: a live block at the top of
// the heap), the judge retires after the report: the Executor starts a fresh
// one for the next request, as for a broken device context.
//
// On a GPU the same holds for device memory: PyTorch's caching allocator
// keeps a huge task's blocks, which candidates on the device would then miss
// (and fail with out-of-memory, charged to them). When the device memory in
// use grew by more than `device_trim_above_bytes` since the judge's first
// request, the cache is emptied (JudgeDevice::release_cached_memory). The
// device figure counts every process on the device (CUDA reports no
// per-process use), so it decides only this release, never a retirement.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "judge/judge_device.h"

namespace kforge::judge {

// Growth of the resident set since the last trim that makes the judge trim
// again (above `trim_above_bytes`): more than a normal task's tensors, less
// than a huge one's.
inline constexpr uint64_t kTrimAgainAfterGrowthBytes = uint64_t{64} << 20;

struct MemoryLimits {
  uint64_t trim_above_bytes = uint64_t{1} << 30;
  uint64_t retire_above_bytes = uint64_t{4} << 30;
  uint64_t device_trim_above_bytes = uint64_t{8} << 30;
};

// The calling process' resident set (/proc/self/statm), 0 if unreadable.
uint64_t resident_bytes();

class MemoryBound {
 public:
  explicit MemoryBound(MemoryLimits limits) : limits_(limits) {}

  // After each request: trims when over the limit and returns why the judge
  // should retire ("" to carry on).
  std::string after_request(JudgeDevice* device);

  // For health(): {rss_bytes, peak_rss_bytes, trims, trim_above_bytes,
  // retire_above_bytes, device_in_use_bytes?, device_baseline_bytes?,
  // device_releases?}.
  nlohmann::json to_json() const;

 private:
  MemoryLimits limits_;
  uint64_t peak_rss_ = 0;
  int trims_ = 0;
  std::optional<uint64_t> rss_after_trim_;  // the resident set the last trim left
  std::optional<uint64_t> device_baseline_;
  uint64_t device_in_use_ = 0;
  int device_releases_ = 0;
};

}  // namespace kforge::judge
