// What one candidate's device memory may reach in its runner, and what it has
// reached: the runner's side of its lane's budget (judge/lane_memory_budget.h;
// the judge sends the figure as `setup.limits.device_memory_bytes`).
//
// The candidate's device memory in a CUDA runner is physical memory the
// runner's context holds:
//
//   stream pool   cudaMallocAsync outside a capture: the device's default
//                 pool, which the runner reserves before the filters (the
//                 stream-ordered allocator reads /proc/self/maps when it
//                 first reserves, which the sandbox refuses) and which keeps
//                 its high-water mark (release threshold raised);
//   graph memory  cudaMallocAsync captured into a CUDA graph (graph mode):
//                 graph memory, reserved the same way, kept the same way;
//   local memory  its kernels' per-thread local memory (big stack arrays),
//                 which the driver allocates for every thread the GPU can hold.
//
// So the footprint is local + max(stream reserve, stream high-water) +
// max(graph reserve, graph high-water), and an allocation that would lift it
// past the limit is refused (cudaErrorMemoryAllocation; the call then ends in
// the candidate's own out-of-memory runtime error, naming the figures). The
// reserves come out of the limit, each at most a quarter of it, so that
// either pool alone can grow to three quarters. Pure bookkeeping, no CUDA:
// runner/cuda_allocation_guard.cpp feeds it from the intercepted calls.
// Cost: a hash-map insert and erase per allocation (bench_exec
// BM_DeviceAllowanceAllocateFree).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

namespace kforge::runner {

class DeviceAllowance {
 public:
  enum class Pool { kStream, kGraph };
  struct LocalMemory {
    std::string kernel;  // the kernel that needs the most
    uint64_t per_thread = 0;
    uint64_t threads = 0;  // threads the device holds at once
    uint64_t bytes() const { return per_thread * threads; }
  };

  // `limit` 0: no budget (nothing is refused, the footprint is still kept).
  explicit DeviceAllowance(uint64_t limit = 0) : limit_(limit) {}

  // What the runner reserves in each pool before the filters: the arena's
  // inputs and outputs a few times over (scratch tensors of that size are
  // served without new reservations), at most a quarter of the free memory
  // and, with a limit, a quarter of it.
  static uint64_t pool_reserve(uint64_t limit, uint64_t free_bytes, uint64_t arena_bytes);
  void set_reserves(uint64_t stream, uint64_t graph);
  // The kernel's name is cut to 256 bytes: it is the candidate's text.
  void set_local_memory(LocalMemory local);

  // Whether `bytes` more in `pool` keep the footprint within the limit.
  bool admits(Pool pool, uint64_t bytes) const;
  // An allocation the runtime made; `ptr` is what a free will name.
  void allocated(const void* ptr, Pool pool, uint64_t bytes);
  // A free of `ptr`; false for a pointer not allocated here (left alone).
  bool freed(const void* ptr);

  uint64_t limit() const { return limit_; }
  uint64_t footprint() const { return footprint_with(Pool::kStream, 0); }
  uint64_t live_bytes() const { return live_[0] + live_[1]; }
  // "" while the candidate's kernels' local memory fits beside the reserves,
  // else why it does not: every call then fails as the launch would.
  std::string local_memory_problem() const;
  // Why `bytes` in `pool` are refused (call it when admits() is false).
  std::string refusal(const char* call, Pool pool, uint64_t bytes) const;

 private:
  uint64_t footprint_with(Pool pool, uint64_t more) const;

  uint64_t limit_ = 0;
  uint64_t reserve_[2] = {0, 0};
  uint64_t live_[2] = {0, 0};
  uint64_t high_[2] = {0, 0};
  LocalMemory local_;
  struct Block {
    Pool pool;
    uint64_t bytes;
  };
  std::unordered_map<const void*, Block> blocks_;
};

// "1.5 GiB", "320 MiB", "4096 bytes": for the refusals.
std::string describe_bytes(uint64_t bytes);

}  // namespace kforge::runner
