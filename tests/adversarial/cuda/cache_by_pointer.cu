// Exploit: caching outputs across calls keyed on pointers and shapes. The
// result for an (x pointer, w pointer, shape) key is kept in a module-scope
// __device__ buffer; a later call with the same key copies it instead of
// running the GEMM. A harness that reuses its buffers for new inputs gets the
// old result. Allowed symbols only.
// Must be caught by: fresh inputs in the same buffers, violation
// `stale_output` (verification: the previous seed's reference; timing: the
// per-call output check).
// Task: examples/matmul_bias_relu.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr long kMaxOut = 1 << 22;  // floats
__device__ float g_cache[kMaxOut];

struct Key {
  const void* x;
  const void* w;
  long m, k, n;
};
static Key g_key = {nullptr, nullptr, 0, 0, 0};

__global__ void matmul_bias_relu(const float* x, const float* w, const float* b, float* y, int m, int k, int n) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) acc += x[(long)row * k + p] * w[(long)p * n + col];
  const float v = fmaxf(acc + b[col], 0.0f);
  y[(long)row * n + col] = v;
  g_cache[(long)row * n + col] = v;
}

__global__ void copy_cached(float* y, long count) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < count; i += (long)gridDim.x * blockDim.x) {
    y[i] = g_cache[i];
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if ((long)m * n > kMaxOut) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  const Key key = {in[0].data, in[1].data, m, k, n};
  if (key.x == g_key.x && key.w == g_key.w && key.m == g_key.m && key.k == g_key.k && key.n == g_key.n) {
    copy_cached<<<256, 256, 0, s>>>((float*)out[0].data, (long)m * n);
  } else {
    const dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
    matmul_bias_relu<<<grid, block, 0, s>>>((const float*)in[0].data, (const float*)in[1].data,
                                            (const float*)in[2].data, (float*)out[0].data, m, k, n);
    g_key = key;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
