// One block per row: coalesced (16-byte where aligned) loads, warp-shuffle
// reduction, one shared-memory step across warps. No temporary tensor.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) row_sum_sq(const float* __restrict__ x, float* __restrict__ y,
                                                        int64_t cols) {
  const float* xr = x + blockIdx.x * cols;
  float acc = 0.0f;
  if ((cols & 3) == 0) {
    const float4* xr4 = reinterpret_cast<const float4*>(xr);
    for (int64_t j = threadIdx.x; j < cols / 4; j += kThreads) {
      const float4 v = __ldg(&xr4[j]);
      acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) acc += xr[j] * xr[j];
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x == 0) y[blockIdx.x] = v;
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  row_sum_sq<<<(unsigned)rows, kThreads, 0, (cudaStream_t)stream>>>((const float*)inputs[0].data,
                                                                   (float*)outputs[0].data, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
