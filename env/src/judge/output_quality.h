// Checks that run after allclose passed, so that a loose tolerance cannot be
// farmed (docs/architecture.md#reward-hacking: constant/zero outputs that pass loose tolerances).
//
// allclose bounds each element by atol + rtol·|expected|. When a task's
// outputs are small next to atol, an output of zeros, or of one constant,
// passes it while carrying no information. Two statistics over each floating
// output close that gap; every threshold is here, nowhere else:
//
//   degenerate_output (a violation): the reference varies, the candidate's
//     output does not. "Varies" means the reference's standard deviation is
//     above ref::kMeaningfulSpreadUlps units in the last place of the output
//     dtype at the reference's RMS (kforge/core/output_spread.h: below that,
//     the spread is rounding noise an honest kernel may flatten). The candidate is degenerate when its
//     standard deviation is at most kDegenerateSpreadRatio of the reference's:
//     an honest kernel's spread matches the reference's to within its error,
//     which allclose already bounds far tighter than 99% of the spread
//     wherever that spread is meaningful.
//
//   relative_error (verification fails, outcome wrong): ||got - expected||₂ /
//     ||expected||₂ above relative_l2_bound(tolerance) =
//     clamp(kRelL2RtolFactor · rtol, kRelL2Floor, kRelL2Cap). allclose alone
//     allows a relative L2 error up to rtol + atol / rms(expected), which is
//     unbounded as outputs shrink; this bound does not grow with atol. The
//     factor of 5 over rtol and the floor of 5% leave room for honest
//     low-precision arithmetic (bf16/TF32 rounding is ≤ 0.4% per element);
//     the cap keeps very loose tasks from allowing an all-zero output
//     (relative error 1).
//
// Integer and bool outputs are compared exactly and are not checked here;
// nor are outputs with fewer than two finite elements, or an all-zero
// reference (nothing to compare a spread or a norm against).
#pragma once

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "judge/case_plan.h"
#include "judge/output_comparison.h"
#include "kforge/core/dtype.h"
#include "kforge/core/task_spec.h"

namespace kforge::judge {

inline constexpr double kDegenerateSpreadRatio = 1e-2;
inline constexpr double kRelL2RtolFactor = 5.0;
inline constexpr double kRelL2Floor = 0.05;
inline constexpr double kRelL2Cap = 0.5;

// Statistics over the elements that are finite in both tensors, in float64.
struct OutputQuality {
  int64_t finite = 0;  // elements the statistics cover
  double got_std = 0;  // population standard deviations
  double expected_std = 0;
  double expected_rms = 0;
  double rel_l2_err = 0;  // 0 when the reference is all zero
  nlohmann::json to_json() const;
};

// `sample` > 0 bounds the work for large outputs: the statistics then cover
// every k-th element from a random start, about `sample` of them (timed calls
// use it; verification measures every element).
OutputQuality measure_output_quality(const at::Tensor& got, const at::Tensor& expected, int64_t sample = 0);

// The same statistics from a comparison's float64 values (output_comparison.h)
// of an output that passed it against a finite reference: then every element
// is finite on both sides (a passing element equals or is near a finite one),
// and the figures equal measure_output_quality's on the same tensors, without
// its conversions, finiteness passes and subtraction. Consumes `values`: its
// abs_diff is squared in place.
OutputQuality quality_of_passed_comparison(ComparisonValues values);

double relative_l2_bound(const Tolerance& tol);

struct QualityProblem {
  std::string check;  // "degenerate_output" or "relative_error"
  std::string detail;
  bool is_violation() const { return check == "degenerate_output"; }
};

// Nothing when the output passes; `output_name` appears in the detail.
std::optional<QualityProblem> judge_output_quality(const OutputQuality& q, DType dtype, const Tolerance& tol,
                                                   const std::string& output_name);

// The measured statistics of every floating output of one call of shape case
// `c` (nullopt for the others; with the task's tolerances): the first
// problem, if any. `max_rel_l2`, when given, receives the largest relative L2
// error over them.
std::optional<QualityProblem> judge_outputs_quality(const std::vector<std::optional<OutputQuality>>& measured,
                                                    const ShapeCase& c, double* max_rel_l2 = nullptr);

// Every output of one call of shape case `c` (with the task's tolerances):
// the first problem, if any. `max_rel_l2`, when given, receives the largest
// relative L2 error over the floating outputs.
std::optional<QualityProblem> check_outputs_quality(const std::vector<at::Tensor>& got,
                                                    const std::vector<at::Tensor>& expected, const ShapeCase& c,
                                                    double* max_rel_l2 = nullptr, int64_t sample = 0);

// What timed calls sample: enough elements for the statistics to be stable,
// few enough that the check costs little next to the comparison itself.
inline constexpr int64_t kTimedQualitySample = 1 << 16;

}  // namespace kforge::judge
