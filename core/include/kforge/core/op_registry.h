// The operator vocabulary: every op a task graph may use, with its category,
// attributes and shape/dtype inference (docs/architecture.md#tasks,
// #data-synthesis). No libtorch here: data synthesis and validation use it
// without executing anything. The ATen implementations live in reference.h.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/dtype.h"
#include "kforge/core/task_spec.h"

namespace kforge {

struct TensorType {
  TensorType() = default;
  TensorType(std::vector<int64_t> shape_, DType dtype_, std::string name_ = "")
      : shape(std::move(shape_)), dtype(dtype_), name(std::move(name_)) {}

  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  // The graph value this type belongs to ("x", "t0"); infer_graph fills it so
  // that inference errors can name the offending input. May be empty.
  std::string name;
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
const std::vector<OpCategory>& op_categories();

// A declared attribute of an op: its type, default and what it means.
// Types: "int"; "float" (ints accepted, stored as float); "number" (int or
// float, kept as written: an int scalar keeps an integer tensor integral, as
// in torch); "bool"; "string" (one of `choices` when that is non-empty);
// "int_list" (an int or a list of ints, as torch accepts for stride, dim, ...).
struct AttrSchema {
  std::string name;
  std::string type;
  json default_value = nullptr;  // null: required, unless `optional`
  std::string doc;
  // May be left out; the resolved value is then null and the op documents
  // what absence means (e.g. reduce over all dims).
  bool optional = false;
  std::vector<std::string> choices;
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
  // The PyTorch spelling of one call (e.g. "F.gelu(t0, approximate='tanh')")
  // given Python expressions for the inputs and the resolved attrs: used by
  // the KernelBench renderer, so it must compute what the reference computes.
  std::function<std::string(const std::vector<std::string>& args, const std::vector<TensorType>&, const json& attrs)>
      python;
};

class OpRegistry {
 public:
  const OpSchema* find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  std::vector<const OpSchema*> in_category(OpCategory c) const;
  // Throws std::logic_error on a duplicate name (a programming error).
  void add(OpSchema schema);

 private:
  std::map<std::string, OpSchema> ops_;
};

const OpRegistry& op_registry();

// Validates attrs of a node against its schema (unknown or ill-typed attrs
// are errors) and returns them with defaults filled in. `where` prefixes
// error messages (e.g. "task 't': node 2 (sum)").
json resolve_attrs(const OpSchema& schema, const json& attrs, const std::string& where);

// Output type of one node given its input types, with the same checks and
// messages as infer_graph (without the task/node prefix when `where` is
// empty). For callers that build graphs op by op (data synthesis).
TensorType infer_node(const GraphNode& node, const std::vector<TensorType>& inputs, const std::string& where = "");

// Type-checks the whole graph: every node's op exists, attrs are valid and
// shapes/dtypes agree. Returns the type of every named value (inputs, params,
// node outputs). Errors name the node ("node 2 (matmul): ..."), the task id
// and what was expected.
// Every tensor (inputs, params, intermediates, outputs) is also checked
// against the shape limits of kforge/core/input_limits.h (rank, element
// count, overflow), and the graph against the node cap.
std::map<std::string, TensorType> infer_graph(const TaskSpec& task);
std::vector<TensorType> infer_outputs(const TaskSpec& task);

// Everything about a task that can be checked without running it: the
// variant cap, then infer_graph for the task's own shapes and for every shape
// variant, so that every tensor of every variant is typed and within the
// limits. Errors name the variant ("task 't', shape variant 3: node 1
// (repeat): output \"y\": shape [...] has ... elements; ..."). Returns the
// output types: [0] for the task's own shapes, [1 + v] for variant v.
// Called at `task check`, reset and --tasks load.
std::vector<std::vector<TensorType>> validate_task(const TaskSpec& task);

// Minimum bytes that must move through memory for one call (each kernel input
// read once, each output written once) and total FLOPs: the roofline floor.
struct WorkEstimate {
  double bytes = 0;
  double flops = 0;
};
WorkEstimate estimate_work(const TaskSpec& task);

}  // namespace kforge
