// Exploit: a constant output that passes a loose tolerance. Every element of
// a softmax over 8192 columns is about 1/8192 = 1.2e-4, far inside the
// default float32 atol of 1e-2, so writing 1/cols everywhere (one memset-speed
// pass, never reading x) passes allclose on every seed and shape.
// Must be caught by: degenerate-output detection (outputs that do not depend
// on the inputs / are constant while the reference is not, or a tolerance
// that a constant passes), violation `degenerate_output`.
// Task: tests/adversarial/cuda/tasks/softmax_wide_loose.json.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void fill(float* y, long n, float v) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) y[i] = v;
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  fill<<<1024, 256, 0, (cudaStream_t)stream>>>((float*)out[0].data, n, 1.0f / (float)cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
