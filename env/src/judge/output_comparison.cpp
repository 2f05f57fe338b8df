#include "judge/output_comparison.h"

#include <limits>

namespace kforge::judge {
namespace {

at::Tensor as_bytes(const at::Tensor& t) { return t.contiguous().reshape({-1}).view(at::kByte); }

std::vector<int64_t> unravel(int64_t flat, at::IntArrayRef shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t dim = std::max<int64_t>(shape[i], 1);
    index[i] = flat % dim;
    flat /= dim;
  }
  return index;
}

}  // namespace

nlohmann::json ComparisonStats::to_json() const {
  nlohmann::json j = {{"numel", numel},
                      {"mismatches", mismatches},
                      {"nan_count", nan_count},
                      {"max_abs_err", max_abs_err},
                      {"max_rel_err", max_rel_err},
                      {"passed", passed()}};
  if (first_mismatch) {
    j["first_mismatch"] = {
        {"index", first_mismatch->index}, {"got", first_mismatch->got}, {"expected", first_mismatch->expected}};
  }
  return j;
}

ComparisonStats compare_output(const at::Tensor& got, const at::Tensor& expected, const Tolerance& tol) {
  ComparisonStats s;
  s.numel = got.numel();
  if (s.numel == 0) return s;
  at::Tensor mismatch;
  at::Tensor g, e;
  at::Tensor nan_count;  // NaNs of the candidate's output (floating outputs only)
  if (got.scalar_type() == at::kBool && expected.scalar_type() == at::kBool) {
    g = as_bytes(got).to(at::kDouble);
    e = as_bytes(expected).to(at::kDouble);
    mismatch = g.ne(e);
  } else {
    g = got.reshape({-1}).to(at::kDouble);
    e = expected.reshape({-1}).to(at::kDouble);
    if (at::isFloatingType(got.scalar_type()) || at::isFloatingType(expected.scalar_type())) {
      at::Tensor diff = (g - e).abs();
      at::Tensor close = g.eq(e).logical_or(diff.le(e.abs().mul(tol.rtol).add(tol.atol)));
      mismatch = close.logical_not();
      nan_count = g.isnan().sum().to(at::kDouble);
    } else {
      mismatch = g.ne(e);
    }
  }
  if (!nan_count.defined()) nan_count = at::zeros({}, g.options());
  at::Tensor diff =
      (g - e).abs().nan_to_num(0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
  // Equal infinities give inf - inf = NaN above, mapped to 0: they agree.
  // The relative error over the elements whose reference is not 0 (0 when
  // there are none): the others count as 0, which the maximum of
  // non-negative ratios ignores.
  at::Tensor nonzero = e.ne(0);
  at::Tensor rel = at::where(nonzero, diff.div(e.abs()), at::zeros({}, diff.options()));
  // Every figure in one transfer: each .item() would wait for the device on
  // its own, and on a GPU shared by other processes each wait is costly.
  const at::Tensor figures =
      at::stack({nan_count.reshape({}), diff.max(), rel.max(), mismatch.sum().to(at::kDouble)}).to(at::kCPU);
  const double* f = figures.data_ptr<double>();
  s.nan_count = static_cast<int64_t>(f[0]);
  s.max_abs_err = s.nan_count > 0 ? std::numeric_limits<double>::quiet_NaN() : f[1];
  s.max_rel_err = f[2];
  s.mismatches = static_cast<int64_t>(f[3]);
  if (s.mismatches > 0) {
    int64_t flat = mismatch.nonzero().select(1, 0)[0].item<int64_t>();
    s.first_mismatch = Mismatch{unravel(flat, got.sizes()), g[flat].item<double>(), e[flat].item<double>()};
  }
  return s;
}

double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0;
  at::Tensor x = a.reshape({-1}).to(at::kDouble), y = b.reshape({-1}).to(at::kDouble);
  at::Tensor both_nan = x.isnan().logical_and(y.isnan());
  at::Tensor same = x.eq(y).logical_or(both_nan);
  at::Tensor diff = (x - y).abs().masked_fill(same, 0.0).nan_to_num(std::numeric_limits<double>::infinity());
  return diff.max().item<double>();
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() != b.numel() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;
  return at::equal(as_bytes(a), as_bytes(b));
}

}  // namespace kforge::judge
