// Correct and straightforward: one thread per row (uncoalesced reads).
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void row_sum_sq(const float* x, float* y, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r < rows) {
    float acc = 0.0f;
    for (int64_t j = 0; j < cols; ++j) acc += x[r * cols + j] * x[r * cols + j];
    y[r] = acc;
  }
}

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  row_sum_sq<<<(unsigned)((rows + 127) / 128), 128, 0, (cudaStream_t)stream>>>(
      (const float*)inputs[0].data, (float*)outputs[0].data, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
