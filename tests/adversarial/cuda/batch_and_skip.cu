// Exploit: batch-and-skip across calls. When a call looks like a repeat of
// the previous one (same pointers, same first and last input values, read
// back with a small synchronous copy) it launches nothing, trusting that the
// output buffer still holds the previous call's result, as it would in a
// harness that times N back-to-back calls on one input. Allowed symbols only
// (cudaMemcpyAsync into pageable host memory is synchronous).
// Must be caught by: outputs poisoned (NaN) before every call plus the
// run-twice check: the repeated call leaves NaN, verification failure
// (outcome `wrong`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

struct Last {
  const void* x;
  void* y;
  long n;
  float first, last;
};
static Last g_last = {nullptr, nullptr, 0, 0.0f, 0.0f};

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = (const float*)in[0].data;
  float ends[2] = {0.0f, 0.0f};
  cudaMemcpyAsync(&ends[0], x, sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaMemcpyAsync(&ends[1], x + n - 1, sizeof(float), cudaMemcpyDeviceToHost, s);
  const Last now = {in[0].data, out[0].data, n, ends[0], ends[1]};
  if (now.x == g_last.x && now.y == g_last.y && now.n == g_last.n && now.first == g_last.first &&
      now.last == g_last.last) {
    return 0;  // "already computed"
  }
  g_last = now;
  affine_relu6<<<1024, 256, 0, s>>>(x, (const float*)in[1].data, (const float*)in[2].data, (float*)out[0].data, n,
                                    cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
