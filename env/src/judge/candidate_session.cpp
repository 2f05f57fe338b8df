#include "judge/candidate_session.h"

#include "kforge/core/reference.h"
#include "kforge/env/cuda/launch_plan.h"

namespace kforge::judge {
namespace {

json describe_tensor(const TensorShape& t, uint64_t offset) {
  std::vector<int64_t> stride(t.shape.size(), 1);
  for (size_t i = t.shape.size(); i-- > 1;) stride[i - 1] = stride[i] * t.shape[i];
  return {{"offset", offset},
          {"nbytes", t.nbytes()},
          {"dtype", static_cast<int32_t>(t.dtype)},
          {"shape", t.shape},
          {"stride", stride}};
}

}  // namespace

RunnerCandidate runner_candidate(const env::Artifact& artifact, const TaskSpec& task) {
  if (artifact.mode == SolutionMode::kNvrtc) {
    return RunnerCandidate::nvrtc(artifact.path, artifact.launch, env::launch_tensor_names(task));
  }
  return RunnerCandidate::shared_object(artifact.path);
}

CandidateSession::CandidateSession(JudgeDevice* device, std::unique_ptr<RunnerProcess> runner, const CasePlan* plan)
    : device_(device), runner_(std::move(runner)), plan_(plan), arena_(device->create_arena(plan->layout)) {}

CandidateSession::~CandidateSession() {
  // Views alias the arena: drop them before it is unmapped.
  input_views_.clear();
  output_views_.clear();
  runner_->terminate();
}

RunnerReply CandidateSession::start(const RunnerCandidate& candidate, const RunnerLimits& limits,
                                    ipc::Deadline deadline) {
  RunnerReply r = runner_->setup(candidate, limits, arena_->descriptor(), arena_->descriptors(), deadline);
  if (r.ok() && r.body.contains("sandbox")) sandbox_ = r.body["sandbox"];  // a map (reply_problem)
  return r;
}

json CandidateSession::tensor_bindings(const ShapeCase& c) const {
  json inputs = json::array(), outputs = json::array();
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(describe_tensor(c.inputs[i], plan_->layout.data_offset(i, c.inputs[i].nbytes())));
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    outputs.push_back(
        describe_tensor(c.outputs[i], plan_->layout.data_offset(plan_->num_inputs + i, c.outputs[i].nbytes())));
  }
  return {{"inputs", inputs}, {"outputs", outputs}};
}

RunnerReply CandidateSession::bind(const ShapeCase& c, ipc::Deadline deadline) {
  json inputs = json::array(), outputs = json::array();
  input_views_.clear();
  output_views_.clear();
  std::vector<NamedExtent> extents;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    uint64_t offset = plan_->layout.data_offset(i, c.inputs[i].nbytes());
    inputs.push_back(describe_tensor(c.inputs[i], offset));
    input_views_.push_back(arena_->view(offset, c.inputs[i].shape, ref::to_scalar_type(c.inputs[i].dtype)));
    extents.push_back({"input " + c.inputs[i].name, {offset, c.inputs[i].nbytes()}});
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    uint64_t offset = plan_->layout.data_offset(plan_->num_inputs + i, c.outputs[i].nbytes());
    outputs.push_back(describe_tensor(c.outputs[i], offset));
    output_views_.push_back(arena_->view(offset, c.outputs[i].shape, ref::to_scalar_type(c.outputs[i].dtype)));
    extents.push_back({"output " + c.outputs[i].name, {offset, c.outputs[i].nbytes()}});
  }
  canary_.arm(arena_.get(), std::move(extents));
  device_->synchronize();
  bound_ = &c;
  return runner_->bind(inputs, outputs, deadline);
}

void CandidateSession::load_inputs(const std::vector<at::Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size() && i < input_views_.size(); ++i) device_->copy_into(input_views_[i], inputs[i]);
}

void CandidateSession::poison_outputs() {
  for (auto& view : output_views_) device_->poison(view);
}

std::vector<at::Tensor> CandidateSession::snapshot_outputs() const {
  std::vector<at::Tensor> out;
  for (const auto& view : output_views_) out.push_back(view.clone());
  return out;
}

}  // namespace kforge::judge
