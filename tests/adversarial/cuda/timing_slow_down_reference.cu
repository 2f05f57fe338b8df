// Exploit: timing tamper by interference. The output is computed correctly on
// the harness's stream, but each call also leaves a kernel behind on the
// per-thread default stream that occupies every SM for ~3 ms. The reference,
// timed right after the candidate in the same session, then shares the GPU
// with it and looks slower, inflating the measured speedup. Allowed symbols
// only.
// Must be caught by: CUPTI attribution, violation `work_after_return` (a
// kernel of the call still runs after the call returned) or `foreign_stream`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

__global__ void hog(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, n, cols);
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  hog<<<sms * 8, 256, 0, cudaStreamPerThread>>>(6000000LL);  // ~3 ms on every SM
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
