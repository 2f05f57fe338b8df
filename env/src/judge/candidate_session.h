// One candidate loaded in one runner, with its arena: the judge-side object
// that verification and timing drive. It binds a shape case (arena views for
// its inputs and outputs, tensor descriptors sent to the runner), fills
// inputs, poisons outputs and makes calls. Backend-neutral: arena views are
// tensors of the judge device.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "judge/arena_canary.h"
#include "judge/case_plan.h"
#include "judge/judge_device.h"
#include "judge/runner_process.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/compiler.h"

namespace kforge::judge {

// What a runner is set up with for `artifact`: the shared object (cpp, cuda),
// or the CUBIN, its launch plan and the task's tensor names in binding order
// (nvrtc), which the runner needs to evaluate the plan for bound shapes.
RunnerCandidate runner_candidate(const env::Artifact& artifact, const TaskSpec& task);

class CandidateSession {
 public:
  CandidateSession(JudgeDevice* device, std::unique_ptr<RunnerProcess> runner, const CasePlan* plan);
  ~CandidateSession();

  // Sends `setup`: the runner maps the arena, confines itself and loads the
  // candidate (runner_candidate()).
  RunnerReply start(const RunnerCandidate& candidate, const RunnerLimits& limits, ipc::Deadline deadline);
  // Also fills the canary bands around the case's tensors (arena_canary.h).
  RunnerReply bind(const ShapeCase& shape_case, ipc::Deadline deadline);
  // "" unless a call since bind() wrote outside the bound tensors.
  std::string out_of_bounds_write() const { return canary_.check(); }

  void load_inputs(const std::vector<at::Tensor>& inputs);
  void poison_outputs();
  // `options` travel with the call ({"graph": true}, {"repeat": n}).
  RunnerReply call(ipc::Deadline deadline, const json& options = json::object()) {
    return runner_->call(false, deadline, options);
  }
  RunnerReply null_call(ipc::Deadline deadline) { return runner_->call(true, deadline); }

  // The arena and a case's tensor descriptions ({"inputs", "outputs"} as in
  // `bind`), for a second runner on the same memory (the CUDA profiler).
  const SharedArena& arena() const { return *arena_; }
  json tensor_bindings(const ShapeCase& shape_case) const;

  // Views of the bound case's tensors in the arena.
  const std::vector<at::Tensor>& inputs() const { return input_views_; }
  const std::vector<at::Tensor>& outputs() const { return output_views_; }
  // Owned copies of the current outputs (they stay valid after re-poisoning).
  std::vector<at::Tensor> snapshot_outputs() const;
  const ShapeCase* bound_case() const { return bound_; }

  RunnerProcess& runner() { return *runner_; }
  const json& sandbox_state() const { return sandbox_; }

 private:
  JudgeDevice* device_;
  std::unique_ptr<RunnerProcess> runner_;
  const CasePlan* plan_;
  std::unique_ptr<SharedArena> arena_;
  const ShapeCase* bound_ = nullptr;
  std::vector<at::Tensor> input_views_, output_views_;
  ArenaCanary canary_;
  json sandbox_;
};

}  // namespace kforge::judge
