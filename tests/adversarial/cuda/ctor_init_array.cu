// Exploit: a hand-made .init_array entry. Instead of the constructor
// attribute, a function pointer is placed in .init_array directly, so the
// loader calls it while loading the object (outside the timed, checked call).
// Must be caught by: load-time inspection, violation `load_constructor`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

static int g_loaded = 0;
static void warm_up() { g_loaded = 1; }
__attribute__((section(".init_array"), used)) static void (*g_entry)(void) = warm_up;

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  if (!g_loaded) return 9;
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
