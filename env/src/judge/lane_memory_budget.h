// A lane's share of its GPU's memory (docs/execution.md, "Device memory per
// lane"). Lanes of one GPU share its memory as they share its time: without
// a share each, one lane's candidate (or one huge task) took the card and every
// other lane's runner failed to create its context, a system error (seen on an
// H100 80 GB when two GPU tests that fill the device ran beside others).
//
// A lane is its judge, the judge's runners and what each allocates. Its budget
// is `placement.lane_device_memory_mib`, or an even share of the card less
// `placement.device_memory_reserve_mib` (2 GiB: the driver's own, other
// processes, estimates that err low) among the GPU's `lanes_per_device`; the
// lanes of a pool never add up to more than the card less the reserve. The
// budget covers, in this order:
//
//   harness   one CUDA context per process (the judge; the spare runners, the
//             candidate's runner, the profiler runner and its spares), 512 MiB
//             each (a runner's measured 508.8 MiB on the H200), and the
//             judge's L2 flush buffer;
//   tasks     what is left (task_bytes()): the judge's tensors for the task
//             (task_fit.h counts them) and the candidate's own device memory,
//             in each runner that loads it at once (the timed one and, during
//             a profile, the profiler runner: kCandidateCopies).
//
// Each request splits `tasks` between the judge and the candidate:
// candidate_bytes() is what the runner lets the candidate's allocations reach
// (runner/device_allowance.h); a task whose judge-side tensors leave a
// candidate less than its own intermediates is refused at reset (task_fit.h).
// The arithmetic is the device's totals only: no measurement, so no verdict
// depends on what else runs on the card.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kforge::judge {

// What the executor tells the judge (ExecutorConfig's placement fields).
struct LaneMemoryConfig {
  uint64_t lane_bytes = 0;                     // 0: an even share
  uint64_t reserve_bytes = uint64_t{2} << 30;  // kept out of every lane
  int lanes = 1;                               // lanes of the pool on this GPU
};

// One CUDA context (a process on the GPU): a runner's measured 508.8 MiB on
// the H200, rounded up.
inline constexpr uint64_t kContextBytes = uint64_t{512} << 20;
// Runners that load one candidate at once: the timed runner stays loaded
// while the profiler runner traces it.
inline constexpr int kCandidateCopies = 2;

// CUDA contexts a lane holds at most: its judge; `spares` spare runners, the
// candidate's runner, and, where it profiles (`profiler_spares` > 0), a
// profiler runner tracing plus its spares.
int lane_contexts(int spares, int profiler_spares);

struct LaneMemoryBudget {
  std::string device_name;
  uint64_t device_bytes = 0;  // the GPU's total memory
  uint64_t reserve_bytes = 0;
  int lanes = 1;
  bool even_share = true;
  uint64_t lane_bytes = 0;  // the budget
  int contexts = 0;
  uint64_t context_bytes = kContextBytes;
  uint64_t flush_bytes = 0;  // the judge's L2 flush buffer

  uint64_t harness_bytes() const { return static_cast<uint64_t>(contexts) * context_bytes + flush_bytes; }
  // What the lane has for tasks: the judge's tensors and the candidate's memory.
  uint64_t task_bytes() const { return lane_bytes > harness_bytes() ? lane_bytes - harness_bytes() : 0; }
  // The device memory one runner lets a candidate reach when the judge holds
  // `judge_bytes` for the task: what is left, shared by kCandidateCopies.
  uint64_t candidate_bytes(uint64_t judge_bytes) const;
  // "its budget of 19.5 GiB (an even share: NVIDIA H100 80GB HBM3's 79.2 GiB less
  // a 2.0 GiB reserve, among 4 lanes) less 4.1 GiB for the CUDA contexts of its
  // judge and 7 runners and its L2 flush buffer"
  std::string describe() const;
  // For the judge's hello and health.
  nlohmann::json to_json() const;
};

// The budget of one lane of a GPU of `device_bytes` (named `device_name` in
// messages) whose judge holds `contexts` CUDA contexts and a flush buffer of
// `flush_bytes`. InputError naming the config key and the fix when the lanes
// would add up to more than the card less the reserve, or a lane would have
// nothing left for tasks.
LaneMemoryBudget plan_lane_memory(const LaneMemoryConfig& config, const std::string& device_name, uint64_t device_bytes,
                                  uint64_t flush_bytes, int contexts);

}  // namespace kforge::judge
