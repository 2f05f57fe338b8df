// Wrong: normalizes with the unbiased variance (divides by N - 1), a classic
// LayerNorm mistake; off by ~1/(2N) relative, far above the tolerance.
#include <kforge/kernel_abi.h>

#include <cmath>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* r = static_cast<const float*>(inputs[1].data);
  const float* gamma = static_cast<const float*>(inputs[2].data);
  const float* beta = static_cast<const float*>(inputs[3].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0.0, sq = 0.0;
    for (int64_t j = 0; j < cols; ++j) mean += x[i * cols + j] + r[i * cols + j];
    mean /= cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = x[i * cols + j] + r[i * cols + j] - mean;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / (cols - 1) + 1e-5);
    for (int64_t j = 0; j < cols; ++j) {
      y[i * cols + j] = static_cast<float>((x[i * cols + j] + r[i * cols + j] - mean) * inv) * gamma[j] + beta[j];
    }
  }
  return 0;
}
