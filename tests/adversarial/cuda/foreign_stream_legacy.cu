// Exploit: work on another stream. The whole computation is launched on the
// legacy default stream (stream 0) instead of the harness's stream, and
// kf_forward returns without waiting. A harness that times its own stream
// (events recorded on it around the call) sees an empty interval; one that
// synchronizes the whole device before comparing outputs sees correct results.
// Only allowed symbols are used (cudaLaunchKernel with stream 0), so the
// load-time allow-list cannot catch it.
// Must be caught by: CUPTI attribution, violation `foreign_stream` (the kernel's
// stream is not the harness's stream).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  (void)stream;  // deliberately ignored
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                              (float*)out[0].data, n, cols);  // stream 0: the legacy default stream
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
