// Honest control: cuBLAS where the task allows it (task
// honest/linear_gelu_cublas, "libraries": ["cublas"]: y = gelu_tanh(x @ w + b)).
//
// cublasSgemm (plain FP32: the handle keeps CUBLAS_DEFAULT_MATH, no TF32)
// writes x @ w straight into y, then one fused pass adds the bias and applies
// GELU in place: two kernels instead of eager PyTorch's three, and one fewer
// round trip of the output through memory.
//
// The cuBLAS handle: creating one allocates device memory and synchronizes,
// so doing it on every call would put a device-wide sync inside each timed
// call. It is created lazily on the first call (a function-local static: no
// load-time constructor, nothing runs before kf_forward is called) and kept
// for the life of the process. It holds no results, only cuBLAS's own state;
// every call rebinds it to the given stream with cublasSetStream, so all work
// (the GEMM included) is ordered on that stream. Row-major y = x @ w is
// computed as the column-major product y^T = w^T x^T.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

__device__ __forceinline__ float gelu_tanh(float v) {
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void bias_gelu_inplace(float* __restrict__ y, const float* __restrict__ b, int64_t n, int64_t cols) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = gelu_tanh(y[i] + __ldg(&b[i % cols]));
  }
}

__global__ void bias_gelu_inplace_vec4(float4* __restrict__ y, const float4* __restrict__ b, int64_t n4,
                                       int64_t cols4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = y[i];
    const float4 bv = __ldg(&b[i % cols4]);
    v.x = gelu_tanh(v.x + bv.x);
    v.y = gelu_tanh(v.y + bv.y);
    v.z = gelu_tanh(v.z + bv.z);
    v.w = gelu_tanh(v.w + bv.w);
    y[i] = v;
  }
}

static cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    if (cublasCreate(&created) != CUBLAS_STATUS_SUCCESS) return (cublasHandle_t) nullptr;
    return created;
  }();
  return h;
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &w = inputs[1], &b = inputs[2];
  if (x.dtype != KF_FLOAT32 || w.dtype != KF_FLOAT32 || b.dtype != KF_FLOAT32 || x.ndim != 2 || w.ndim != 2 ||
      x.shape[1] != w.shape[0] || kf_numel(&b) != w.shape[1]) {
    return 1;
  }
  const int m = (int)x.shape[0], k = (int)x.shape[1], n = (int)w.shape[1];
  if (m == 0 || n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  cublasHandle_t h = handle();
  if (h == nullptr) return 3;
  if (cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS) return 3;
  const float one = 1.0f, zero = 0.0f;
  float* y = (float*)outputs[0].data;
  // Column-major view: y^T (n x m) = w^T (n x k) * x^T (k x m).
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float*)w.data, n, (const float*)x.data, k,
                  &zero, y, n) != CUBLAS_STATUS_SUCCESS) {
    return 4;
  }
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int threads = 256;
  const int64_t total = (int64_t)m * n, max_blocks = (int64_t)sms * 16;
  if (n % 4 == 0 && ((uintptr_t)y & 15u) == 0 && ((uintptr_t)b.data & 15u) == 0) {
    int64_t blocks = (total / 4 + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    bias_gelu_inplace_vec4<<<(unsigned)blocks, threads, 0, s>>>((float4*)y, (const float4*)b.data, total / 4, n / 4);
  } else {
    int64_t blocks = (total + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    bias_gelu_inplace<<<(unsigned)blocks, threads, 0, s>>>(y, (const float*)b.data, total, n);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
