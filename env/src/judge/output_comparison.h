// allclose with statistics: the comparison behind every verification and
// every timed call. Pure ATen on whatever device the tensors live on; only
// scalars come back to the host.
//
// An element matches when got == expected (equal infinities included) or
// |got - expected| <= atol + rtol * |expected|. NaN never matches, not even
// NaN in both. Relative error is |got - expected| / |expected| over elements
// with expected != 0. Integer and bool outputs are compared exactly (bool byte
// by byte, so a poisoned byte cannot pass as "true").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::judge {

struct Mismatch {
  std::vector<int64_t> index;
  double got = 0;
  double expected = 0;
};

struct ComparisonStats {
  int64_t numel = 0;
  int64_t mismatches = 0;
  int64_t nan_count = 0;  // NaNs in the candidate's output
  double max_abs_err = 0;
  double max_rel_err = 0;
  std::optional<Mismatch> first_mismatch;
  bool passed() const { return mismatches == 0; }
  nlohmann::json to_json() const;
};

// What a comparison of floating outputs computed in float64 that the quality
// check (output_quality.h) reads too, so that it need not convert and subtract
// again: both sides flattened, and |got - expected| (NaN turned to 0,
// infinities kept). Empty tensors when the outputs were not floating.
struct ComparisonValues {
  at::Tensor got;
  at::Tensor expected;
  at::Tensor abs_diff;
};

// What the caller knows of `expected`.
enum class ExpectedValues {
  kAny,
  // Finite everywhere: a reference the judge checked when it ran it
  // (reference_sanity.h). Then got == expected is a difference of 0, within
  // any bound, and the equality pass that only equal infinities need is left
  // out; the figures are the same.
  kFinite,
};

// `got` and `expected` must have the same shape; dtypes may differ (e.g. a
// float64 reference), both are compared in float64. `values`, when given,
// keeps the float64 values for the quality check.
ComparisonStats compare_output(const at::Tensor& got, const at::Tensor& expected, const Tolerance& tol,
                               ComparisonValues* values = nullptr, ExpectedValues known = ExpectedValues::kAny);

// Largest |a - b| (0 for identical tensors, inf when NaNs differ in place):
// how far two runs of the candidate disagree.
double max_abs_difference(const at::Tensor& a, const at::Tensor& b);

// True when the bytes of `a` and `b` are identical (for input mutation).
bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);

}  // namespace kforge::judge
