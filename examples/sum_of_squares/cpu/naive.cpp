// Correct and straightforward: a sequential sum per row.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const float* x = static_cast<const float*>(inputs[0].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  for (int64_t i = 0; i < rows; ++i) {
    float acc = 0.0f;
    for (int64_t j = 0; j < cols; ++j) acc += x[i * cols + j] * x[i * cols + j];
    y[i] = acc;
  }
  return 0;
}
