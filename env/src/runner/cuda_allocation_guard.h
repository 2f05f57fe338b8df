// Puts a candidate's device allocations under its runner's DeviceAllowance
// (device_allowance.h), so that a lane's candidate cannot take the memory of
// the other lanes on its GPU (judge/lane_memory_budget.h).
//
// The runner executable defines and exports (CMakeLists.txt, exports.list)
// the CUDA runtime entry points through which a candidate's host code can
// allocate device memory: cudaMallocAsync and cudaFreeAsync (the only ones
// judge/symbol_policy.cpp lets a candidate import; torch_ext's tensors
// come from them too), and cudaMalloc and cudaFree (none may import them
// today; defence in depth). The dynamic loader binds a candidate's references
// to the executable's definitions before libcudart's (the executable comes
// first in the global scope, and an unversioned definition matches its
// versioned references), so every such call of the candidate reaches these,
// which count it and call the runtime's own (found with dlsym(RTLD_NEXT) at
// start-up) or refuse it with cudaErrorMemoryAllocation. The runner's own calls
// reach them too and pass straight through until arm().
//
// __cudaRegisterFunction is exported as well: every nvcc-built kernel of the
// candidate registers its host stub at load time, and the stubs' attributes
// say how much local memory each kernel needs (DeviceAllowance::LocalMemory).
//
// What this does not see: allocations inside libraries that carry their own
// static runtime (cuBLAS, cuDNN: their handles' workspaces, tens of MiB, which
// the candidate floor of task_fit.h and the device's reserve absorb),
// device-side malloc (its heap is fixed per context, 8 MiB), and a candidate
// that corrupts the runner's memory to lift its count (the runner's memory is
// the candidate's to write; docs/execution.md, "Sandbox", residual risks).
#pragma once

#include <string>
#include <vector>

#include "runner/device_allowance.h"

namespace kforge::runner::allocation_guard {

// Finds the runtime's own entry points. "" or why not; before any filter.
std::string install();

// Counts against `allowance` from now on, and records kernel registrations.
void arm(DeviceAllowance allowance);
// Once the candidate is loaded: its kernels' local memory (after arm()).
void set_local_memory(DeviceAllowance::LocalMemory local);
// Why the armed allowance cannot hold the candidate's local memory ("" if it can).
std::string local_memory_problem();

struct RegisteredKernel {
  const void* host_stub = nullptr;
  std::string name;  // mangled, at most 256 bytes
};
// Kernels registered since arm() (the candidate's, as it was loaded).
std::vector<RegisteredKernel> registered_kernels();

// The first allocation refused since the last take, "" if none: the call
// that made it fails with this message.
std::string take_refusal();

}  // namespace kforge::runner::allocation_guard
