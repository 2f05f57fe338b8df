// Correct and straightforward: materialize x + r, then mean, variance and
// normalization in three passes per row.
#include <kforge/kernel_abi.h>

#include <cmath>
#include <cstdlib>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  if (num_inputs != 4 || num_outputs != 1) return 1;
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* r = static_cast<const float*>(inputs[1].data);
  const float* gamma = static_cast<const float*>(inputs[2].data);
  const float* beta = static_cast<const float*>(inputs[3].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  float* h = static_cast<float*>(std::malloc(sizeof(float) * cols));
  if (h == nullptr) return 3;
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      h[j] = x[i * cols + j] + r[i * cols + j];
      mean += h[j];
    }
    mean /= static_cast<double>(cols);
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) var += (h[j] - mean) * (h[j] - mean);
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + 1e-5);
    for (int64_t j = 0; j < cols; ++j) {
      y[i * cols + j] = static_cast<float>((h[j] - mean) * inv) * gamma[j] + beta[j];
    }
  }
  std::free(h);
  return 0;
}
