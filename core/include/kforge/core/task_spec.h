// A task: an operator graph plus everything needed to judge a solution
// (docs/architecture.md#tasks). This is the unit the environment resets to.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/tensor_spec.h"

namespace kforge {

struct GraphNode {
  std::string op;
  std::vector<std::string> in;
  std::string out;
  json attrs = json::object();  // scalar constants of the op, validated by the op registry
};

struct Tolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
};

struct Baselines {
  std::string device;  // where they were measured, e.g. "NVIDIA H200"
  std::optional<double> eager_ms;
  std::optional<double> compile_ms;
};

// Bound on a task's serialized `meta` object: metadata, not a payload.
inline constexpr size_t kMaxTaskMetaBytes = 64 * 1024;

struct TaskSpec {
  std::string id;
  std::string source = "user";  // synth | kernelbench | user
  std::string description;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> params;
  std::vector<GraphNode> nodes;
  std::vector<std::string> outputs;
  // Each variant replaces the shapes of some inputs; params keep their shapes.
  std::vector<std::map<std::string, std::vector<int64_t>>> shape_variants;
  std::optional<Tolerance> tolerance;  // absent: per-dtype defaults
  std::optional<Baselines> baselines;
  // Libraries a candidate may link beyond the CUDA runtime and libc/libm
  // (e.g. "cublas", "cudnn"); empty means none.
  std::vector<std::string> libraries;
  // Free-form facts about where the task came from (data synthesis records its
  // seed, nearest KernelBench problem, filter statistics; the KernelBench
  // importer the problem file). Never read by the judge: it cannot change how
  // a solution is judged. A JSON object of at most kMaxTaskMetaBytes.
  json meta = json::object();

  // Inputs then params, in task order: the candidate's kernel inputs.
  std::vector<TensorSpec> kernel_inputs() const;
  // The task with one shape variant applied (index into shape_variants). The
  // result has no shape variants of its own.
  TaskSpec with_variant(size_t index) const;
  const TensorSpec* find_tensor(const std::string& name) const;
};

// Structural validation (names, references, duplicates). Shape/type checking
// of the graph is done by the op registry (kforge/core/op_registry.h).
TaskSpec parse_task(const Document& doc);
TaskSpec load_task(const std::filesystem::path& path);
json to_json(const TaskSpec& task);

}  // namespace kforge
