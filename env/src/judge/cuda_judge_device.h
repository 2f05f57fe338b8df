// The CUDA backend of the judge (docs/architecture.md#isolation, #verification,
// #timing): one cudaMalloc'd arena per request exported to the runner as a CUDA
// IPC handle, arena views as CUDA tensors over it (at::from_blob, so the
// generic verification and comparison code runs unchanged on the GPU), the L2
// flush sized from the device, CUDA event timing of the reference on ATen's
// stream, and clocks, power and energy from NVML.
//
// Only the CUDA runtime API and portable ATen calls are used, so this builds
// against libtorch 1.13 (CPU-only, CI) and 2.x with CUDA (GPU machines). Built
// only where the CUDA toolkit is found (KFORGE_HAVE_CUDA).
#pragma once

#include <memory>
#include <string>

#include "judge/judge_device.h"

namespace kforge::judge {

// Throws std::runtime_error when the device cannot be used (no GPU, a
// libtorch without CUDA, a driver error), with the reason.
std::unique_ptr<JudgeDevice> make_cuda_judge_device(int index);
// "gpu-<PCI bus id>" of device `index` (no context is created), or
// "cuda-<index>" when the runtime cannot say.
std::string cuda_gate_key(int index);

// CUDA devices this process can see; 0 when none (or no driver).
int cuda_device_count();

}  // namespace kforge::judge
