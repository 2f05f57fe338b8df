// Where resource usage comes from, shared by resource_usage and occupancy:
// the compiler report recorded in Artifact::resources when the compile step
// kept one, otherwise cuobjdump on the binary.
#pragma once

#include <string>
#include <vector>

#include "kforge/env/analysis.h"
#include "kforge/env/analysis/resources.h"

namespace kforge::env::internal {

struct ResourceReport {
  std::string source;  // "compiler report" or "cuobjdump"
  std::vector<KernelResources> kernels;
  std::vector<std::string> notes;  // caveats for the text
};

// Throws InputError when nothing is compiled, ToolUnavailable when the
// artifact has no recorded report and cuobjdump is not installed, SystemError
// when cuobjdump fails. With several architectures in one binary, keeps the
// device's.
ResourceReport obtain_resources(const AnalysisInput& input);

}  // namespace kforge::env::internal
