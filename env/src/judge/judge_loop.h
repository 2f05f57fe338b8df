// The judge's side of the executor <-> judge conversation (wire.h frames on
// fd 3):
//
//   executor -> judge                 judge -> executor
//   (on start, unprompted)            hello  {ok, protocol, build, backend, device, pid, device_memory?, error?}
//   eval      {id, request}           report {id, report, runner_faults, evaluations}
//   reference {id, request}           reference_report {id, report, reference_requests}
//   health    {}                      health {pid, open_fds, memfds, spare_runners, scratch_entries, memory,
//                                             profiler_start, profiler_spares, ...}
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
#include "kforge/env/executor.h"

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
  // How a spare profiler runner starts (runner_pool.h, StartUp): beside
  // timing, like a timing runner, by default. Its CUPTI set-up (activity
  // tracing, the range profiler, a flush buffer of twice the L2) was measured
  // beside a timed kernel (start_probe `disturb 5`, one H100): median 0.06176
  // ms, as with nothing starting (0.06176); samples over 1.2x the median
  // 0.21 %, against 0.29 % beside a timing runner's start-up (level 4) and
  // 0.03 % alone. Waiting for it instead (`outside_timing`) put the `settle`
  // phase in every profile action's turn: bench_rollout --backend cuda went
  // from 3.47 to 4.05 steps/s on that H100 without the wait.
  // $KFORGE_PROFILER_START (profiler_start_setting) = `outside_timing` keeps
  // the old rule.
  bool profiler_starts_beside_timing = true;
  // Spare profiler runners kept started (cuda only). A spare's start-up
  // (CUPTI's range profiler is ~0.6 s of its ~0.9 s on an H100) outlasts the
  // gap between two profiles when one lane serves many episodes, and the
  // next profile waits for the rest (the `profiler_setup` phase). More spares
  // each cost a CUDA context of the lane's memory (lane_memory_budget.h).
  // ExecutorConfig::profiler_spares (--profiler-spares); 0 until
  // profiler_spares_setting resolves it from $KFORGE_PROFILER_SPARES, else
  // env::kDefaultProfilerSpares.
  int profiler_spares = 0;
  // Whether CUDA timing runners also set up CUPTI's activity tracing, so
  // that a profile without counters traces the candidate in its own runner
  // after the timing, instead of in a profiler runner whose context is one
  // more start-up and teardown (profile.h). Off until measured on a GPU: a
  // tracer in the timing process must not move a timed kernel (start_probe
  // `traced`). $KFORGE_TRACE_IN_TIMING_RUNNER (trace_in_timing_runner_setting).
  bool trace_in_timing_runner = false;
};

constexpr const char* kProfilerStartVariable = "KFORGE_PROFILER_START";
// Reads $KFORGE_PROFILER_START into `config`: unset, empty or
// `beside_timing` (the default), or `outside_timing`. Any other value is an
// error naming the variable and its values (the judge's start-up error).
std::string profiler_start_setting(JudgeLoopConfig* config);

constexpr const char* kTraceInTimingRunnerVariable = "KFORGE_TRACE_IN_TIMING_RUNNER";
// Reads $KFORGE_TRACE_IN_TIMING_RUNNER into `config`: unset, empty or 0
// (off, the default), or 1. Any other value is an error naming the variable
// and its values (the judge's start-up error).
std::string trace_in_timing_runner_setting(JudgeLoopConfig* config);

constexpr const char* kProfilerSparesVariable = "KFORGE_PROFILER_SPARES";
// Resolves config->profiler_spares: the executor's value when it gave one
// (1 to env::kMaxProfilerSpares, else an error naming the setting), else
// $KFORGE_PROFILER_SPARES: unset or empty (env::kDefaultProfilerSpares), or a whole number
// from 1 to kMaxProfilerSpares. Anything else is an error naming the variable
// and its range.
std::string profiler_spares_setting(JudgeLoopConfig* config);

// Serves until the executor closes the channel or says shutdown; returns the
// process exit code.
int serve_executor(const JudgeLoopConfig& config, int control_fd);

}  // namespace kforge::judge
