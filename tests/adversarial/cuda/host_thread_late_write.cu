// Exploit: host threads that outlive the call. kf_forward starts a detached
// std::thread and returns at once; the thread launches the real kernel on the
// harness's stream a little later, after the harness has recorded its end
// event, so the work lands outside the timed interval (and races the
// harness's output checks).
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (pthread_create / std::thread symbols: threads). Backed at run time by the
// runner's seccomp filter (clone refused: `sandbox`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

#include <chrono>
#include <thread>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const float* x = (const float*)in[0].data;
  const float* w = (const float*)in[1].data;
  const float* b = (const float*)in[2].data;
  float* y = (float*)out[0].data;
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  cudaStream_t s = (cudaStream_t)stream;
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    affine_relu6<<<1024, 256, 0, s>>>(x, w, b, y, n, cols);
  }).detach();
  return 0;
}
