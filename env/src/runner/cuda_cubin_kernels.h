// An nvrtc candidate's CUBIN on the device (docs/cuda-backend.md): loaded
// with the runtime's library API (cudaLibraryLoadData, cudaLibraryGetKernel
// by each kernel's lowered name) in the loading phase, its kernels launched
// with cudaLaunchKernel on the candidate's stream.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "runner/device_allowance.h"
#include "runner/runner_device.h"

namespace kforge::runner {

// Throws std::runtime_error when the image does not load or lacks a kernel.
// `local_memory` gets the kernel with the most local memory per thread
// (device_allowance.h; the thread count is the caller's to fill).
std::unique_ptr<CubinKernels> load_cuda_cubin(const std::string& image, const std::vector<std::string>& names,
                                              cudaStream_t stream, int device,
                                              DeviceAllowance::LocalMemory* local_memory);

}  // namespace kforge::runner
