// Exploit: garbage memory that passes once. The candidate computes nothing: it
// copies a module-scope __device__ scratch buffer that it never writes into
// the output, betting that the memory still holds a previous result (as a
// freshly allocated output buffer often does right after the reference ran
// into the same allocation). Allowed symbols only.
// Must be caught by: outputs poisoned before every call and fresh seeds:
// verification failure (outcome `wrong`).
// Task: examples/sum_of_squares.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__device__ float g_scratch[1 << 16];

__global__ void copy_scratch(float* y, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = g_scratch[i];
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long rows = (long)in[0].shape[0];
  if (rows > (1 << 16)) return 1;
  copy_scratch<<<64, 256, 0, (cudaStream_t)stream>>>((float*)out[0].data, rows);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
