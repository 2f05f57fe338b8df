// Exploit: calling a library outside the task's allow-list. The task
// (examples/matmul_bias_relu) does not list "cublas", but the candidate calls
// cublasSgemm anyway and adds a tiny epilogue kernel, buying cuBLAS's speed
// instead of writing a GEMM. The compile service does not link cuBLAS for
// this task, so the cuBLAS entry points stay undefined in the object.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cublasCreate_v2, cublasSgemm_v2, ...; libcublas would be
// `forbidden_library`).
// Task: examples/matmul_bias_relu.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void bias_relu(float* y, const float* b, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fmaxf(y[i] + b[i % cols], 0.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  static cublasHandle_t h = nullptr;
  if (h == nullptr && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 3;
  cublasSetStream(h, (cudaStream_t)stream);
  const int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  const float one = 1.0f, zero = 0.0f;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float*)in[1].data, n, (const float*)in[0].data, k,
              &zero, (float*)out[0].data, n);
  bias_relu<<<512, 256, 0, (cudaStream_t)stream>>>((float*)out[0].data, (const float*)in[2].data, (long)m * n, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
