// Bounds of the fan-based uniform initializers, shared by make_inputs and the
// KernelBench renderer so that both draw from the same distribution.
#include <cmath>

#include "kforge/core/tensor_spec.h"

namespace kforge {

double init_uniform_bound(const TensorSpec& spec) {
  const auto& s = spec.shape;
  double fan_in = 1;
  double fan_out = 1;
  if (s.size() == 1) {
    fan_in = fan_out = static_cast<double>(s[0]);
  } else if (s.size() >= 2) {
    double receptive = 1;
    for (size_t i = 2; i < s.size(); ++i) receptive *= static_cast<double>(s[i]);
    fan_in = static_cast<double>(s[1]) * receptive;
    fan_out = static_cast<double>(s[0]) * receptive;
  }
  if (spec.init.kind == "xavier_uniform") return std::sqrt(6.0 / (fan_in + fan_out));
  // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + a^2)) = sqrt(1/3), and
  // bound = sqrt(3) * gain / sqrt(fan_in) = 1 / sqrt(fan_in).
  return 1.0 / std::sqrt(fan_in);
}

}  // namespace kforge
