// Correct and straightforward: the textbook formula with std::tanh.
#include <kforge/kernel_abi.h>

#include <cmath>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 2 || num_outputs != 1) return 1;
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* b = static_cast<const float*>(inputs[1].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float u = x[i * cols + j] + b[j];
      const float g = 0.5f * u * (1.0f + std::tanh(k * (u + 0.044715f * u * u * u)));
      y[i * cols + j] = g + x[i * cols + j];
    }
  }
  return 0;
}
