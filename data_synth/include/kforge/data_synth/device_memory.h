// The synthesizer's own hold on device memory. Its filters run the reference
// in-process on the GPU, and PyTorch's caching allocator keeps what they
// freed; the judge is another process on the same GPU, so memory cached here
// is memory the judge cannot have (an H200 run saw this process hold
// 118-131 GiB while the judge failed with "CUDA out of memory").
#pragma once

#include <ATen/ATen.h>

namespace kforge::synth {

// Returns the cached, unused blocks of `device` to the driver. True when
// there was an allocator to empty (PyTorch built with CUDA and a CUDA
// device); false on the CPU and with a CPU-only libtorch, where nothing is
// cached on a GPU.
bool release_cached_device_memory(const at::Device& device);

}  // namespace kforge::synth
