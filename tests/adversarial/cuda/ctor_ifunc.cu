// Exploit: code run during relocation. kf_forward is a GNU indirect function:
// the dynamic loader calls its resolver while relocating the object (before
// any constructor, long before the first call), and the resolver can run
// arbitrary code in the loading phase.
// Must be caught by: load-time inspection, violation `load_constructor`
// (an IFUNC resolver).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

static int g_resolved_at_load = 0;

static int forward_impl(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  if (!g_resolved_at_load) return 9;
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

typedef int (*ForwardFn)(const kf_tensor*, int, kf_tensor*, int, void*);

extern "C" ForwardFn resolve_forward() {
  g_resolved_at_load = 1;  // arbitrary work during relocation
  return forward_impl;
}

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) __attribute__((ifunc("resolve_forward")));
