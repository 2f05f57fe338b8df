// Timing (docs/architecture.md#timing), run only after verification passed.
//
// The reference (libtorch in the judge) and the candidate (in the runner) are
// sampled interleaved, one of each per round, each preceded by a cache flush.
// The candidate's time is measured by the JUDGE, never taken from the runner:
//   * wall_round_trip: the round trip of the call minus the median round trip
//     of null calls to the same runner (the harness overhead);
//   * cpu_time (primary where the work runs on the host CPU, i.e. the CPU
//     backend): the CPU time the kernel accounted to the runner process during
//     the call, read from its CPU clock, minus the same for null calls; the
//     reference's is the judge thread's CPU time. On a busy machine round trips
//     include the time a woken runner or judge waits for a core; CPU time does
//     not, and a single-threaded process with no blocking syscalls cannot do
//     work that its CPU clock misses.
//   * device_events (primary on CUDA, JudgeDevice::runner_times_on_device):
//     CUDA events on the runner's stream around kf_forward (the reference: on
//     ATen's stream in the judge). Precise but reported by the runner, so it
//     is bounded per call and in the median by the judge's round trip, and the
//     runner's drain time after each call is checked for work left on other
//     streams (timing_tamper.h, leftover_work.h, docs/cuda-backend.md).
// Otherwise the runner's own clock is only a cross-check (timing_tamper.h). Every round
// gets inputs no call has seen (timing_inputs.h: derived from a pool of
// timing_input_sets sets), copied into the arena and with outputs poisoned
// before the call (outside the timed region); the round's timed reference run
// on those inputs is the reference its outputs are checked against, fully
// (allclose and output_quality.h). A failure is the violation
// timed_output_mismatch (caching across calls, batch-and-skip, warm-up
// detection). Warm-up runs by time and is checked the same way. Sampling stops
// by sample_stats.h's rule, applied to the primary clock: the precision target
// (target_rse), or, when the environment asked for a decision
// (EvalOptions::decision_*), once the speedup's interval decides the reward.
// The speedup's confidence interval comes from the same rounds, paired
// (sample_stats.h, TimingSummary::speedup_interval). Finally the
// candidate's median must not beat the roofline floor (roofline.h; violation
// below_roofline).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "ipc/deadline.h"
#include "judge/candidate_session.h"
#include "judge/case_plan.h"
#include "judge/judge_device.h"
#include "judge/verdict.h"
#include "kforge/core/timing_summary.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

struct TimingResult {
  Verdict verdict;  // kCorrect unless the candidate misbehaved while being timed
  // EvalReport::timing: absent when the runner failed before any figure
  // existed (the verdict says why).
  std::optional<TimingSummary> timing;
  bool timed = false;  // samples were taken and summarized
};

TimingResult time_candidate(const CasePlan& plan, const env::EvalOptions& options, CandidateSession* session,
                            JudgeDevice* device, ipc::Deadline request_deadline);

}  // namespace kforge::judge
