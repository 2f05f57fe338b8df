// Wrong: indexes w with the leading dimension of x (k instead of n), a
// transposition mix-up that only coincides with the right answer when k == n.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void matmul_bias_relu(const float* x, const float* w, const float* b, float* y, int m, int k, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < m && col < n) {
    float acc = 0.0f;
    for (int p = 0; p < k; ++p) acc += x[row * k + p] * w[(p * k + col) % (k * n)];
    y[row * n + col] = fmaxf(acc + b[col], 0.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  const int m = (int)inputs[0].shape[0], k = (int)inputs[0].shape[1], n = (int)inputs[1].shape[1];
  dim3 block(16, 16);
  dim3 grid((n + 15) / 16, (m + 15) / 16);
  matmul_bias_relu<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)inputs[0].data,
                                                            (const float*)inputs[1].data,
                                                            (const float*)inputs[2].data, (float*)outputs[0].data,
                                                            m, k, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
