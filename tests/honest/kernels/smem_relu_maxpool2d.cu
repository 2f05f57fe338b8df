// Honest control: pooling through shared memory (task honest/relu_maxpool2d:
// y = max_pool2d(relu(x), kernel_size=3, stride=2, padding=1) on (N, C, H, W)).
//
// A block produces a 16x16 tile of one (n, c) output plane. It first stages
// the 33x33 input window that tile needs (ReLU applied on the way in, cells
// outside the image set to -inf like max_pool2d's implicit padding) in shared
// memory with coalesced row loads, then each thread takes the max of its 3x3
// window from shared memory: every input element is read from DRAM about
// once instead of up to 9 times, and relu(x) is never materialized. The
// kernel size, stride and padding are the task's attrs (constants of the
// task); the spatial sizes come from the call, so every shape works.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <math.h>

constexpr int K = 3, S = 2, P = 1;
constexpr int TILE = 16;
constexpr int IN_TILE = (TILE - 1) * S + K;  // 33

__global__ void __launch_bounds__(TILE* TILE)
    relu_maxpool2d(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int h, int w, int oh,
                   int ow) {
  __shared__ float tile[IN_TILE][IN_TILE + 1];
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  const int ox0 = blockIdx.x * TILE, oy0 = blockIdx.y * TILE;
  const int ix0 = ox0 * S - P, iy0 = oy0 * S - P;
  for (int64_t plane = blockIdx.z; plane < planes; plane += gridDim.z) {
    const float* in = x + plane * h * w;
    for (int idx = threadIdx.x; idx < IN_TILE * IN_TILE; idx += TILE * TILE) {
      const int r = idx / IN_TILE, c = idx % IN_TILE;
      const int iy = iy0 + r, ix = ix0 + c;
      float v = -INFINITY;
      if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = fmaxf(__ldg(&in[(int64_t)iy * w + ix]), 0.0f);
      tile[r][c] = v;
    }
    __syncthreads();
    const int oy = oy0 + ty, ox = ox0 + tx;
    if (oy < oh && ox < ow) {
      float m = -INFINITY;
#pragma unroll
      for (int dy = 0; dy < K; ++dy)
#pragma unroll
        for (int dx = 0; dx < K; ++dx) m = fmaxf(m, tile[ty * S + dy][tx * S + dx]);
      y[plane * oh * ow + (int64_t)oy * ow + ox] = m;
    }
    __syncthreads();  // the tile is refilled for the next plane
  }
}

// torch's output size for floor mode.
static int pooled(int size) { return (size + 2 * P - K) / S + 1; }

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const kf_tensor& x = inputs[0];
  if (x.dtype != KF_FLOAT32 || (x.ndim != 4 && x.ndim != 3)) return 1;
  const int h = (int)x.shape[x.ndim - 2], w = (int)x.shape[x.ndim - 1];
  int64_t planes = 1;
  for (int i = 0; i < x.ndim - 2; ++i) planes *= x.shape[i];
  if (planes == 0 || h + 2 * P < K || w + 2 * P < K) return planes == 0 ? 0 : 1;
  const int oh = pooled(h), ow = pooled(w);
  const int64_t max_z = 65535;
  const dim3 grid((ow + TILE - 1) / TILE, (oh + TILE - 1) / TILE, (unsigned)(planes < max_z ? planes : max_z));
  relu_maxpool2d<<<grid, TILE * TILE, 0, (cudaStream_t)stream>>>((const float*)x.data, (float*)outputs[0].data,
                                                                 planes, h, w, oh, ow);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
