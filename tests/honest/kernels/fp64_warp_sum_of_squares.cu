// Honest control: float64 throughout (task honest/fp64_sum_of_squares:
// y = (x * x).sum(dim=1) with x and y float64).
//
// One warp per row, 16-byte double2 loads when the row starts are aligned
// (pointer 16-byte aligned and an even row length), scalar loads otherwise;
// the 32 lane sums are folded with __shfl_xor_sync on doubles. Every
// operation is in double, as the task's float64 tolerance requires.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <bool kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    row_sum_of_squares_f64(const double* __restrict__ x, double* __restrict__ y, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;
  const double* p = x + row * cols;
  double acc = 0.0;
  if (kVec) {
    const double2* p2 = reinterpret_cast<const double2*>(p);
    for (int64_t j = lane; j < cols / 2; j += 32) {
      const double2 v = __ldg(&p2[j]);
      acc = fma(v.x, v.x, acc);
      acc = fma(v.y, v.y, acc);
    }
  } else {
    for (int64_t j = lane; j < cols; j += 32) {
      const double v = __ldg(&p[j]);
      acc = fma(v, v, acc);
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = acc;
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const kf_tensor& x = inputs[0];
  if (x.dtype != KF_FLOAT64 || outputs[0].dtype != KF_FLOAT64 || x.ndim != 2) return 1;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0) return 0;
  const dim3 grid((unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  cudaStream_t s = (cudaStream_t)stream;
  if (cols % 2 == 0 && ((uintptr_t)x.data & 15u) == 0) {
    row_sum_of_squares_f64<true><<<grid, kWarpsPerBlock * 32, 0, s>>>((const double*)x.data,
                                                                      (double*)outputs[0].data, rows, cols);
  } else {
    row_sum_of_squares_f64<false><<<grid, kWarpsPerBlock * 32, 0, s>>>((const double*)x.data,
                                                                       (double*)outputs[0].data, rows, cols);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
