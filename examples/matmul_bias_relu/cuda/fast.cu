// Shared-memory tiling (32x32 tiles, each thread computes 4 outputs of a
// column strip) with bias and ReLU fused into the epilogue: one kernel instead
// of cuBLAS + two elementwise kernels.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;

__global__ void __launch_bounds__(kTile * kTile / kRowsPerThread)
    matmul_bias_relu_tiled(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                           float* __restrict__ y, int m, int k, int n) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int tx = threadIdx.x;                   // column within the tile
  const int ty = threadIdx.y * kRowsPerThread;  // first of this thread's rows
  const int row0 = blockIdx.y * kTile, col = blockIdx.x * kTile + tx;
  float acc[kRowsPerThread] = {};
  for (int p0 = 0; p0 < k; p0 += kTile) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int xr = row0 + ty + r, xc = p0 + tx;
      xs[ty + r][tx] = (xr < m && xc < k) ? x[xr * k + xc] : 0.0f;
      const int wr = p0 + ty + r;
      ws[ty + r][tx] = (wr < k && col < n) ? w[wr * n + col] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int p = 0; p < kTile; ++p) {
      const float wv = ws[p][tx];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) acc[r] += xs[ty + r][p] * wv;
    }
    __syncthreads();
  }
  if (col < n) {
    const float bias = b[col];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = row0 + ty + r;
      if (row < m) y[row * n + col] = fmaxf(acc[r] + bias, 0.0f);
    }
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const int m = (int)inputs[0].shape[0], k = (int)inputs[0].shape[1], n = (int)inputs[1].shape[1];
  dim3 block(kTile, kTile / kRowsPerThread);
  dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  matmul_bias_relu_tiled<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)inputs[0].data,
                                                                  (const float*)inputs[1].data,
                                                                  (const float*)inputs[2].data,
                                                                  (float*)outputs[0].data, m, k, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
