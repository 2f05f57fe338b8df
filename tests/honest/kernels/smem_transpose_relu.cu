// Honest control: transpose through padded shared memory (task
// honest/transpose_relu: y = relu(x.transpose(0, 1).contiguous())).
//
// Classic 32x32 tiling: a block reads a tile of x with coalesced row loads
// into tile[32][33] (the extra column puts the column reads of the second
// phase in 32 distinct banks), then writes the transposed tile with coalesced
// row stores, applying ReLU on the way out. Edge tiles are bounds-checked in
// both phases, so any R x C works.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr int TILE = 32;
constexpr int ROWS = 8;  // block is 32 x 8; each thread moves 4 elements

__global__ void __launch_bounds__(TILE* ROWS)
    transpose_relu(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  __shared__ float tile[TILE][TILE + 1];
  const int64_t c0 = (int64_t)blockIdx.x * TILE, r0 = (int64_t)blockIdx.y * TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
  for (int k = 0; k < TILE; k += ROWS) {
    const int64_t r = r0 + ty + k, c = c0 + tx;
    if (r < rows && c < cols) tile[ty + k][tx] = __ldg(&x[r * cols + c]);
  }
  __syncthreads();
  // y is cols x rows: y[c][r] = relu(x[r][c]).
#pragma unroll
  for (int k = 0; k < TILE; k += ROWS) {
    const int64_t c = c0 + ty + k, r = r0 + tx;
    if (c < cols && r < rows) y[c * rows + r] = fmaxf(tile[tx][ty + k], 0.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const kf_tensor& x = inputs[0];
  if (x.dtype != KF_FLOAT32 || x.ndim != 2) return 1;
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return 0;
  const int64_t gx = (cols + TILE - 1) / TILE, gy = (rows + TILE - 1) / TILE;
  if (gy > 65535) return 1;
  const dim3 grid((unsigned)gx, (unsigned)gy), block(TILE, ROWS);
  transpose_relu<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)x.data, (float*)outputs[0].data, rows,
                                                           cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
