// The profile stage of a CUDA evaluation (docs/architecture.md#timing), after timing:
//   * energy per call from the NVML energy counter, over back-to-back calls
//     of the candidate (runner `call` with `repeat`) and of the reference;
//   * one traced call in a separate profiler runner (CUPTI Activity): kernel
//     names, launches, streams and durations, the candidate's own-kernel
//     share, and the violations foreign_stream / work_after_return;
//   * hardware metrics of the call from the CUPTI range profiler in that
//     runner (or the reason they are unavailable);
//   * a roofline classification (env/analysis/roofline.h) turned into hints.
// The profiler runs in its own runner process so that CUPTI never sits in the
// process whose calls are timed, and so that a profiler problem costs the
// profile, not the evaluation. A candidate that dies only under the profiler
// (crash, hang, blocked system call) is the violation profiler_fault: it
// behaved differently when observed.
// With $KFORGE_TRACE_IN_TIMING_RUNNER=1 (off by default until measured on a
// GPU: bench/cuda/start_probe `traced`) timing runners carry CUPTI's activity
// tracer too, and a profile without counters traces the call in the
// candidate's own runner once its timing is over: no second runner to set up
// and tear down. Whatever goes wrong there is not judged; the profiler
// runner traces instead (`timing_runner_trace_failed` says why).
#pragma once

#include <nlohmann/json.hpp>

#include "ipc/deadline.h"
#include "judge/candidate_session.h"
#include "judge/case_plan.h"
#include "judge/judge_device.h"
#include "judge/runner_pool.h"
#include "judge/runner_process.h"
#include "judge/verdict.h"
#include "kforge/core/profile_summary.h"
#include "kforge/core/timing_summary.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

struct ProfileResult {
  Verdict verdict;         // kCorrect unless the candidate misbehaved under the profiler
  ProfileSummary profile;  // EvalReport::profile
  // Wall time of the stage's parts: energy, profiler_setup (a profiler runner
  // taken, the candidate loaded and bound), trace and metrics (in the runner).
  nlohmann::json phase_ms = nlohmann::json::object();
};

// `profilers` starts profiler runners (null: no attribution, said in the
// profile). `timing` is the report's timing (energy figures are added to its
// candidate and reference entries; the candidate's median feeds the roofline).
ProfileResult profile_candidate(const env::EvalRequest& request, const CasePlan& plan, CandidateSession* session,
                                JudgeDevice* device, RunnerPool* profilers, const RunnerLimits& limits,
                                ipc::Deadline deadline, TimingSummary* timing);

// The range profiler's raw values as the report names them: sm_throughput_pct,
// memory_throughput_pct, dram_throughput_pct, dram_bytes, achieved_occupancy_pct,
// range_ms, sm_clock_mhz (those present).
//
// The range is the whole kf_forward call, so its "% of peak sustained
// elapsed" counts the host's part of the call too (argument checks, the
// launch): on the H200 a ~9 us kernel sat in a 60 us range and read as 8%
// memory throughput. The three throughputs are therefore restated over the
// time the GPU worked (work counted in the range / that time), which is how
// Nsight Compute states them per kernel. That time is, by preference,
//   * "sm_active_cycles": the range's length scaled by the busiest SM's active
//     cycles over its elapsed ones, measured in the same passes (CUPTI's
//     passes ran at ~1.5 GHz where timed calls ran at 1.98, so a time taken
//     from another call would overstate the throughputs by a third);
//   * "busy": `busy_ms`, the traced call's kernels and copies (activity trace);
//   * "range": no restating.
// `pct_basis` names the one used, `busy_ms` the time, `over_range` keeps the
// range's own figures.
nlohmann::json normalize_metrics(const nlohmann::json& values, double busy_ms = 0);

}  // namespace kforge::judge
