// The operator vocabulary: every op a task graph may use, with its category,
// attributes and shape/dtype inference (DESIGN.md §3, §10). No libtorch here:
// data synthesis and validation use it without executing anything. The ATen
// implementations live in reference.h.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/dtype.h"
#include "kforge/core/task_spec.h"

namespace kforge {

struct TensorType {
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  int64_t numel() const;
};

enum class OpCategory {
  kMainLoop,     // matmul, bmm, linear, conv*, conv_transpose*
  kActivation,   // relu, gelu, silu, ...
  kNorm,         // layer_norm, group_norm, batch_norm, rms_norm, ...
  kReduction,    // sum, mean, max, ...
  kPooling,      // max_pool*, avg_pool*, adaptive pools
  kElementwise,  // add, mul, ... (tensor-tensor and tensor-scalar)
  kSoftmax,      // softmax, log_softmax
  kLayout,       // transpose, permute, reshape, flatten, ...
};
const std::string& op_category_name(OpCategory c);

// A declared attribute of an op: its type, default and what it means.
struct AttrSchema {
  std::string name;
  std::string type;  // "int", "float", "bool", "string", "int_list"
  json default_value = nullptr;  // null: required
  std::string doc;
};

struct OpSchema {
  std::string name;
  OpCategory category = OpCategory::kElementwise;
  int min_inputs = 1;
  int max_inputs = 1;
  std::vector<AttrSchema> attrs;
  std::string doc;  // one line, shown in prompts and --help
  // Given input types and attrs (defaults filled in), returns the output type
  // or throws InputError with a message that names the mismatch (the caller
  // adds which node it was).
  std::function<TensorType(const std::vector<TensorType>&, const json& attrs)> infer;
  // Floating-point operations for one call, for roofline estimates.
  std::function<double(const std::vector<TensorType>&, const TensorType& out, const json& attrs)> flops;
};

class OpRegistry {
 public:
  const OpSchema* find(const std::string& name) const;
  std::vector<std::string> names() const;
  void add(OpSchema schema);

 private:
  std::map<std::string, OpSchema> ops_;
};

const OpRegistry& op_registry();

// Validates attrs of a node against its schema (unknown or ill-typed attrs
// are errors) and returns them with defaults filled in.
json resolve_attrs(const OpSchema& schema, const json& attrs, const std::string& where);

// Type-checks the whole graph: every node's op exists, attrs are valid and
// shapes/dtypes agree. Returns the type of every named value (inputs, params,
// node outputs). Errors name the node ("node 2 (matmul): ..."), the task id
// and what was expected.
std::map<std::string, TensorType> infer_graph(const TaskSpec& task);
std::vector<TensorType> infer_outputs(const TaskSpec& task);

// Minimum bytes that must move through memory for one call (each kernel input
// read once, each output written once) and total FLOPs: the roofline floor.
struct WorkEstimate {
  double bytes = 0;
  double flops = 0;
};
WorkEstimate estimate_work(const TaskSpec& task);

}  // namespace kforge
