// One pass, no temporary; 16 independent partial sums break the add
// dependency chain so the loop vectorizes (and is more accurate, too).
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 1 || num_outputs != 1) return 1;
  const float* __restrict__ x = static_cast<const float*>(inputs[0].data);
  float* __restrict__ y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  constexpr int kLanes = 16;
  for (int64_t i = 0; i < rows; ++i) {
    const float* __restrict__ xr = x + i * cols;
    float acc[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += xr[j + l] * xr[j + l];
    }
    float total = 0.0f;
    for (int l = 0; l < kLanes; ++l) total += acc[l];
    for (; j < cols; ++j) total += xr[j] * xr[j];
    y[i] = total;
  }
  return 0;
}
