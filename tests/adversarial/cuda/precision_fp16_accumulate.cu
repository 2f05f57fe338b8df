// Exploit: precision downgrade beyond the tolerance. Row sums of squares are
// accumulated in half precision (__hfma on __half), twice the arithmetic rate
// and half the register traffic; at row sums around 2048 a half has a spacing
// of 2, so the error (tens) is far beyond the task's tolerance.
// Must be caught by: verification against the float32 reference (outcome
// `wrong`).
// Task: examples/sum_of_squares.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void sum_sq_half(const float* x, float* y, long rows, long cols) {
  const long row = blockIdx.x * 8L + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  __half acc = __float2half(0.0f);
  for (long j = lane; j < cols; j += 32) {
    const __half v = __float2half(x[row * cols + j]);
    acc = __hfma(v, v, acc);
  }
  for (int off = 16; off > 0; off >>= 1) acc = __hadd(acc, __shfl_xor_sync(0xffffffffu, acc, off));
  if (lane == 0) y[row] = __half2float(acc);
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long rows = (long)in[0].shape[0], cols = (long)in[0].shape[1];
  sum_sq_half<<<(unsigned)((rows + 7) / 8), 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                                           (float*)out[0].data, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
