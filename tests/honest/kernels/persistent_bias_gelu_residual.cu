// Honest control: a persistent kernel (task examples/bias_gelu_residual:
// y = gelu_tanh(x + b) + x).
//
// The grid is fixed at (#SMs x resident blocks per SM), both asked from the
// runtime on the current device, and every block walks tiles of 1024
// consecutive elements with a grid stride: no tail wave, one launch whatever
// the size. Each thread handles one float4 of a tile when the row length is a
// multiple of 4 and the pointers are 16-byte aligned, four scalars otherwise.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

constexpr int kThreads = 256;
constexpr int kTile = kThreads * 4;

__device__ __forceinline__ float gelu_tanh(float v) {
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__device__ __forceinline__ float op(float x, float b) { return gelu_tanh(x + b) + x; }

template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    bias_gelu_residual_persistent(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y,
                                  int64_t n, int64_t cols, int64_t tiles) {
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t base = t * kTile;
    if (kVec) {
      const int64_t i = base + threadIdx.x * 4;  // n % 4 == 0 in this path
      if (i < n) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(x + i));
        const float4 bv = __ldg(reinterpret_cast<const float4*>(b + i % cols));
        float4 o;
        o.x = op(v.x, bv.x);
        o.y = op(v.y, bv.y);
        o.z = op(v.z, bv.z);
        o.w = op(v.w, bv.w);
        *reinterpret_cast<float4*>(y + i) = o;
      }
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t i = base + k * kThreads + threadIdx.x;
        if (i < n) y[i] = op(__ldg(&x[i]), __ldg(&b[i % cols]));
      }
    }
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 2 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &b = inputs[1];
  if (x.dtype != KF_FLOAT32 || b.dtype != KF_FLOAT32 || x.ndim < 1) return 1;
  const int64_t n = kf_numel(&x), cols = x.shape[x.ndim - 1];
  if (n == 0) return 0;
  if (kf_numel(&b) != cols) return 1;
  const int64_t tiles = (n + kTile - 1) / kTile;

  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 2;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) return 2;
  const bool vec = cols % 4 == 0 && ((uintptr_t)x.data & 15u) == 0 && ((uintptr_t)b.data & 15u) == 0 &&
                   ((uintptr_t)outputs[0].data & 15u) == 0;
  const void* fn = vec ? (const void*)bias_gelu_residual_persistent<true>
                       : (const void*)bias_gelu_residual_persistent<false>;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, 0) != cudaSuccess || per_sm <= 0) {
    per_sm = 1;
  }
  int64_t grid = (int64_t)sms * per_sm;
  if (grid > tiles) grid = tiles;
  cudaStream_t s = (cudaStream_t)stream;
  if (vec) {
    bias_gelu_residual_persistent<true><<<(unsigned)grid, kThreads, 0, s>>>(
        (const float*)x.data, (const float*)b.data, (float*)outputs[0].data, n, cols, tiles);
  } else {
    bias_gelu_residual_persistent<false><<<(unsigned)grid, kThreads, 0, s>>>(
        (const float*)x.data, (const float*)b.data, (float*)outputs[0].data, n, cols, tiles);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
