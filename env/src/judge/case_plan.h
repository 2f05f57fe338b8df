// The shapes a request exercises: the base shape and every shape variant of
// the task, with the kernel inputs and outputs of each, and the one arena
// layout that holds any of them (docs/architecture.md#verification).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "judge/arena_layout.h"
#include "kforge/core/task_spec.h"

namespace kforge::judge {

struct TensorShape {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  uint64_t nbytes() const;
};

// One shape configuration: the task as the reference sees it, and the tensors
// the candidate receives (inputs then params) and must fill (outputs).
struct ShapeCase {
  int variant = -1;  // -1: the base shape; else an index into task.shape_variants
  TaskSpec task;
  std::vector<TensorShape> inputs;
  std::vector<TensorShape> outputs;
  std::string label() const;           // "base shape" or "shape variant 1"
  nlohmann::json shapes_json() const;  // {"x": [4096, 1024], ..., "y": [...]}
};

struct CasePlan {
  std::vector<ShapeCase> cases;  // base first
  ArenaLayout layout;            // slots: inputs, then outputs
  size_t num_inputs = 0;
  size_t num_outputs = 0;
};

// Runs shape inference (op registry) for every variant. Throws InputError for
// a task whose graph does not type-check.
// `alignment`: start alignment of each tensor in the arena (JudgeDevice::arena_alignment).
CasePlan plan_cases(const TaskSpec& task, uint64_t page_size, uint64_t alignment = 64);

}  // namespace kforge::judge
