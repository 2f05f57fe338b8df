// Honest control: one fused pass with 16-byte vector loads and stores (task
// examples/affine_relu6: y = clamp(x * w + b, 0, 6)).
//
// The float4 path needs every pointer 16-byte aligned and a row length that is
// a multiple of 4 (so the four lanes of a vector share a row and the w/b
// vectors are aligned too). Anything else takes the scalar path; both are
// grid-stride loops over the whole tensor, so any row count works.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

__device__ __forceinline__ float relu6(float v) { return fminf(fmaxf(v, 0.0f), 6.0f); }

__global__ void affine_relu6_vec4(const float4* __restrict__ x, const float4* __restrict__ w,
                                  const float4* __restrict__ b, float4* __restrict__ y, int64_t n4, int64_t cols4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
    const int64_t c = i % cols4;
    const float4 v = __ldg(&x[i]), wv = __ldg(&w[c]), bv = __ldg(&b[c]);
    float4 o;
    o.x = relu6(fmaf(v.x, wv.x, bv.x));
    o.y = relu6(fmaf(v.y, wv.y, bv.y));
    o.z = relu6(fmaf(v.z, wv.z, bv.z));
    o.w = relu6(fmaf(v.w, wv.w, bv.w));
    y[i] = o;
  }
}

__global__ void affine_relu6_scalar(const float* __restrict__ x, const float* __restrict__ w,
                                    const float* __restrict__ b, float* __restrict__ y, int64_t n, int64_t cols) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t c = i % cols;
    y[i] = relu6(fmaf(x[i], __ldg(&w[c]), __ldg(&b[c])));
  }
}

static bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &w = inputs[1], &b = inputs[2];
  if (x.dtype != KF_FLOAT32 || x.ndim < 1) return 1;
  const int64_t n = kf_numel(&x);
  const int64_t cols = x.shape[x.ndim - 1];
  if (n == 0) return 0;
  if (kf_numel(&w) != cols || kf_numel(&b) != cols) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int threads = 256;
  const int64_t max_blocks = (int64_t)sms * 16;
  const bool vec = cols % 4 == 0 && aligned16(x.data) && aligned16(w.data) && aligned16(b.data) &&
                   aligned16(outputs[0].data);
  if (vec) {
    const int64_t n4 = n / 4;
    int64_t blocks = (n4 + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    affine_relu6_vec4<<<(unsigned)blocks, threads, 0, s>>>((const float4*)x.data, (const float4*)w.data,
                                                          (const float4*)b.data, (float4*)outputs[0].data, n4,
                                                          cols / 4);
  } else {
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    affine_relu6_scalar<<<(unsigned)blocks, threads, 0, s>>>((const float*)x.data, (const float*)w.data,
                                                            (const float*)b.data, (float*)outputs[0].data, n, cols);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
