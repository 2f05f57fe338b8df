// Per-kernel resource usage from ptxas' verbose output (nvcc --resource-usage,
// NVRTC -Xptxas=-v): registers, barriers, static shared memory, constant
// memory, stack frame and spills. Feeds Artifact::resources and, through it,
// the occupancy and spill hints in observations.
#pragma once

#include <string>

#include "kforge/core/document.h"

namespace kforge::env {

// {"<demangled signature>" (kforge/core/demangle.h, bounded): {"mangled", "registers", "barriers", "shared_bytes",
// "constant_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes"}}
// for every entry function (kernel) in the log; device functions are left out.
json parse_ptxas_resource_usage(const std::string& log);

}  // namespace kforge::env
