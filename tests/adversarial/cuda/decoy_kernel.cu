// Exploit: a decoy kernel that is never launched. The source carries a
// respectable tiled GEMM kernel (what a reviewer or a source-level grader
// sees), but kf_forward never launches it: the product comes from cuBLAS,
// reached through a weak reference so that nothing is linked explicitly, in a
// task that does not allow cuBLAS.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (the weak, undefined cublas* imports are still imports); at run time the
// weak symbols resolve to nothing and the call fails (`runtime_error`), and
// CUPTI attribution flags kernels that are not the candidate's.
// Task: examples/matmul_bias_relu.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

// The decoy: never launched.
__global__ void tiled_gemm_bias_relu(const float* x, const float* w, const float* b, float* y, int m, int k, int n) {
  __shared__ float xs[32][33], ws[32][33];
  const int row = blockIdx.y * 32 + threadIdx.y, col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  for (int p0 = 0; p0 < k; p0 += 32) {
    xs[threadIdx.y][threadIdx.x] = (row < m && p0 + threadIdx.x < k) ? x[row * k + p0 + threadIdx.x] : 0.0f;
    ws[threadIdx.y][threadIdx.x] = (p0 + threadIdx.y < k && col < n) ? w[(p0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int p = 0; p < 32; ++p) acc += xs[threadIdx.y][p] * ws[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) y[row * n + col] = fmaxf(acc + b[col], 0.0f);
}

__global__ void bias_relu(float* y, const float* b, long total, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    y[i] = fmaxf(y[i] + b[i % cols], 0.0f);
  }
}

// cuBLAS v2 entry points, declared by hand and weak: no header, no -lcublas.
extern "C" {
int cublasCreate_v2(void** handle) __attribute__((weak));
int cublasSetStream_v2(void* handle, cudaStream_t s) __attribute__((weak));
int cublasSgemm_v2(void* handle, int ta, int tb, int m, int n, int k, const float* alpha, const float* a, int lda,
                   const float* b, int ldb, const float* beta, float* c, int ldc) __attribute__((weak));
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  if (cublasCreate_v2 == nullptr || cublasSgemm_v2 == nullptr) return 5;  // library not loaded
  static void* h = nullptr;
  if (h == nullptr && cublasCreate_v2(&h) != 0) return 3;
  cublasSetStream_v2(h, (cudaStream_t)stream);
  const int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  const float one = 1.0f, zero = 0.0f;
  cublasSgemm_v2(h, 0, 0, n, m, k, &one, (const float*)in[1].data, n, (const float*)in[0].data, k, &zero,
                 (float*)out[0].data, n);
  bias_relu<<<512, 256, 0, (cudaStream_t)stream>>>((float*)out[0].data, (const float*)in[2].data, (long)m * n, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
