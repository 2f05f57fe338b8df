// An nvrtc candidate (docs/launch-plan.md): a CUBIN loaded onto the device and
// the launch plan that says how to run it. The plan is parsed once at setup
// (the judge sends it with the tensor names it uses, in binding order), and
// evaluated for the shapes of every bound case: grids, blocks, dynamic shared
// memory and packed arguments are computed there, with the tensors' arena
// addresses, so that forward() only launches the prepared kernels in order.
//
// Errors: a plan that does not parse, a kernel without its lowered name or a
// CUBIN that cannot be read or loaded fail the setup (stage `load`); a plan
// that cannot be evaluated for the bound shapes (division by zero, a grid out
// of range, ...) fails the `bind` with the LaunchError's text, which names
// the kernel and the field; a launch the runtime refuses fails the call with
// the runtime's error, naming the kernel.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kforge/env/cuda/launch_plan.h"
#include "runner/candidate.h"
#include "runner/cubin_kernels.h"

namespace kforge::runner {

// Loads a CUBIN image and resolves the kernels with these lowered names, in
// this order (RunnerDevice::load_cubin). Throws std::runtime_error.
using CubinLoader =
    std::function<std::unique_ptr<CubinKernels>(const std::string& image, const std::vector<std::string>& names)>;

// From the `setup` message's {"cubin", "launch", "tensors"}: parses the plan
// against the tensor names, requires every kernel's lowered name (written by
// the NVRTC compiler), reads the CUBIN file and hands it to `load`. Throws
// std::runtime_error, reported as a load failure. Runs in the loading phase,
// which allows the read-only file access.
std::unique_ptr<Candidate> load_plan_candidate(const nlohmann::json& setup, const CubinLoader& load,
                                               const env::LaunchLimits& limits = {});

// The same candidate from its parts (tests).
std::unique_ptr<Candidate> make_plan_candidate(env::LaunchPlan plan, std::vector<std::string> tensor_names,
                                               std::unique_ptr<CubinKernels> kernels,
                                               const env::LaunchLimits& limits = {});

}  // namespace kforge::runner
