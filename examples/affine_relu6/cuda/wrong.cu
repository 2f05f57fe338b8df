// Wrong: ReLU instead of ReLU6 (forgets the upper clamp).
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t cols) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f);
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  const int64_t n = kf_numel(&inputs[0]);
  affine_relu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (const float*)inputs[2].data,
      (float*)outputs[0].data, n, inputs[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
