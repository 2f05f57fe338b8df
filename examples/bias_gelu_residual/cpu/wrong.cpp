// Wrong: forgets the residual connection.
#include <kforge/kernel_abi.h>

#include <cmath>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* b = static_cast<const float*>(inputs[1].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float u = x[i] + b[i % cols];
    y[i] = 0.5f * u * (1.0f + std::tanh(0.7978845608f * (u + 0.044715f * u * u * u)));
  }
  return 0;
}
