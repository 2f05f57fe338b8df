// Whether a task fits what this judge may use, decided before anything is
// allocated or run: a task whose tensors outgrow the judge's memory (on a GPU,
// its lane's share of the card, lane_memory_budget.h), or whose reference
// cannot finish within the request's time, gets a verdict that names the need,
// the limit and the config key that changes it. Before this, KernelBench problems at
// their own sizes ended as "system error: lost the judge (SIGKILL)" (the
// kernel's OOM killer) or "judge did not answer in time": a
// system error that said nothing about the task, charged to nobody, retried
// forever.
//
// Both figures come from the task's shapes and fixed device limits, never
// from a measurement, so the verdict does not depend on how busy the machine
// is: the memory need is counted from the tensors the judge holds (below),
// the time is a lower bound (the work at the device's peak rates).
// The reference probe adds a measured guard for what the bound misses
// (reference_request.cpp): a reference that ran past half the request's time.
#pragma once

#include <cstdint>
#include <string>

#include "judge/judge_device.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

// What the judge is asked to do with the task.
enum class JudgeWork {
  kReferenceCheck,   // the reference probe's check: every node kept and measured
  kReferenceTiming,  // the reference timed alone
  kEvaluation,       // a candidate verified (and timed) against the reference
};

struct TaskFit {
  // Bytes the work holds at once for the largest shape case, and what it
  // may use (the request's override, else the lane's task_bytes() on a GPU
  // with a lane budget, else JudgeDevice::task_memory_bytes). With a lane
  // budget an evaluation's need is the judge's tensors (`judge_bytes`) plus
  // the candidate's own intermediates and workspace in each runner that
  // loads it (`candidate_floor_bytes` each, kCandidateCopies).
  uint64_t need_bytes = 0;
  uint64_t limit_bytes = 0;
  uint64_t judge_bytes = 0;
  uint64_t candidate_floor_bytes = 0;
  // Lane budget only, evaluations that fit: the device memory the runner
  // lets the candidate's allocations reach (LaneMemoryBudget::candidate_bytes;
  // RunnerLimits::device_memory_bytes). 0: no budget.
  uint64_t candidate_bytes = 0;
  // What the judge may keep in its reference cache (reference_cache.h) while
  // this work runs: the request's reference_cache_bytes, at most half of what
  // the work leaves of the limit, so that a kept entry never makes a task
  // not fit and the candidate keeps most of the slack. With a lane budget
  // it is the judge's, counted before the candidate's share (candidate_bytes).
  uint64_t reference_cache_bytes = 0;
  // The least time the reference's runs need at the device's peak rates,
  // and the request's time limit.
  double min_reference_ms = 0;
  double limit_ms = 0;
  std::string problem;  // empty: it fits; else the verdict, with figures
  bool fits() const { return problem.empty(); }
};

TaskFit check_task_fit(const TaskSpec& task, JudgeWork work, const env::EvalOptions& options,
                       const JudgeDevice& device);

// "12.9 GiB", "340 MiB"; "153 ms", "2.7 s", "44 s": for the verdicts.
std::string format_bytes(double bytes);
std::string format_duration(double ms);

}  // namespace kforge::judge
