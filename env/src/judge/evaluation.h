// One evaluation request from start to report: ELF inspection, the runner
// session, verification, timing, and the report (outcome, one-line summary,
// violations, per-case statistics, timings, candidate output, phase times).
#pragma once

#include <string>

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
// exclusive for timing and profiling, and a share again for the report and
// the judge's context check. It is released before the used runner's
// retirement and so on return; phase_ms.gate_wait says how long the request
// waited for it. `references` is the judge's reference cache
// (reference_cache.h; null: none), bounded here by what the request's task
// leaves (task_fit.h). `context_error` (if not null) receives the judge's
// own context check after the request's device work
// (JudgeDevice::context_error: "" while usable), made while the share is
// still held because the check runs work on the GPU; a request that never
// reached the device leaves it empty.
env::EvalReport evaluate(const env::EvalRequest& request, JudgeDevice* device, RunnerPool* pool,
                         EvaluationCounters* counters, RunnerPool* profilers = nullptr, GpuGate* gate = nullptr,
                         ReferenceCache* references = nullptr, std::string* context_error = nullptr);

}  // namespace kforge::judge
