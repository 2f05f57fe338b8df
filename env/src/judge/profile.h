// The profile stage of a CUDA evaluation (DESIGN.md §8), after timing:
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
#pragma once

#include <nlohmann/json.hpp>

#include "common/deadline.h"
#include "common/runner_process.h"
#include "judge/candidate_session.h"
#include "judge/case_plan.h"
#include "judge/judge_device.h"
#include "judge/runner_pool.h"
#include "judge/verdict.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

struct ProfileResult {
  Verdict verdict;                   // kCorrect unless the candidate misbehaved under the profiler
  nlohmann::json profile = nullptr;  // EvalReport::profile
};

// `profilers` starts profiler runners (null: no attribution, said in the
// profile). `timing` is the report's timing (energy figures are added to its
// candidate and reference entries; the candidate's median feeds the roofline).
ProfileResult profile_candidate(const env::EvalRequest& request, const CasePlan& plan, CandidateSession* session,
                                JudgeDevice* device, RunnerPool* profilers, const exec::RunnerLimits& limits,
                                exec::Deadline deadline, nlohmann::json* timing);

// The range profiler's raw values as the report names them: sm_throughput_pct,
// memory_throughput_pct, dram_throughput_pct, dram_bytes, achieved_occupancy_pct,
// duration_ms, sm_clock_mhz (those present).
nlohmann::json normalize_metrics(const nlohmann::json& values);

}  // namespace kforge::judge
