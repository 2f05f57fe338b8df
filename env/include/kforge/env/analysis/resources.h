// Per-kernel resource usage (registers, shared memory, stack, spills) from the
// two places it can come from: the compiler's report (ptxas -v, nvcc
// --resource-usage) recorded at compile time, and `cuobjdump
// --dump-resource-usage` run on the binary afterwards.
//
// The JSON form is what Artifact::resources holds (compiler.h), keyed by the
// demangled signature with the symbol in "mangled":
//   {"scale(float*, int)": {"mangled": "_Z5scalePfi", "registers": 32,
//       "barriers": 1, "shared_bytes": 0, "constant_bytes": 364,
//       "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
//       "spill_bytes": 0, "local_bytes": 0, "arch": "sm_90a", "entry": true}}
// Every value is optional (absent = not reported); without "mangled" the key
// is taken as the symbol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/demangle.h"  // demangle(): kernel names in reports
#include "kforge/core/document.h"

namespace kforge::env {

struct KernelResources {
  std::string name;                     // mangled, as in the binary
  std::string arch;                     // e.g. "sm_90a"; empty when not reported
  std::optional<bool> entry;            // a __global__ kernel (true) or a device function
  std::optional<int> registers;         // per thread
  std::optional<int64_t> shared_bytes;  // static shared memory per block
  std::optional<int64_t> stack_bytes;   // per-thread stack frame (local arrays, spills)
  std::optional<int64_t> spill_store_bytes;
  std::optional<int64_t> spill_load_bytes;
  std::optional<int64_t> spill_total_bytes;  // when only the sum is known
  std::optional<int64_t> local_bytes;        // cuobjdump LOCAL
  std::optional<int64_t> constant_bytes;     // constant bank 0 (parameters, literals)
  std::optional<int> barriers;

  // Spill stores + loads, or the recorded total; nullopt when not reported.
  std::optional<int64_t> spill_bytes() const;
};

// Reads the `ptxas info` lines of a compile log (nvcc -Xptxas -v or
// --resource-usage, NVRTC --ptxas-options=-v). Functions appear in the order
// ptxas reports them; non-entry (device) functions are included with entry =
// false. Lines that are not ptxas info lines are ignored.
std::vector<KernelResources> parse_ptxas_info(const std::string& log);

// Reads `cuobjdump --dump-resource-usage` output (one "Resource usage:" block
// per embedded ELF; REG/STACK/SHARED/LOCAL/CONSTANT[n] per function).
std::vector<KernelResources> parse_cuobjdump_resource_usage(const std::string& text);

// cuobjdump's SHARED for sm_90 and newer targets counts the 1 KB the driver
// reserves per block (observed on sm_90a with CUDA 13.0: 5120 for a kernel
// whose ptxas report and cudaFuncGetAttributes say 4096; sm_80 does not);
// ptxas and the occupancy rules count it separately. Subtracts `reserved`
// from such values for kernels of those targets (`default_arch` when the
// listing names none, as for a bare CUBIN); returns how many were adjusted.
int remove_reserved_shared(std::vector<KernelResources>& kernels, const std::string& default_arch,
                           int64_t reserved = 1024);

// Artifact::resources form (see above) and back. Reading accepts common
// synonyms ("regs", "smem_bytes", "static_shared_bytes", "stack_frame_bytes",
// "cmem_bytes", ...) so that compile backends need not agree on spelling, and
// throws InputError for a value of the wrong type.
json resources_to_json(const std::vector<KernelResources>& kernels);
std::vector<KernelResources> resources_from_json(const json& resources);
json to_json(const KernelResources& kernel);

}  // namespace kforge::env
