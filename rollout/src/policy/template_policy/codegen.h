// Source generation for the template policy: one complete solution file for a
// lowered task and a variant, in the backend's mode (`cpp` for the CPU
// backend, `cuda` for the GPU), exporting kf_forward per kforge/kernel_abi.h.
// Every size is read from the kernel inputs at run time, so one file serves
// every shape variant of the task.
#pragma once

#include <string>

#include "policy/template_policy/kernel_graph.h"
#include "policy/template_policy/variant.h"

namespace kforge::rollout::template_policy {

std::string generate_cpp(const KernelGraph& graph, const Variant& variant);
std::string generate_cuda(const KernelGraph& graph, const Variant& variant);

}  // namespace kforge::rollout::template_policy
