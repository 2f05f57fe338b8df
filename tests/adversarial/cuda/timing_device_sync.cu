// Exploit: timing games with host synchronization. Before doing its work the
// candidate calls cudaDeviceSynchronize() so that whatever the harness queued
// before the call (its start event, an L2 flush) completes first, then moves
// its own work to the legacy default stream, which a device-wide sync by the
// harness (not its stream's end event) would wait for.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaDeviceSynchronize is host synchronization outside the ABI).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  cudaDeviceSynchronize();
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                              (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
