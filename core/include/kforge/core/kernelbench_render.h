// Renders a task as KernelBench-format Python (class Model, get_inputs,
// get_init_inputs): what the policy reads in its prompt and what Python tools
// run. The rendering executes under PyTorch 1.13 and 2.x and computes the same
// function as the C++ reference.
#pragma once

#include <map>
#include <string>

#include "kforge/core/task_spec.h"

namespace kforge {

// Throws InputError (from infer_graph) when the task does not type-check.
// Params become nn.Parameter attributes of Model (buffers for non-floating
// dtypes), initialized like make_inputs initializes them (same distribution,
// not the same values); inputs are created by get_inputs() in task order.
std::string render_kernelbench(const TaskSpec& task);

// The Python identifier used for each task value (inputs, params, node
// outputs): the task name when it is a valid, non-reserved identifier,
// otherwise a sanitized unique one. Params are attributes of Model under
// these names.
std::map<std::string, std::string> kernelbench_names(const TaskSpec& task);

}  // namespace kforge
