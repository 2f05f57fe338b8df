#include "kforge/core/output_spread.h"

#include <cmath>

namespace kforge::ref {

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return 9.765625e-4;
    case DType::kBFloat16:
      return 7.8125e-3;
    case DType::kFloat64:
      return 2.220446049250313e-16;
    default:
      return 1.1920928955078125e-7;
  }
}

OutputSpread measure_spread(const at::Tensor& t) {
  OutputSpread s;
  s.numel = t.numel();
  if (s.numel == 0) return s;
  at::Tensor v = t.reshape({-1}).to(at::kDouble);
  at::Tensor finite = v.isfinite();
  s.finite = finite.sum().item<int64_t>();
  if (s.finite < s.numel) v = v.masked_select(finite);
  if (s.finite == 0) return s;
  // Written out rather than at::std, whose overloads differ between libtorch 1.13 and 2.x.
  s.std = (v - v.mean()).square().mean().sqrt().item<double>();
  s.rms = v.square().mean().sqrt().item<double>();
  return s;
}

double meaningful_spread(double rms, DType dtype) { return kMeaningfulSpreadUlps * unit_roundoff(dtype) * rms; }

bool is_near_constant(const OutputSpread& s, DType dtype) {
  return s.finite < 2 || s.std <= meaningful_spread(s.rms, dtype);
}

}  // namespace kforge::ref
