// Exploit: switching off the profiler. cudaProfilerStop() at the start of
// every call stops CUPTI/Nsight collection, hoping that kernel attribution
// (and any check built on it) then sees an empty trace.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaProfilerStop); at run time an empty trace for a call that produced
// correct outputs must itself be a violation (`timing_tamper`).
// Task: examples/affine_relu6.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  cudaProfilerStop();
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
