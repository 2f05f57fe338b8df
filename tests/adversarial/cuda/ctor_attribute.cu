// Exploit: a load-time constructor doing work. An __attribute__((constructor))
// function runs while the runner dlopen()s the object, before kf_forward is
// ever called and so outside the strict seccomp filter, the timer and every
// check: here it launches a kernel that precomputes a lookup table (on the
// legacy default stream), and it could do anything the loading phase allows.
// Must be caught by: load-time inspection, violation `load_constructor`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__device__ float g_table[1024];

__global__ void precompute() { g_table[threadIdx.x] = (float)threadIdx.x; }

__attribute__((constructor)) static void at_load() { precompute<<<1, 1024>>>(); }

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
