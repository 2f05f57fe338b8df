// The declarative launch plan of an nvrtc solution (docs/architecture.md#solutions): which
// kernels of the CUBIN to launch, in order, on the harness's stream, with
// grid / block / dynamic shared memory given as expressions over the task's
// tensor shapes and a typed argument list. Full grammar: docs/launch-plan.md.
//
//   "launch": {"kernels": [
//     {"name": "scale<float, 4>",
//      "grid": ["cdiv(numel(x), 256)"], "block": [256], "shared_mem": 0,
//      "args": ["x", "y", "i64(numel(x))", "f32(0.5)"]}]}
//
// A single kernel may also be written without the "kernels" list.
//
// Two halves, used by two processes:
//  - parse_launch_plan() runs when the solution is compiled: syntax, arity and
//    tensor names are checked against the task and errors name the JSON path.
//    The NVRTC compiler stores to_json(plan) (normalized, with each kernel's
//    lowered name) in Artifact::launch.
//  - evaluate_launch_plan() runs in the sandboxed runner for each shape
//    variant and yields concrete dimensions and packed argument bytes for
//    cuLaunchKernel; arithmetic faults and out-of-range launches are
//    LaunchErrors, reported to the policy.
// This part depends on kforge_core only (no CUDA, no libtorch) so that the
// runner can link it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/cuda/launch_expr.h"

namespace kforge::env {

enum class LaunchArgType { kTensor, kI32, kI64, kU32, kU64, kF32, kF64 };

// "tensor", "i32", "i64", "u32", "u64", "f32", "f64".
const std::string& launch_arg_type_name(LaunchArgType type);

struct LaunchArg {
  LaunchArgType type = LaunchArgType::kTensor;
  std::string tensor;  // kTensor: the task tensor whose device pointer is passed
  LaunchExpr value;    // scalars: the value, of kind kFloat for f32/f64
};

struct KernelLaunchSpec {
  // As written: a kernel name or a template instantiation ("scale<float, 4>"),
  // registered with NVRTC as a name expression.
  std::string name;
  // The mangled name in the CUBIN; filled by the NVRTC compiler, empty before.
  std::string lowered_name;
  std::array<LaunchExpr, 3> grid;
  std::array<LaunchExpr, 3> block;
  LaunchExpr shared_mem;  // dynamic shared memory in bytes
  std::vector<LaunchArg> args;
};

struct LaunchPlan {
  std::vector<KernelLaunchSpec> kernels;
};

// Names an expression or a tensor argument may refer to: the task's inputs,
// params and outputs, in that order.
std::vector<std::string> launch_tensor_names(const TaskSpec& task);

// Parses and validates a plan. Errors are InputErrors that name the JSON path
// (e.g. "field /launch/kernels/0/grid/0: at column 7: ...").
LaunchPlan parse_launch_plan(const Field& launch, const std::vector<std::string>& tensor_names);
// Same, for a plan held as a value: `pointer_prefix` is prepended to the JSON
// paths in errors ("/launch" for the plan of a solution document).
LaunchPlan parse_launch_plan(const json& launch, const std::vector<std::string>& tensor_names,
                             const std::string& source = "<launch>", const std::string& pointer_prefix = "/launch");
// Normalized form: always the "kernels" list, three grid and block entries,
// canonical expression text; parse_launch_plan(to_json(p)) == p.
json to_json(const LaunchPlan& plan);

// Device limits checked by evaluation. Defaults: sm_90 (H100/H200).
struct LaunchLimits {
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block = {1024, 1024, 64};
  std::array<int64_t, 3> max_grid = {2147483647, 65535, 65535};
  int64_t max_shared_mem_bytes = 232448;  // 227 KiB, the sm_90 opt-in maximum per block
  size_t max_arg_bytes = 4096;            // kernel parameter space
};

// One kernel launch, concrete for one set of shapes. Arguments are packed
// into one buffer, each at its natural alignment: the layout of the kernel's
// parameter block, so the buffer is valid for CU_LAUNCH_PARAM_BUFFER_POINTER
// and kernel_params() for cuLaunchKernel's kernelParams.
class KernelLaunch {
 public:
  struct Slot {
    LaunchArgType type;
    std::string tensor;  // kTensor only
    size_t offset;       // into the argument buffer
    size_t size;
  };

  std::string name;
  std::string lowered_name;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t shared_mem_bytes = 0;

  const std::vector<Slot>& slots() const { return slots_; }
  const void* arg_buffer() const { return storage_.data(); }
  size_t arg_buffer_size() const { return size_; }

  // Writes the device pointers of the tensor arguments; every tensor the
  // kernel takes must be present (LaunchError otherwise).
  void bind_tensors(const std::map<std::string, void*>& pointers);
  // One pointer per argument into the buffer, for cuLaunchKernel. Valid while
  // this object is alive and unmodified.
  std::vector<void*> kernel_params();

  // Appends an argument of `size` bytes from `value`; used by evaluation.
  void append(LaunchArgType type, const std::string& tensor, const void* value, size_t size);

 private:
  std::vector<Slot> slots_;
  std::vector<uint64_t> storage_;  // 8-byte aligned backing for the packed bytes
  size_t size_ = 0;
};

// Evaluates every kernel of `plan` for one set of shapes (all tensors the plan
// mentions, outputs included). Throws LaunchError naming the kernel and the
// field ("kernels[0] (scale<float, 4>): grid.x = ...: division by zero").
std::vector<KernelLaunch> evaluate_launch_plan(const LaunchPlan& plan, const ShapeMap& shapes,
                                               const LaunchLimits& limits = {});

}  // namespace kforge::env
