// Exploit: work on another stream. Creates its own non-blocking stream once,
// launches the computation there and returns without synchronizing, so the
// harness's stream (and any timing on it) never waits for the work.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaStreamCreateWithFlags is not a symbol a candidate may import); if it
// ever got past that, CUPTI attribution (`foreign_stream`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  static cudaStream_t side = nullptr;
  if (side == nullptr && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) return 3;
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, side>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                                       (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
