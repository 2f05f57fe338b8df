// Whether a tensor's values vary by more than rounding noise: the one
// definition of "near-constant" shared by the judge's degenerate-output check,
// task validation (a task whose reference is constant cannot tell a real
// kernel from one that writes a constant) and the data-synthesis filters.
//
// "Varies" means the population standard deviation over the finite elements is
// above kMeaningfulSpreadUlps units in the last place of the dtype at the
// values' RMS. Below that the spread is rounding noise that an honest kernel
// may flatten, so a reference under it is near-constant.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "kforge/core/dtype.h"

namespace kforge::ref {

inline constexpr double kMeaningfulSpreadUlps = 16.0;

// Unit roundoff of a floating dtype (spacing of values at 1.0); float32's for
// non-floating dtypes.
double unit_roundoff(DType dtype);

struct OutputSpread {
  int64_t numel = 0;
  int64_t finite = 0;  // elements that are neither NaN nor infinite
  double std = 0;      // over the finite elements, in float64
  double rms = 0;
  bool all_finite() const { return finite == numel; }
};

OutputSpread measure_spread(const at::Tensor& t);

// The spread above which a `dtype` output counts as varying (see above).
double meaningful_spread(double rms, DType dtype);

// True when fewer than two elements are finite, or the spread is at most
// meaningful_spread(): an output that carries (next to) no information.
bool is_near_constant(const OutputSpread& s, DType dtype);

}  // namespace kforge::ref
