// The kernels of an nvrtc candidate's CUBIN once a device has loaded them
// (RunnerDevice::load_cubin). Kept apart from the CUDA code so that the plan
// logic (plan_candidate.h) builds and is tested without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include "kforge/env/cuda/launch_plan.h"

namespace kforge::runner {

class CubinKernels {
 public:
  virtual ~CubinKernels() = default;
  // Run when tensors are bound, before any launch of kernel `index` as
  // `launch` describes: checks what only the loaded kernel knows (threads per
  // block against its registers and __launch_bounds__, static plus dynamic
  // shared memory against the device) and raises its dynamic shared memory
  // limit when `launch` needs more than the 48 KiB default. Throws
  // std::runtime_error saying what does not fit.
  virtual void prepare(size_t index, const env::KernelLaunch& launch) = 0;
  // Launches kernel `index` (in the order of the names given to load_cubin)
  // with `params` (KernelLaunch::kernel_params()) on the device's stream.
  // Returns "" when it was launched, else why not. No allocation on success:
  // it runs inside timed calls.
  virtual std::string launch(size_t index, const env::KernelLaunch& launch, void** params) = 0;
};

}  // namespace kforge::runner
