// A candidate shared object (modes cpp and cuda), loaded with dlopen and never
// unloaded (the runner exits after one candidate). Loading runs its static
// constructors, which is why it happens inside the sandbox's loading phase.
#pragma once

#include <memory>
#include <string>

#include "runner/candidate.h"
#include "runner/runner_device.h"

namespace kforge::runner {

using KfForward = int (*)(const kf_tensor*, int, kf_tensor*, int, void*);

// Loads `path` and resolves kf_forward; forward() passes it the bound tensors
// and the device's stream. Throws std::runtime_error with the dlopen/dlsym
// message.
std::unique_ptr<Candidate> load_library_candidate(const std::string& path, RunnerDevice* device);

}  // namespace kforge::runner
