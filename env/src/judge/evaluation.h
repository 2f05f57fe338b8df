// One evaluation request from start to report: ELF inspection, the runner
// session, verification, timing, and the report (outcome, one-line summary,
// violations, per-case statistics, timings, candidate output, phase times).
#pragma once

#include "judge/gpu_gate.h"
#include "judge/judge_device.h"
#include "judge/reference_cache.h"
#include "judge/runner_pool.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

struct EvaluationCounters {
  int evaluations = 0;
  // Runners that had to be killed (crash, hang, sandbox, tamper): the judge's
  // share of Executor::restarts().
  int runner_faults = 0;
};

// Never throws for anything the candidate does; SystemError/InputError only
// for problems of the system or the task, which the caller reports.
// `profilers` starts the CUDA profiler runners for `profile` requests (null
// on backends without one). `gate` is the GPU gate (gpu_gate.h; null or
// disabled: none): a share from the candidate's set-up through verification,
// exclusive for timing and profiling. It is left held on return (the caller
// starts the next spares under it, then lets it go); phase_ms.gate_wait says
// how long the request waited for it. `references` is the judge's reference
// cache (reference_cache.h; null: none), bounded here by what the request's
// task leaves (task_fit.h).
env::EvalReport evaluate(const env::EvalRequest& request, JudgeDevice* device, RunnerPool* pool,
                         EvaluationCounters* counters, RunnerPool* profilers = nullptr, GpuGate* gate = nullptr,
                         ReferenceCache* references = nullptr);

}  // namespace kforge::judge
