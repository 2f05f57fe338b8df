// Correct and straightforward: one thread per element, scalar loads.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t cols) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i] * w[i % cols] + b[i % cols];
    y[i] = fminf(fmaxf(v, 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const int64_t n = kf_numel(&inputs[0]);
  const int64_t cols = inputs[0].shape[1];
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  affine_relu6<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (const float*)inputs[2].data,
      (float*)outputs[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
