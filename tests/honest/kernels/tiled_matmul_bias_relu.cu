// Honest control: shared-memory tiled SGEMM with register blocking and a fused
// bias + ReLU epilogue (task examples/matmul_bias_relu: y = relu(x @ w + b)).
//
// Each block computes a BM x BN tile of y; the K dimension is walked in BK
// slices staged through shared memory (A stored k-major so the inner loop
// reads broadcast-friendly rows); each thread keeps a TM x TN accumulator
// tile in registers. Every global access is bounds-checked, so M, N and K need
// not be multiples of the tile sizes. Small problems use a 32x32 tile so that
// enough blocks exist to fill the GPU.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    sgemm_bias_relu(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                    float* __restrict__ y, int m, int n, int k) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  __shared__ float as[BK][BM + 1];  // as[kk][row]: x tile, transposed
  __shared__ float bs[BK][BN];      // bs[kk][col]: w tile
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < k; k0 += BK) {
    // x tile: BM rows x BK columns, consecutive threads read consecutive k.
    for (int idx = tid; idx < BM * BK; idx += kThreads) {
      const int r = idx / BK, c = idx % BK;
      const int gr = row0 + r, gc = k0 + c;
      as[c][r] = (gr < m && gc < k) ? x[(size_t)gr * k + gc] : 0.0f;
    }
    // w tile: BK rows x BN columns, consecutive threads read consecutive n.
    for (int idx = tid; idx < BK * BN; idx += kThreads) {
      const int r = idx / BN, c = idx % BN;
      const int gr = k0 + r, gc = col0 + c;
      bs[r][c] = (gr < k && gc < n) ? w[(size_t)gr * n + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = as[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = bs[kk][tx + j * (BN / TN)];  // strided: coalesced stores later
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty * TM + i;
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tx + j * (BN / TN);
      if (c < n) y[(size_t)r * n + c] = fmaxf(acc[i][j] + __ldg(&b[c]), 0.0f);
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN>
cudaError_t launch(const float* x, const float* w, const float* b, float* y, int m, int n, int k, cudaStream_t s) {
  dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
  sgemm_bias_relu<BM, BN, BK, TM, TN><<<grid, (BM / TM) * (BN / TN), 0, s>>>(x, w, b, y, m, n, k);
  return cudaGetLastError();
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &w = inputs[1], &b = inputs[2];
  if (x.dtype != KF_FLOAT32 || w.dtype != KF_FLOAT32 || b.dtype != KF_FLOAT32 || x.ndim != 2 || w.ndim != 2 ||
      x.shape[1] != w.shape[0]) {
    return 1;
  }
  const int m = (int)x.shape[0], k = (int)x.shape[1], n = (int)w.shape[1];
  if (m == 0 || n == 0) return 0;
  const float* xp = (const float*)x.data;
  const float* wp = (const float*)w.data;
  const float* bp = (const float*)b.data;
  float* yp = (float*)outputs[0].data;
  cudaStream_t s = (cudaStream_t)stream;
  // Fewer than ~2 waves of 64x64 tiles: use 32x32 tiles to spread the work.
  const long tiles64 = (long)((m + 63) / 64) * ((n + 63) / 64);
  const cudaError_t e = tiles64 >= 264 ? launch<64, 64, 16, 4, 4>(xp, wp, bp, yp, m, n, k, s)
                                       : launch<32, 32, 32, 2, 2>(xp, wp, bp, yp, m, n, k, s);
  return e == cudaSuccess ? 0 : 2;
}
