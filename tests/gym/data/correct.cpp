// Correct: one fused pass, shapes read from the ABI on every call.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 3 || num_outputs != 1) return 1;
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* w = static_cast<const float*>(inputs[1].data);
  const float* b = static_cast<const float*>(inputs[2].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float v = x[i * cols + j] * w[j] + b[j];
      y[i * cols + j] = v > 0.0f ? v : 0.0f;
    }
  }
  return 0;
}
