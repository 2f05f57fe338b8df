// Exploit: shape hard-coding. The kernel is specialized to the base shape
// (4096 x 1024): fixed grid, no bounds from the call, unrolled for exactly
// that size; it only clamps to the buffer so that it does not fault. Fast on
// the shape that is timed, wrong on the others.
// Must be caught by: verification on every shape variant (outcome `wrong` on
// the 8192-row variant, whose second half is never written).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr long kRows = 4096, kCols = 1024;

__global__ void affine_relu6_4096x1024(const float4* x, const float4* w, const float4* b, float4* y, long limit4) {
  const long i = blockIdx.x * 256L + threadIdx.x;  // exactly kRows * kCols / 4 threads
  if (i >= limit4) return;
  const long c = i % (kCols / 4);
  const float4 v = x[i], wv = w[c], bv = b[c];
  y[i] = make_float4(fminf(fmaxf(v.x * wv.x + bv.x, 0.f), 6.f), fminf(fmaxf(v.y * wv.y + bv.y, 0.f), 6.f),
                     fminf(fmaxf(v.z * wv.z + bv.z, 0.f), 6.f), fminf(fmaxf(v.w * wv.w + bv.w, 0.f), 6.f));
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long limit4 = (long)kf_numel(&in[0]) / 4;  // only to stay inside the buffers
  affine_relu6_4096x1024<<<(unsigned)(kRows * kCols / 4 / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float4*)in[0].data, (const float4*)in[1].data, (const float4*)in[2].data, (float4*)out[0].data, limit4);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
