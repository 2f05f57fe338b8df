// The judge's side of the executor <-> judge conversation (wire.h frames on
// fd 3):
//
//   executor -> judge                 judge -> executor
//   (on start, unprompted)            hello  {ok, protocol, build, backend, device, pid, device_memory?, error?}
//   eval      {id, request}           report {id, report, runner_faults, evaluations}
//   reference {id, request}           reference_report {id, report, reference_requests}
//   health    {}                      health {pid, open_fds, memfds, spare_runners, scratch_entries, memory,
//                                             profiler_start, ...}
//   shutdown {}                       (exits)
//
// Requests are served one at a time, so a reference being timed never
// overlaps an evaluation of this judge; a spare timing runner is started as
// soon as one is taken (runner_pool.h). Other judges on the same GPU (lanes,
// docs/execution.md) are kept out of timed work by the GPU gate
// (judge/gpu_gate.h): verification and reference checks hold a share,
// timing and profiling hold it exclusively, and between requests the judge
// holds a share while its spare profiler runner is still starting (CUPTI
// set-up); timing runners start beside anything.
#pragma once

#include <filesystem>
#include <string>

#include "judge/lane_memory_budget.h"
#include "judge/memory_bound.h"

namespace kforge::judge {

struct JudgeLoopConfig {
  std::string backend = "cpu";
  int device = 0;
  std::filesystem::path runner;   // kforge-runner
  std::filesystem::path scratch;  // runner scratch dirs are created here
  // Where the GPU gate's lock files are (cuda only); empty: no gate, as when
  // this judge is alone on its GPU.
  std::filesystem::path gate_dir;
  MemoryLimits memory;  // memory_bound.h
  // Spare timing runners kept started (runner_pool.h); 0: the backend's
  // default (cuda 3, cpu 1).
  int runner_spares = 0;
  // Hardware queues of each CUDA runner's context (CUDA_DEVICE_MAX_CONNECTIONS;
  // ExecutorConfig::runner_cuda_connections); 0: the driver's default.
  int runner_cuda_connections = 0;
  // This lane's share of its GPU's memory (cuda only; lane_memory_budget.h).
  LaneMemoryConfig lane_memory;
  // How a spare profiler runner starts (runner_pool.h, StartUp): outside
  // timing by default, because its CUPTI set-up (activity tracing, the range
  // profiler, a flush buffer of twice the L2) is not covered by the
  // measurement that lets timing runners start beside timing; while it
  // starts, the next timing waits (the `settle` phase: 339 ms of a profile
  // action's turn in bench_rollout on an H200). $KFORGE_PROFILER_START
  // (profiler_start_setting) says `beside_timing` to start it like a timing
  // runner, so that one GPU run measures both (scripts/gpu/throughput.sh)
  // beside start_probe's level 5, which says whether that start-up moves a
  // timed kernel.
  bool profiler_starts_beside_timing = false;
};

constexpr const char* kProfilerStartVariable = "KFORGE_PROFILER_START";
// Reads $KFORGE_PROFILER_START into `config`: unset, empty or
// `outside_timing` (the default), or `beside_timing`. Any other value is an
// error naming the variable and its values (the judge's start-up error).
std::string profiler_start_setting(JudgeLoopConfig* config);

// Serves until the executor closes the channel or says shutdown; returns the
// process exit code.
int serve_executor(const JudgeLoopConfig& config, int control_fd);

}  // namespace kforge::judge
