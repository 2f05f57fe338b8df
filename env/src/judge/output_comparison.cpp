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

ComparisonStats compare_output(const at::Tensor& got, const at::Tensor& expected, const Tolerance& tol,
                               ComparisonValues* values, ExpectedValues known) {
  ComparisonStats s;
  s.numel = got.numel();
  if (s.numel == 0) return s;
  at::Tensor g, e;
  if (got.scalar_type() == at::kBool && expected.scalar_type() == at::kBool) {
    g = as_bytes(got).to(at::kDouble);
    e = as_bytes(expected).to(at::kDouble);
  } else {
    g = got.reshape({-1}).to(at::kDouble);
    e = expected.reshape({-1}).to(at::kDouble);
  }
  // In float64, each full-size temporary made once and reused, updated in
  // place where nothing else reads it: on a 4096x4096 output every
  // temporary is 128 MiB of traffic, and the comparison runs for every
  // seed, run and output.
  at::Tensor diff = g.sub(e).abs_();  // NaN where either side is NaN, or for equal infinities
  const at::Tensor e_abs = e.abs();
  at::Tensor mismatch;
  at::Tensor nan_count;  // NaNs of the candidate's output (floating outputs only)
  const bool floating = at::isFloatingType(got.scalar_type()) || at::isFloatingType(expected.scalar_type());
  if (floating) {
    const at::Tensor nan = g.isnan();
    // The bound atol + rtol * |expected|, a temporary of each expression.
    if (known == ExpectedValues::kFinite && tol.atol >= 0 && tol.rtol >= 0) {
      // Far: beyond a bound of at least 0 (NaN compares false), or NaN,
      // which with a finite expected value only the candidate's side makes.
      mismatch = diff.gt(e_abs.mul(tol.rtol).add_(tol.atol)).logical_or_(nan);
    } else {
      // Close: within the bound, or equal (equal infinities, whose
      // difference is NaN).
      mismatch = diff.le(e_abs.mul(tol.rtol).add_(tol.atol)).logical_or_(g.eq(e)).logical_not_();
    }
    nan_count = nan.sum().to(at::kDouble);
  } else {
    mismatch = g.ne(e);
    nan_count = at::zeros({}, g.options());
  }
  // Equal infinities' NaN difference becomes 0 here: they agree.
  diff.nan_to_num_(0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
  // The relative error over the elements whose reference is not 0 (0 when
  // there are none): the others count as 0, which the maximum of
  // non-negative ratios ignores.
  const at::Tensor rel = diff.div(e_abs).masked_fill_(e.eq(0), 0.0);
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
  if (values != nullptr && floating) *values = ComparisonValues{g, e, diff};
  return s;
}

double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0;
  at::Tensor x = a.reshape({-1}).to(at::kDouble), y = b.reshape({-1}).to(at::kDouble);
  const at::Tensor same = x.eq(y).logical_or_(x.isnan().logical_and_(y.isnan()));
  return x.sub(y)
      .abs_()
      .masked_fill_(same, 0.0)
      .nan_to_num_(std::numeric_limits<double>::infinity())
      .max()
      .item<double>();
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() != b.numel() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;
  return at::equal(as_bytes(a), as_bytes(b));
}

}  // namespace kforge::judge
