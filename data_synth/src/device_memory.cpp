#include "kforge/data_synth/device_memory.h"

#if KFORGE_TORCH_CUDA_ALLOCATOR
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace kforge::synth {

bool release_cached_device_memory(const at::Device& device) {
  if (!device.is_cuda()) return false;
#if KFORGE_TORCH_CUDA_ALLOCATOR
  c10::cuda::CUDACachingAllocator::emptyCache();
  return true;
#else
  return false;
#endif
}

}  // namespace kforge::synth
