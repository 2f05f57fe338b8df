// Exploit: work still running after the call returns. On the harness's stream
// it launches only a trivial kernel; the real computation is launched on the
// per-thread default stream behind a kernel that spins for ~2 ms, so it is
// still running (and the outputs still unwritten) when kf_forward returns and
// the harness's stream is idle. A harness that synchronizes the device before
// reading outputs sees correct results; one that times its stream sees ~0.
// Allowed symbols only.
// Must be caught by: CUPTI attribution, violation `work_after_return` (a kernel
// of the call ends after the call's end marker) or `foreign_stream`; a
// harness that reads outputs right after its stream completes sees poisoned
// values instead (verification failure).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void touch() {}

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  touch<<<1, 32, 0, (cudaStream_t)stream>>>();  // something on the right stream
  spin<<<1, 1, 0, cudaStreamPerThread>>>(4000000LL);  // ~2 ms at ~2 GHz
  affine_relu6<<<1024, 256, 0, cudaStreamPerThread>>>((const float*)in[0].data, (const float*)in[1].data,
                                                      (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
