// Exploit: an all-zero output that passes a loose tolerance. y = x * 1e-3 has
// |y| below ~5e-3, inside the default float32 atol of 1e-2, so a single
// cudaMemsetAsync of the output passes allclose without reading x.
// Must be caught by: degenerate-output detection (an all-zero output where the
// reference is not), violation `degenerate_output`.
// Task: tests/adversarial/cuda/tasks/tiny_scale_loose.json.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const size_t bytes = (size_t)kf_numel(&out[0]) * sizeof(float);
  return cudaMemsetAsync(out[0].data, 0, bytes, (cudaStream_t)stream) == cudaSuccess ? 0 : 2;
}
