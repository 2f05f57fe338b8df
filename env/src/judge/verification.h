// Verification (docs/architecture.md#verification): for every shape case (base, then each variant)
// and every seed, inputs drawn for that seed and the reference run on them
// (or the same, kept from an earlier request: reference_cache.h); inputs copied into the
// arena, outputs poisoned, kf_forward called, then checked: return code,
// inputs untouched (bitwise), outputs against the reference (allclose with
// tolerance.h); then once more with re-poisoned outputs, which must pass too
// and whose distance to the first run is reported. Stops at the first failing
// case. A mismatching output that equals the reference of the previous seed
// is a stale_output violation (results cached across calls), not just wrong.
// Outputs that pass allclose are also held to output_quality.h: a constant
// output where the reference varies is the violation degenerate_output, a
// relative L2 error above the bound fails verification (relative_error). Every
// shape variant of the task is verified with every seed (options.seeds, 5 in
// production), so a kernel specialized to one shape fails on another.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "ipc/deadline.h"
#include "judge/candidate_session.h"
#include "judge/case_plan.h"
#include "judge/judge_device.h"
#include "judge/reference_cache.h"
#include "judge/verdict.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

struct VerificationResult {
  Verdict verdict;  // kCorrect when every case passed
  nlohmann::json cases = nlohmann::json::array();
  int cases_passed = 0;
  // Wall ms of verification's parts over all cases (each ends synchronized
  // with the device): bind (the runner binds a case's tensors), reference
  // (inputs drawn and the reference run), call (inputs loaded, outputs
  // poisoned, kf_forward), check (canaries, input mutation, comparison,
  // output quality). The evaluation reports them as verify_<part>.
  nlohmann::json phase_ms = nlohmann::json::object();
};

// Seed k of options.seeds draws its inputs with input seed `input_seed + k`
// (EvalRequest::input_seed); reports and messages number seeds by k.
// `references`: the judge's reference cache (reference_cache.h), whose kept
// inputs and references replace fresh ones of the same case and input seed
// (the case's JSON says reference_reused); null draws every one afresh.
VerificationResult verify_candidate(const CasePlan& plan, const env::EvalOptions& options, uint64_t input_seed,
                                    CandidateSession* session, JudgeDevice* device, ipc::Deadline request_deadline,
                                    ReferenceCache* references = nullptr);

}  // namespace kforge::judge
