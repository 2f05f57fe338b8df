// The graph interpreter: validates the kernel inputs against the task, then
// evaluates node by node with the ATen implementations in aten_ops.h.
#include <map>
#include <string>

#include "kforge/core/op_registry.h"
#include "kforge/core/reference.h"
#include "reference/aten_ops.h"

namespace kforge::ref {
namespace {

std::string sizes_string(const at::Tensor& t) { return shape_to_string(t.sizes().vec()); }

void check_kernel_inputs(const TaskSpec& task, const std::vector<TensorSpec>& specs,
                         const std::vector<at::Tensor>& inputs) {
  const std::string prefix = "task '" + task.id + "': ";
  if (inputs.size() != specs.size()) {
    throw InputError(prefix + "got " + std::to_string(inputs.size()) + " kernel inputs, expected " +
                     std::to_string(specs.size()) + " (the task's inputs then its params)");
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string what = prefix + "kernel input " + std::to_string(i) + " \"" + specs[i].name + "\"";
    const at::Tensor& t = inputs[i];
    if (!t.defined()) throw InputError(what + " is an undefined tensor");
    if (t.sizes().vec() != specs[i].shape) {
      throw InputError(what + " has shape " + sizes_string(t) + ", expected " + shape_to_string(specs[i].shape) +
                       " (for a shape variant, pass task.with_variant(i))");
    }
    if (t.scalar_type() != to_scalar_type(specs[i].dtype)) {
      throw InputError(what + " has dtype " + c10::toString(t.scalar_type()) + ", expected " +
                       dtype_name(specs[i].dtype));
    }
    if (t.device() != inputs[0].device()) {
      throw InputError(what + " is on " + t.device().str() + " but kernel input 0 is on " + inputs[0].device().str());
    }
  }
}

// The dtype floating values are held in while interpreting: the requested
// compute dtype, or float32 for half types on the CPU, where libtorch lacks
// many float16/bfloat16 kernels (outputs are rounded back at the end).
c10::optional<at::ScalarType> working_float_type(const at::Tensor& t, std::optional<at::ScalarType> compute_dtype) {
  if (!at::isFloatingType(t.scalar_type())) return c10::nullopt;
  if (compute_dtype) return *compute_dtype;
  if (t.device().is_cpu() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16)) return at::kFloat;
  return c10::nullopt;
}

at::Tensor to_working(const at::Tensor& t, std::optional<at::ScalarType> compute_dtype) {
  const auto type = working_float_type(t, compute_dtype);
  return type && *type != t.scalar_type() ? t.to(*type) : t;
}

bool aliases_any(const at::Tensor& t, const std::vector<at::Tensor>& others) {
  for (const auto& o : others) {
    if (t.is_alias_of(o)) return true;
  }
  return false;
}

}  // namespace

std::vector<at::Tensor> run_reference(const TaskSpec& task, const std::vector<at::Tensor>& kernel_inputs,
                                      std::optional<at::ScalarType> compute_dtype) {
  if (compute_dtype && !at::isFloatingType(*compute_dtype)) {
    throw InputError("task '" + task.id + "': compute dtype " + c10::toString(*compute_dtype) +
                     " is not a floating type");
  }
  const std::map<std::string, TensorType> types = infer_graph(task);
  const std::vector<TensorSpec> specs = task.kernel_inputs();
  check_kernel_inputs(task, specs, kernel_inputs);

  std::map<std::string, at::Tensor> values;
  for (size_t i = 0; i < specs.size(); ++i) values[specs[i].name] = to_working(kernel_inputs[i], compute_dtype);

  const auto& impls = internal::aten_ops();
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    const GraphNode& node = task.nodes[i];
    const OpSchema* schema = op_registry().find(node.op);
    auto impl = impls.find(node.op);
    if (impl == impls.end()) {
      throw SystemError("op \"" + node.op + "\" is in the vocabulary but has no ATen implementation");
    }
    std::vector<at::Tensor> args;
    for (const auto& name : node.in) args.push_back(values.at(name));
    const json attrs = resolve_attrs(*schema, node.attrs, "");
    at::Tensor out;
    try {
      out = impl->second(args, attrs);
    } catch (const c10::Error& e) {
      // Shape inference accepted the node, so this is a gap between our
      // checks and ATen's; report it with the node rather than crash.
      throw InputError("task '" + task.id + "': node " + std::to_string(i) + " (" + node.op +
                       "): ATen rejected the node: " + e.what_without_backtrace());
    }
    values[node.out] = to_working(out, compute_dtype);
  }

  std::vector<at::Tensor> outputs;
  for (const auto& name : task.outputs) {
    at::Tensor t = values.at(name);
    const at::ScalarType declared = to_scalar_type(types.at(name).dtype);
    if (!(compute_dtype && at::isFloatingType(t.scalar_type())) && t.scalar_type() != declared) t = t.to(declared);
    t = t.contiguous();
    // Outputs own their memory: a layout-only graph must not hand back a
    // kernel input (or another output) that a caller may later overwrite.
    if (aliases_any(t, kernel_inputs) || aliases_any(t, outputs)) t = t.clone();
    outputs.push_back(t);
  }
  return outputs;
}

}  // namespace kforge::ref
