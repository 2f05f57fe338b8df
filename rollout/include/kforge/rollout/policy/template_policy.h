// The built-in template policy (docs/architecture.md#rollouts): no model, kernel templates
// generated from the task's graph, so that the whole system runs, trains and
// is tested without an LLM.
//
// The task's graph is lowered to pointwise chains, reductions (sum, mean,
// max, var, norms, logsumexp, ...), normalizations (layer_norm, rms_norm,
// instance_norm, softmax, log_softmax) and matrix products (matmul, bmm,
// linear) with their epilogues, and a complete solution file is generated in
// the backend's mode: `cpp` on the CPU backend, `cuda` on the GPU. Variants
// differ by fusion, block size, vector width, unrolling, reduction
// accumulators and matmul tiling (rollout/src/policy/template_policy/variant.h).
//
// An episode: the first turn profiles a variant drawn from the request's
// sampling seed (so the n rollouts of a group try different kernels), the
// following `explore_turns - 1` turns profile one-knob mutations of the best
// variant so far, then the best (by the speedups the environment reported in
// the tool messages) is submitted. The choice depends only on the request
// (task, sampling seed, messages), so a forked episode continues exactly as
// the original would have. A task outside the templates' reach gets a reply
// with `error` set: the worker truncates that episode without a penalty.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/core/task_spec.h"
#include "kforge/rollout/policy/policy.h"

namespace kforge::rollout {

struct TemplateConfig {
  // "auto": `cuda` when the tools offer a mode choice (the CUDA backend),
  // else `cpp`; or "cpp" / "cuda".
  std::string mode = "auto";
  // Profiles before the submit (>= 0; 0 submits the first variant).
  int explore_turns = 2;
  // Mixed into every episode's choices; also the seed when a request has none.
  uint64_t seed = 0;
};

class TemplatePolicy : public Policy {
 public:
  explicit TemplatePolicy(TemplateConfig config = {});
  std::vector<PolicyReply> act(const std::vector<PolicyRequest>& requests) override;
  std::string describe() const override;

 private:
  PolicyReply act_one(const PolicyRequest& request) const;
  TemplateConfig config_;
};

// The template source for `task` in `mode` ("cpp" or "cuda") with the knobs
// written in `variant` ("fuse=1 block=256 vec=4 ..."; empty: the defaults).
// InputError when the variant text is malformed or the task has no template.
std::string template_source(const TaskSpec& task, const std::string& mode, const std::string& variant = "");
// Why the template policy has no template for `task`, or "" when it has one.
std::string template_unsupported(const TaskSpec& task);
// `count` distinct variants for `mode`: the defaults, then random ones drawn
// with `seed`.
std::vector<std::string> template_variants(const std::string& mode, int count, uint64_t seed);

}  // namespace kforge::rollout
