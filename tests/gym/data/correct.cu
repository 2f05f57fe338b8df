// Correct CUDA candidate for scale_bias_relu: one thread per element.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void scale_bias_relu(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t cols) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] * w[i % cols] + b[i % cols];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const int64_t n = kf_numel(&inputs[0]);
  const int threads = 256;
  const unsigned blocks = (unsigned)((n + threads - 1) / threads);
  scale_bias_relu<<<blocks, threads, 0, (cudaStream_t)stream>>>((const float*)inputs[0].data,
                                                                 (const float*)inputs[1].data,
                                                                 (const float*)inputs[2].data,
                                                                 (float*)outputs[0].data, n, inputs[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
