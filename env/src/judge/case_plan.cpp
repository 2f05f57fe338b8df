#include "judge/case_plan.h"

#include <algorithm>

#include "kforge/core/error.h"
#include "kforge/core/op_registry.h"

namespace kforge::judge {

uint64_t TensorShape::nbytes() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n * dtype_size(dtype);
}

std::string ShapeCase::label() const { return variant < 0 ? "base shape" : "shape variant " + std::to_string(variant); }

nlohmann::json ShapeCase::shapes_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& t : inputs) j[t.name] = t.shape;
  for (const auto& t : outputs) j[t.name] = t.shape;
  return j;
}

CasePlan plan_cases(const TaskSpec& task, uint64_t page_size, uint64_t alignment) {
  CasePlan plan;
  for (int v = -1; v < static_cast<int>(task.shape_variants.size()); ++v) {
    ShapeCase c;
    c.variant = v;
    c.task = v < 0 ? task : task.with_variant(static_cast<size_t>(v));
    for (const auto& spec : c.task.kernel_inputs()) c.inputs.push_back({spec.name, spec.shape, spec.dtype});
    std::vector<TensorType> out_types = infer_outputs(c.task);
    if (out_types.size() != c.task.outputs.size()) throw InputError("task " + task.id + ": output count mismatch");
    for (size_t i = 0; i < out_types.size(); ++i) {
      c.outputs.push_back({c.task.outputs[i], out_types[i].shape, out_types[i].dtype});
    }
    plan.cases.push_back(std::move(c));
  }
  plan.num_inputs = plan.cases.front().inputs.size();
  plan.num_outputs = plan.cases.front().outputs.size();
  std::vector<uint64_t> max_bytes(plan.num_inputs + plan.num_outputs, 0);
  for (const auto& c : plan.cases) {
    for (size_t i = 0; i < c.inputs.size(); ++i) max_bytes[i] = std::max(max_bytes[i], c.inputs[i].nbytes());
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      max_bytes[plan.num_inputs + i] = std::max(max_bytes[plan.num_inputs + i], c.outputs[i].nbytes());
    }
  }
  plan.layout = plan_arena(max_bytes, page_size, alignment);
  return plan;
}

}  // namespace kforge::judge
