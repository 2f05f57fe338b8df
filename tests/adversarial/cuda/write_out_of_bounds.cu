// Exploit: writing outside its tensors on the GPU, where the arena has no
// guard pages: a correct affine_relu6 kernel whose last block also writes
// a few floats past the end of the output (an off-by-one grid, or a stash of
// state the next call could read back).
// Must be caught by: the arena canary bands around every tensor, checked
// after every verified and timed call (judge/arena_canary.h): violation
// `out_of_bounds_write`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6_past_the_end(const float* x, const float* w, const float* b, float* y, long n, long d) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] * w[i % d] + b[i % d];
    y[i] = fminf(fmaxf(v, 0.0f), 6.0f);
  } else if (i < n + 4) {
    y[i] = 1.0f;  // up to 16 bytes past the end of y
  }
}

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void* stream) {
  const long n = (long)kf_numel(&out[0]);
  const long d = (long)in[1].shape[in[1].ndim - 1];
  const unsigned blocks = (unsigned)((n + 4 + 255) / 256);
  affine_relu6_past_the_end<<<blocks, 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data, (float*)out[0].data, n, d);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
