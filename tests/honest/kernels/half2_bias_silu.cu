// Honest control: mixed precision, float16 storage with float32 math (task
// honest/half_bias_silu: y = silu(x + b), all tensors float16).
//
// Loads and stores move eight halves at a time (16 bytes) when the row length
// is a multiple of 8 and the pointers are 16-byte aligned, two (__half2) when
// it is even and they are 4-byte aligned, and scalar __half otherwise.
// The arithmetic is float32, and the intermediate x + b is rounded to half
// before the SiLU exactly as eager PyTorch's float16 add does, so the result
// matches the reference to the last bit in almost every element rather than
// merely within the float16 tolerance.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdint.h>

__device__ __forceinline__ float bias_silu(__half xv, __half bv) {
  const float t = __half2float(__float2half_rn(__half2float(xv) + __half2float(bv)));
  return t / (1.0f + expf(-t));
}

__global__ void bias_silu_vec8(const uint4* __restrict__ x, const uint4* __restrict__ b, uint4* __restrict__ y,
                               int64_t n8, int64_t cols8) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n8; i += stride) {
    const uint4 xr = __ldg(&x[i]), br = __ldg(&b[i % cols8]);
    const __half2* xv = reinterpret_cast<const __half2*>(&xr);
    const __half2* bv = reinterpret_cast<const __half2*>(&br);
    uint4 out;
    __half2* ov = reinterpret_cast<__half2*>(&out);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      ov[k] = __floats2half2_rn(bias_silu(__low2half(xv[k]), __low2half(bv[k])),
                                bias_silu(__high2half(xv[k]), __high2half(bv[k])));
    }
    y[i] = out;
  }
}

__global__ void bias_silu_half2(const __half2* __restrict__ x, const __half2* __restrict__ b,
                                __half2* __restrict__ y, int64_t n2, int64_t cols2) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n2; i += stride) {
    const __half2 xv = x[i], bv = b[i % cols2];
    y[i] = __floats2half2_rn(bias_silu(__low2half(xv), __low2half(bv)), bias_silu(__high2half(xv), __high2half(bv)));
  }
}

__global__ void bias_silu_half(const __half* __restrict__ x, const __half* __restrict__ b, __half* __restrict__ y,
                               int64_t n, int64_t cols) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = __float2half_rn(bias_silu(x[i], b[i % cols]));
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 2 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &b = inputs[1];
  if (x.dtype != KF_FLOAT16 || b.dtype != KF_FLOAT16 || outputs[0].dtype != KF_FLOAT16 || x.ndim < 1) return 1;
  const int64_t n = kf_numel(&x), cols = x.shape[x.ndim - 1];
  if (n == 0) return 0;
  if (kf_numel(&b) != cols) return 1;
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int threads = 256;
  const int64_t max_blocks = (int64_t)sms * 16;
  cudaStream_t s = (cudaStream_t)stream;
  const uintptr_t any = (uintptr_t)x.data | (uintptr_t)b.data | (uintptr_t)outputs[0].data;
  if (cols % 8 == 0 && (any & 15u) == 0) {
    int64_t blocks = (n / 8 + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    bias_silu_vec8<<<(unsigned)blocks, threads, 0, s>>>((const uint4*)x.data, (const uint4*)b.data,
                                                       (uint4*)outputs[0].data, n / 8, cols / 8);
  } else if (cols % 2 == 0 && (any & 3u) == 0) {
    int64_t blocks = (n / 2 + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    bias_silu_half2<<<(unsigned)blocks, threads, 0, s>>>((const __half2*)x.data, (const __half2*)b.data,
                                                        (__half2*)outputs[0].data, n / 2, cols / 2);
  } else {
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > max_blocks) blocks = max_blocks;
    bias_silu_half<<<(unsigned)blocks, threads, 0, s>>>((const __half*)x.data, (const __half*)b.data,
                                                       (__half*)outputs[0].data, n, cols);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
