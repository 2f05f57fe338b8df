// Honest control: a fused elementwise chain (task honest/gated_residual:
// y = silu(a) * g + r).
//
// One pass instead of eager PyTorch's three (silu, mul, add) with their two
// temporaries. The body of the tensor goes through float4 loads when all four
// pointers are 16-byte aligned; the last numel % 4 elements (the task's
// variants have odd sizes) are finished by scalar code in the same kernel, so
// nothing is read or written past the end of any tensor. Misaligned pointers
// take the all-scalar path. silu is computed as v / (1 + exp(-v)), the same
// formula ATen uses.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

__device__ __forceinline__ float gated(float a, float g, float r) { return a / (1.0f + expf(-a)) * g + r; }

template <bool kVec>
__global__ void gated_residual(const float* __restrict__ a, const float* __restrict__ g,
                               const float* __restrict__ r, float* __restrict__ y, int64_t n) {
  const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t done = 0;
  if (kVec) {
    const int64_t n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* g4 = reinterpret_cast<const float4*>(g);
    const float4* r4 = reinterpret_cast<const float4*>(r);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int64_t i = tid; i < n4; i += stride) {
      const float4 av = __ldg(&a4[i]), gv = __ldg(&g4[i]), rv = __ldg(&r4[i]);
      float4 o;
      o.x = gated(av.x, gv.x, rv.x);
      o.y = gated(av.y, gv.y, rv.y);
      o.z = gated(av.z, gv.z, rv.z);
      o.w = gated(av.w, gv.w, rv.w);
      y4[i] = o;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) y[i] = gated(__ldg(&a[i]), __ldg(&g[i]), __ldg(&r[i]));
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const int64_t n = kf_numel(&inputs[0]);
  for (int i = 0; i < 3; ++i) {
    if (inputs[i].dtype != KF_FLOAT32 || kf_numel(&inputs[i]) != n) return 1;
  }
  if (n == 0) return 0;
  const float* a = (const float*)inputs[0].data;
  const float* g = (const float*)inputs[1].data;
  const float* r = (const float*)inputs[2].data;
  float* y = (float*)outputs[0].data;
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int threads = 256;
  const uintptr_t any = (uintptr_t)a | (uintptr_t)g | (uintptr_t)r | (uintptr_t)y;
  const bool vec = (any & 15u) == 0;
  const int64_t work = vec ? (n / 4 > 0 ? n / 4 : n) : n;
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > (int64_t)sms * 16) blocks = (int64_t)sms * 16;
  cudaStream_t s = (cudaStream_t)stream;
  if (vec) {
    gated_residual<true><<<(unsigned)blocks, threads, 0, s>>>(a, g, r, y, n);
  } else {
    gated_residual<false><<<(unsigned)blocks, threads, 0, s>>>(a, g, r, y, n);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
