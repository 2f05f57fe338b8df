// Honest control: online softmax with a fused bias (task honest/bias_softmax:
// y = softmax(x + b, dim=-1)).
//
// One block per row. Each thread keeps a running (max, sum) pair, rescaling
// the sum whenever the max grows (Milakov & Gimelshein's online normalizer),
// so the statistics need a single read of the row. Pairs are merged across
// the warp with shuffles and across warps through shared memory. Rows of up
// to kThreads * kCache elements stay in registers for the output pass; longer
// rows are read a second time. x + b is never materialized.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <math.h>

constexpr int kThreads = 512;
constexpr int kCache = 8;

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  // An empty side (m == -inf, s == 0) must not produce exp(-inf - -inf) = NaN.
  if (a.m == -INFINITY) return b;
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum push(MaxSum a, float v) {
  if (v > a.m) return {v, a.s * expf(a.m - v) + 1.0f};  // expf(-inf) = 0 for the first element
  return {a.m, a.s + expf(v - a.m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum a) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, a.m, off), __shfl_xor_sync(0xffffffffu, a.s, off)};
    a = merge(a, o);
  }
  return a;
}

// The row's (max, sum) from every thread's pair; valid in every thread.
__device__ __forceinline__ MaxSum block_merge(MaxSum acc) {
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  acc = warp_merge(acc);
  if (lane == 0) {
    sm[warp] = acc.m;
    ss[warp] = acc.s;
  }
  __syncthreads();
  MaxSum total{-INFINITY, 0.0f};
  if (lane < kThreads / 32) total = MaxSum{sm[lane], ss[lane]};
  return warp_merge(total);  // every warp ends with the row's pair
}

// Rows of up to kThreads * kCache elements: x + b stays in registers.
__global__ void __launch_bounds__(kThreads)
    bias_softmax_cached(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, int cols) {
  const float* in = x + (int64_t)blockIdx.x * cols;
  float* out = y + (int64_t)blockIdx.x * cols;
  MaxSum acc{-INFINITY, 0.0f};
  float cache[kCache];
#pragma unroll
  for (int k = 0; k < kCache; ++k) {
    const int j = threadIdx.x + k * kThreads;
    cache[k] = 0.0f;
    if (j < cols) {
      cache[k] = __ldg(&in[j]) + __ldg(&b[j]);
      acc = push(acc, cache[k]);
    }
  }
  const MaxSum total = block_merge(acc);
  const float m = total.m, inv = 1.0f / total.s;
#pragma unroll
  for (int k = 0; k < kCache; ++k) {
    const int j = threadIdx.x + k * kThreads;
    if (j < cols) out[j] = expf(cache[k] - m) * inv;
  }
}

// Longer rows: the statistics in one pass, the output in a second.
__global__ void __launch_bounds__(kThreads)
    bias_softmax_streamed(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, int cols) {
  const float* in = x + (int64_t)blockIdx.x * cols;
  float* out = y + (int64_t)blockIdx.x * cols;
  MaxSum acc{-INFINITY, 0.0f};
  for (int j = threadIdx.x; j < cols; j += kThreads) acc = push(acc, __ldg(&in[j]) + __ldg(&b[j]));
  const MaxSum total = block_merge(acc);
  const float m = total.m, inv = 1.0f / total.s;
  for (int j = threadIdx.x; j < cols; j += kThreads) out[j] = expf(__ldg(&in[j]) + __ldg(&b[j]) - m) * inv;
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 2 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &b = inputs[1];
  if (x.dtype != KF_FLOAT32 || b.dtype != KF_FLOAT32 || x.ndim < 1) return 1;
  const int64_t n = kf_numel(&x), cols64 = x.shape[x.ndim - 1];
  if (n == 0) return 0;
  if (kf_numel(&b) != cols64 || cols64 > (int64_t)1 << 30) return 1;
  const int cols = (int)cols64;
  const int64_t rows = n / cols;
  if (rows > 2147483647LL) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  if (cols <= kThreads * kCache) {
    bias_softmax_cached<<<(unsigned)rows, kThreads, 0, s>>>((const float*)x.data, (const float*)b.data,
                                                            (float*)outputs[0].data, cols);
  } else {
    bias_softmax_streamed<<<(unsigned)rows, kThreads, 0, s>>>((const float*)x.data, (const float*)b.data,
                                                              (float*)outputs[0].data, cols);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
