// Wrong: reads w as if it were stored transposed ([n, k] instead of [k, n]).
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* w = static_cast<const float*>(inputs[1].data);
  const float* b = static_cast<const float*>(inputs[2].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = b[j];
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * w[(j * k + p) % (k * n)];
      y[i * n + j] = acc > 0.0f ? acc : 0.0f;
    }
  }
  return 0;
}
