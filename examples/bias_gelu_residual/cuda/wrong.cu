// Wrong: the exact (erf) GELU instead of the tanh approximation the task asks
// for; the two differ by up to ~5e-4, well above the task's tolerance.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void bias_gelu_residual(const float* x, const float* b, float* y, int64_t n, int64_t cols) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float u = x[i] + b[i % cols];
    y[i] = 0.5f * u * (1.0f + erff(u * 0.7071067811865476f)) + x[i];
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  const int64_t n = kf_numel(&inputs[0]);
  bias_gelu_residual<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n, inputs[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
