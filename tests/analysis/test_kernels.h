// CUDA sources the analysis tests compile with nvcc. Each kernel exists to
// produce one property the tools must find.
#pragma once

namespace kforge::testing {

// 4096 B of static shared memory and one barrier.
inline constexpr const char* kSmemKernel = R"(
__global__ void smem_kernel(float* out, const float* in, int n) {
  __shared__ float tile[1024];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.f;
  __syncthreads();
  if (i < n) out[i] = tile[(threadIdx.x + 1) % blockDim.x];
}
)";

// A run-time indexed local array: a stack frame without spills normally,
// register spills under -maxrregcount=16 (ptxas raises it to its minimum, 24).
inline constexpr const char* kStackKernel = R"(
__global__ void stack_kernel(float* out, const float* in, int n, int k) {
  float acc[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) acc[j] = in[(threadIdx.x + j * 97) % n];
  for (int r = 0; r < k; ++r) {
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + r) & 63] + 1.f;
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 64; ++j) s += acc[j];
  out[threadIdx.x] = s;
}
)";

// Scalar 32-bit loads and stores, and an IEEE division (FCHK).
inline constexpr const char* kScalarKernel = R"(
__global__ void scale_kernel(float* out, const float* in, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] / s;
}
)";

// 128-bit loads and stores.
inline constexpr const char* kVec4Kernel = R"(
__global__ void vec4_add_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                float4* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}
)";

// Tensor cores through WMMA: HMMA in SASS.
inline constexpr const char* kWmmaKernel = R"(
#include <mma.h>
using namespace nvcuda;
__global__ void wmma_kernel(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
)";

// Hopper-only instructions (sm_90a): a TMA tile load completing on an
// mbarrier, then wgmma: UTMALDG, SYNCS and HGMMA in SASS. Compiled, never run.
inline constexpr const char* kHopperKernel = R"(
#include <cuda.h>
#include <cstdint>
__global__ void hopper_kernel(const __grid_constant__ CUtensorMap tmap, float* out, uint64_t da, uint64_t db, int k) {
  __shared__ alignas(128) unsigned short tile[64 * 64];
  __shared__ alignas(8) uint64_t bar;
  uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  uint32_t tile_addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
    asm volatile("fence.proxy.async.shared::cta;");
  }
  __syncthreads();
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  for (int i = 0; i < k; ++i) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 8192;" :: "r"(bar_addr));
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                   :: "r"(tile_addr), "l"(&tmap), "r"(0), "r"(i * 64), "r"(bar_addr) : "memory");
    }
    asm volatile("{\n.reg .pred P1;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n@!P1 bra WAIT;\n}\n" :: "r"(bar_addr), "r"(i & 1));
    asm volatile("wgmma.fence.sync.aligned;");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da + i), "l"(db + i), "r"(i));
    asm volatile("wgmma.commit_group.sync.aligned;");
    asm volatile("wgmma.wait_group.sync.aligned 0;");
  }
  out[threadIdx.x * 4 + 0] = d0; out[threadIdx.x * 4 + 1] = d1;
  out[threadIdx.x * 4 + 2] = d2; out[threadIdx.x * 4 + 3] = d3;
}
)";

}  // namespace kforge::testing
