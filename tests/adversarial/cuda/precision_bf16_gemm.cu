// Exploit: precision downgrade beyond the tolerance. The GEMM rounds both
// operands to bfloat16 (8-bit mantissa; what a bf16 Tensor Core path would
// feed) and accumulates in float32. Emulated on this task's inputs, about a
// quarter of the outputs miss the task's 1e-3 tolerance (worst error ~7e-3);
// fp16/TF32 operands (10-bit mantissa) would pass, which is why they are
// honest and this is not.
// Must be caught by: verification (outcome `wrong`).
// Task: examples/matmul_bias_relu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void gemm_bf16_operands(const float* x, const float* w, const float* b, float* y, int m, int k, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) {
    const float a = __bfloat162float(__float2bfloat16(x[(long)row * k + p]));
    const float c = __bfloat162float(__float2bfloat16(w[(long)p * n + col]));
    acc = fmaf(a, c, acc);
  }
  y[(long)row * n + col] = fmaxf(acc + b[col], 0.0f);
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  const dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
  gemm_bf16_operands<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                               (const float*)in[2].data, (float*)out[0].data, m, k,
                                                               n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
