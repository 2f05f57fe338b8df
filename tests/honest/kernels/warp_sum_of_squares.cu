// Honest control: warp-per-row reduction with shuffles (task
// examples/sum_of_squares: y = (x * x).sum(dim=1)).
//
// One warp owns a row: its lanes stride through the row (float4 loads when the
// row start is 16-byte aligned, which holds for every row when the pointer is
// aligned and cols % 4 == 0; scalar loads otherwise), then __shfl_xor_sync
// folds the 32 partial sums. No shared memory and no atomics, so the result is
// deterministic. x * x is never materialized.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <bool kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    row_sum_of_squares(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps exit together
  const float* p = x + row * cols;
  float acc = 0.0f;
  if (kVec) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const int64_t n4 = cols / 4;
    int64_t j = lane;
    // Two independent vectors in flight per lane.
    float acc2 = 0.0f;
    for (; j + 32 < n4; j += 64) {
      const float4 a = __ldg(&p4[j]), b = __ldg(&p4[j + 32]);
      acc = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, acc))));
      acc2 = fmaf(b.x, b.x, fmaf(b.y, b.y, fmaf(b.z, b.z, fmaf(b.w, b.w, acc2))));
    }
    for (; j < n4; j += 32) {
      const float4 a = __ldg(&p4[j]);
      acc = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, acc))));
    }
    acc += acc2;
  } else {
    for (int64_t j = lane; j < cols; j += 32) {
      const float v = __ldg(&p[j]);
      acc = fmaf(v, v, acc);
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = acc;
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const kf_tensor& x = inputs[0];
  if (x.dtype != KF_FLOAT32 || x.ndim != 2) return 1;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0) return 0;
  const dim3 grid((unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  cudaStream_t s = (cudaStream_t)stream;
  const bool vec = cols % 4 == 0 && ((uintptr_t)x.data & 15u) == 0;
  if (vec) {
    row_sum_of_squares<true><<<grid, kWarpsPerBlock * 32, 0, s>>>((const float*)x.data, (float*)outputs[0].data,
                                                                  rows, cols);
  } else {
    row_sum_of_squares<false><<<grid, kWarpsPerBlock * 32, 0, s>>>((const float*)x.data, (float*)outputs[0].data,
                                                                   rows, cols);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
