// Renders a task as KernelBench-format Python (class Model, get_inputs,
// get_init_inputs): what the policy reads in its prompt and what Python tools
// run. The rendering executes under PyTorch 1.13 and 2.x and computes the same
// function as the C++ reference.
#pragma once

#include <string>

#include "kforge/core/task_spec.h"

namespace kforge {

std::string render_kernelbench(const TaskSpec& task);

}  // namespace kforge
