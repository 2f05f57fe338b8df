#include "judge/output_quality.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "judge/tolerance.h"
#include "kforge/core/number_text.h"
#include "kforge/core/output_spread.h"

namespace kforge::judge {
namespace {

// The statistics of `finite` float64 elements of each side, every one
// finite, and their squared differences.
OutputQuality quality_from_float64(const at::Tensor& g, const at::Tensor& e, const at::Tensor& squared_diff,
                                   int64_t finite) {
  OutputQuality q;
  q.finite = finite;
  // Written out rather than at::std, whose overloads differ between libtorch
  // 1.13 and 2.x; the means stay on the device, and the four figures come
  // back in one transfer (each .item() waits for the device on its own).
  // Squares in place on the fresh differences: one full-size temporary less each.
  auto stddev = [](const at::Tensor& t) { return t.sub(t.mean()).square_().mean().sqrt(); };
  const at::Tensor figures = at::stack({stddev(g), stddev(e), e.square().sum(), squared_diff.sum()}).to(at::kCPU);
  const double* f = figures.data_ptr<double>();
  q.got_std = f[0];
  q.expected_std = f[1];
  const double expected_sq = f[2];
  q.expected_rms = std::sqrt(expected_sq / static_cast<double>(q.finite));
  if (expected_sq > 0) q.rel_l2_err = std::sqrt(f[3] / expected_sq);
  return q;
}

}  // namespace

nlohmann::json OutputQuality::to_json() const {
  return {{"finite", finite},
          {"got_std", got_std},
          {"expected_std", expected_std},
          {"expected_rms", expected_rms},
          {"rel_l2_err", rel_l2_err}};
}

OutputQuality measure_output_quality(const at::Tensor& got, const at::Tensor& expected, int64_t sample) {
  OutputQuality q;
  if (got.numel() == 0) return q;
  at::Tensor g = got.reshape({-1}), e = expected.reshape({-1});
  if (sample > 0 && g.numel() > 2 * sample) {
    // A random start, so that a candidate cannot know which elements count.
    const int64_t stride = g.numel() / sample;
    const int64_t start = static_cast<int64_t>(std::random_device{}() % static_cast<uint64_t>(stride));
    g = g.slice(0, start, g.numel(), stride);
    e = e.slice(0, start, e.numel(), stride);
  }
  g = g.to(at::kDouble);
  e = e.to(at::kDouble);
  at::Tensor finite = g.isfinite().logical_and_(e.isfinite());
  q.finite = finite.sum().item<int64_t>();
  if (q.finite < g.numel()) {
    g = g.masked_select(finite);
    e = e.masked_select(finite);
  }
  if (q.finite == 0) return q;
  return quality_from_float64(g, e, g.sub(e).square_(), q.finite);
}

OutputQuality quality_of_passed_comparison(ComparisonValues values) {
  if (!values.got.defined() || values.got.numel() == 0) return {};
  // |d|² = d² exactly, so the sum equals measure_output_quality's.
  return quality_from_float64(values.got, values.expected, values.abs_diff.square_(), values.got.numel());
}

double relative_l2_bound(const Tolerance& tol) {
  return std::clamp(kRelL2RtolFactor * tol.rtol, kRelL2Floor, kRelL2Cap);
}

std::optional<QualityProblem> judge_output_quality(const OutputQuality& q, DType dtype, const Tolerance& tol,
                                                   const std::string& output_name) {
  if (!dtype_is_floating(dtype) || q.finite < 2 || q.expected_rms == 0) return std::nullopt;
  const double meaningful = ref::meaningful_spread(q.expected_rms, dtype);
  if (q.expected_std > meaningful && q.got_std <= kDegenerateSpreadRatio * q.expected_std) {
    return QualityProblem{"degenerate_output",
                          "output " + output_name + " is " + (q.got_std == 0 ? "constant" : "nearly constant") +
                              " (standard deviation " + format_significant(q.got_std) +
                              ") where the reference varies (" + format_significant(q.expected_std) +
                              "): it passes the tolerance without computing the result"};
  }
  const double bound = relative_l2_bound(tol);
  if (q.rel_l2_err > bound) {
    return QualityProblem{"relative_error", "output " + output_name + " has a relative L2 error of " +
                                                format_significant(q.rel_l2_err) + ", above the bound " +
                                                format_significant(bound) + " for this tolerance (rtol " +
                                                format_significant(tol.rtol) +
                                                "), although every element is within atol + rtol·|expected|"};
  }
  return std::nullopt;
}

std::optional<QualityProblem> judge_outputs_quality(const std::vector<std::optional<OutputQuality>>& measured,
                                                    const ShapeCase& c, double* max_rel_l2) {
  std::optional<QualityProblem> first;
  for (size_t i = 0; i < measured.size() && i < c.outputs.size(); ++i) {
    if (!measured[i]) continue;
    const OutputQuality& q = *measured[i];
    const DType dtype = c.outputs[i].dtype;
    if (max_rel_l2 != nullptr) *max_rel_l2 = std::max(*max_rel_l2, q.rel_l2_err);
    if (!first) first = judge_output_quality(q, dtype, tolerance_for(c.task, dtype), c.outputs[i].name);
    if (first && max_rel_l2 == nullptr) break;
  }
  return first;
}

std::optional<QualityProblem> check_outputs_quality(const std::vector<at::Tensor>& got,
                                                    const std::vector<at::Tensor>& expected, const ShapeCase& c,
                                                    double* max_rel_l2, int64_t sample) {
  std::vector<std::optional<OutputQuality>> measured(std::min(got.size(), expected.size()));
  for (size_t i = 0; i < measured.size() && i < c.outputs.size(); ++i) {
    if (dtype_is_floating(c.outputs[i].dtype)) measured[i] = measure_output_quality(got[i], expected[i], sample);
  }
  return judge_outputs_quality(measured, c, max_rel_l2);
}

}  // namespace kforge::judge
