// Exploit: changing stream priorities. The work runs on a private stream
// created with the greatest priority the device allows, so it pre-empts the
// harness's reference and flush kernels when they overlap (and runs off the
// harness's stream).
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaDeviceGetStreamPriorityRange / cudaStreamCreateWithPriority); at run
// time `foreign_stream`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  static cudaStream_t fast = nullptr;
  if (fast == nullptr) {
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (cudaStreamCreateWithPriority(&fast, cudaStreamNonBlocking, greatest) != cudaSuccess) return 3;
  }
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, fast>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                                       (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
