// The reference implementation of a task: a libtorch (ATen) interpreter over
// the operator graph (DESIGN.md §3). Lives in the kforge_reference target so
// that only code that needs libtorch links it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "kforge/core/task_spec.h"

namespace kforge::ref {

// The candidate's kernel inputs (task inputs then params, in order) for one
// seed, created on `device`. Deterministic for (task, seed, tensor name, device
// type): the same seed always gives the same data on the same kind of device.
std::vector<at::Tensor> make_inputs(const TaskSpec& task, uint64_t seed, const at::Device& device);

// Executes the graph and returns the outputs in task order (contiguous).
// With `compute_dtype` set (e.g. at::kDouble), floating inputs are upcast
// first: the KernelOPT-style high-precision reference.
std::vector<at::Tensor> run_reference(const TaskSpec& task, const std::vector<at::Tensor>& kernel_inputs,
                                      std::optional<at::ScalarType> compute_dtype = std::nullopt);

at::ScalarType to_scalar_type(DType dtype);
DType from_scalar_type(at::ScalarType type);  // InputError for unsupported types

}  // namespace kforge::ref
