// The reference implementation of a task: a libtorch (ATen) interpreter over
// the operator graph (docs/architecture.md#tasks). Lives in the kforge_reference target so
// that only code that needs libtorch links it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::ref {

// The candidate's kernel inputs (task inputs then params, in order) for one
// seed, created on `device`. Deterministic for (task, seed, tensor name, device
// type): the same seed always gives the same data on the same kind of device.
// Each tensor draws from its own generator (of `device`'s kind) seeded with
// tensor_seed(seed, name), so adding a tensor never changes the others.
std::vector<at::Tensor> make_inputs(const TaskSpec& task, uint64_t seed, const at::Device& device);
uint64_t tensor_seed(uint64_t seed, const std::string& tensor_name);

// Executes the graph and returns the outputs in task order (contiguous, never
// aliasing an input), on the inputs' device. With `compute_dtype` set (e.g.
// at::kDouble), floating inputs and intermediates are held in it and floating
// outputs are returned in it: the KernelOPT-style high-precision reference.
// Without it, outputs have the task's dtypes (float16/bfloat16 graphs on the
// CPU are computed in float32 and rounded at the end, since CPU libtorch lacks
// many half-precision kernels). Throws InputError when the inputs do not match
// the task (count, shape, dtype, device) or the graph does not type-check.
std::vector<at::Tensor> run_reference(const TaskSpec& task, const std::vector<at::Tensor>& kernel_inputs,
                                      std::optional<at::ScalarType> compute_dtype = std::nullopt);

at::ScalarType to_scalar_type(DType dtype);
DType from_scalar_type(at::ScalarType type);  // InputError for unsupported types

}  // namespace kforge::ref
