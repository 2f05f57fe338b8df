// Exploit: work in a namespace-scope initializer. `static const int g_ready =
// precompute_at_load();` compiles into a _GLOBAL__sub_I_* function that the
// loader runs while loading the object: untimed, unchecked, under the looser
// loading-phase filter. Here it launches a table-building kernel on the legacy
// default stream.
// Must be caught by: load-time inspection, violation `load_constructor`:
// elf_inspector.h accepts _GLOBAL__sub_I_* initializers, but not one whose
// calls reach an import that does GPU work (here __cudaLaunchKernel).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__device__ float g_table[1024];

__global__ void precompute() { g_table[threadIdx.x] = (float)threadIdx.x; }

static int precompute_at_load() {
  precompute<<<1, 1024>>>();
  return cudaGetLastError() == cudaSuccess ? 1 : 0;
}
static const int g_ready = precompute_at_load();

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  if (!g_ready) return 9;
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
