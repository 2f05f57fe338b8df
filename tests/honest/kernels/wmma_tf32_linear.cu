// Honest control: Tensor Core MMA through WMMA with TF32 inputs converted
// in-kernel (task honest/linear_tf32: y = x @ w + b, tolerance 3e-3 chosen
// for TF32 operands; see the task's description).
//
// 128x128 block tiles, K walked in slices of 16, 8 warps each owning a 32x64
// sub-tile (2x4 fragments of m16n16k8, float accumulators). Tiles are staged
// through padded shared memory with a register prefetch of the next slice,
// and rounded to TF32 (round-to-nearest, cvt.rna) as they are stored, so the
// Tensor Cores see exactly the rounded operands. Out-of-range rows/columns
// and the K tail are zero-filled, so any M, N, K work; the epilogue goes
// through a per-warp staging tile to add the bias with bounds checks.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <mma.h>
#include <stdint.h>

using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 16;
constexpr int kWarpsM = 4, kWarpsN = 2;     // 8 warps
constexpr int WM = BM / kWarpsM;            // 32 rows per warp
constexpr int WN = BN / kWarpsN;            // 64 columns per warp
constexpr int FM = WM / 16, FN = WN / 16;   // 2 x 4 fragments
constexpr int kThreads = kWarpsM * kWarpsN * 32;
constexpr int LDA = BK + 4;   // padded leading dims: multiples of 4 floats (WMMA),
constexpr int LDB = BN + 4;   // fragment pointers stay 32-byte aligned
constexpr int LDS = 16 + 4;   // per-warp epilogue staging
constexpr int kALoads = BM * BK / kThreads;  // 8 values of x per thread per slice
constexpr int kBLoads = BK * BN / kThreads;  // 8 values of w per thread per slice

__device__ __forceinline__ float to_tf32(float v) { return wmma::__float_to_tf32(v); }

template <bool kVec>
__device__ __forceinline__ void load_slice(const float* __restrict__ x, const float* __restrict__ w, int m, int n,
                                           int k, int row0, int col0, int k0, float (&ra)[kALoads],
                                           float (&rb)[kBLoads]) {
  const int tid = threadIdx.x;
  if (kVec) {
    // x slice: BM x BK = 512 float4, two per thread; w slice: BK x BN, two per thread.
#pragma unroll
    for (int i = 0; i < kALoads / 4; ++i) {
      const int v = tid + i * kThreads;
      const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
      const int gr = row0 + r, gc = k0 + c;  // k % 4 == 0: a vector is all in or all out
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gr < m && gc < k) a = __ldg(reinterpret_cast<const float4*>(x + (size_t)gr * k + gc));
      ra[i * 4 + 0] = a.x;
      ra[i * 4 + 1] = a.y;
      ra[i * 4 + 2] = a.z;
      ra[i * 4 + 3] = a.w;
    }
#pragma unroll
    for (int i = 0; i < kBLoads / 4; ++i) {
      const int v = tid + i * kThreads;
      const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
      const int gr = k0 + r, gc = col0 + c;  // n % 4 == 0
      float4 b = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gr < k && gc < n) b = __ldg(reinterpret_cast<const float4*>(w + (size_t)gr * n + gc));
      rb[i * 4 + 0] = b.x;
      rb[i * 4 + 1] = b.y;
      rb[i * 4 + 2] = b.z;
      rb[i * 4 + 3] = b.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int v = tid + i * kThreads;
      const int r = v / BK, c = v % BK;
      const int gr = row0 + r, gc = k0 + c;
      ra[i] = (gr < m && gc < k) ? __ldg(&x[(size_t)gr * k + gc]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int v = tid + i * kThreads;
      const int r = v / BN, c = v % BN;
      const int gr = k0 + r, gc = col0 + c;
      rb[i] = (gr < k && gc < n) ? __ldg(&w[(size_t)gr * n + gc]) : 0.0f;
    }
  }
}

template <bool kVec>
__device__ __forceinline__ void store_slice(float* as, float* bs, const float (&ra)[kALoads],
                                            const float (&rb)[kBLoads]) {
  const int tid = threadIdx.x;
  if (kVec) {
#pragma unroll
    for (int i = 0; i < kALoads / 4; ++i) {
      const int v = tid + i * kThreads;
      const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
#pragma unroll
      for (int e = 0; e < 4; ++e) as[r * LDA + c + e] = to_tf32(ra[i * 4 + e]);
    }
#pragma unroll
    for (int i = 0; i < kBLoads / 4; ++i) {
      const int v = tid + i * kThreads;
      const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
#pragma unroll
      for (int e = 0; e < 4; ++e) bs[r * LDB + c + e] = to_tf32(rb[i * 4 + e]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int v = tid + i * kThreads;
      as[(v / BK) * LDA + v % BK] = to_tf32(ra[i]);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int v = tid + i * kThreads;
      bs[(v / BN) * LDB + v % BN] = to_tf32(rb[i]);
    }
  }
}

template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    linear_tf32_wmma(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                     float* __restrict__ y, int m, int n, int k) {
  __shared__ __align__(128) float as[BM * LDA];
  __shared__ __align__(128) float bs[BK * LDB];
  __shared__ __align__(128) float stage[kWarpsM * kWarpsN][16 * LDS];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  float ra[kALoads], rb[kBLoads];
  load_slice<kVec>(x, w, m, n, k, row0, col0, 0, ra, rb);
  store_slice<kVec>(as, bs, ra, rb);
  __syncthreads();

  for (int k0 = 0; k0 < k; k0 += BK) {
    const bool more = k0 + BK < k;
    if (more) load_slice<kVec>(x, w, m, n, k, row0, col0, k0 + BK, ra, rb);  // in flight during the MMAs
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(fa[i], as + (wm * WM + i * 16) * LDA + kk, LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], bs + kk * LDB + wn * WN + j * 16, LDB);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
    if (more) {
      store_slice<kVec>(as, bs, ra, rb);
      __syncthreads();
    }
  }

  // Epilogue: one 16x16 fragment at a time through this warp's staging tile.
  float* st = stage[warp];
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(st, acc[i][j], LDS, wmma::mem_row_major);
      __syncwarp();
      const int r0 = row0 + wm * WM + i * 16, c0 = col0 + wn * WN + j * 16;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int idx = lane + e * 32;  // 256 values, coalesced along rows of 16
        const int r = idx / 16, c = idx % 16;
        const int gr = r0 + r, gc = c0 + c;
        if (gr < m && gc < n) y[(size_t)gr * n + gc] = st[r * LDS + c] + __ldg(&bias[gc]);
      }
      __syncwarp();
    }
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const kf_tensor &x = inputs[0], &w = inputs[1], &b = inputs[2];
  if (x.dtype != KF_FLOAT32 || w.dtype != KF_FLOAT32 || b.dtype != KF_FLOAT32 || x.ndim != 2 || w.ndim != 2 ||
      x.shape[1] != w.shape[0] || kf_numel(&b) != w.shape[1]) {
    return 1;
  }
  const int m = (int)x.shape[0], k = (int)x.shape[1], n = (int)w.shape[1];
  if (m == 0 || n == 0) return 0;
  const dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
  cudaStream_t s = (cudaStream_t)stream;
  const bool vec = k % 4 == 0 && n % 4 == 0 && ((uintptr_t)x.data & 15u) == 0 && ((uintptr_t)w.data & 15u) == 0;
  if (vec) {
    linear_tf32_wmma<true><<<grid, kThreads, 0, s>>>((const float*)x.data, (const float*)w.data,
                                                     (const float*)b.data, (float*)outputs[0].data, m, n, k);
  } else {
    linear_tf32_wmma<false><<<grid, kThreads, 0, s>>>((const float*)x.data, (const float*)w.data,
                                                      (const float*)b.data, (float*)outputs[0].data, m, n, k);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
