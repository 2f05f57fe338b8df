// Reductions and cumsum.
#include "ops/op_helpers.h"
#include "reference/aten_ops.h"

namespace kforge::ref::internal {
namespace {

using ops::get_bool;
using ops::get_float;
using ops::get_int;
using ops::has;

std::vector<int64_t> dims_of(const at::Tensor& x, const json& a) { return ops::reduce_dims(a, "dim", x.dim()); }

// For ops whose dim is a list: with no dim and no keepdim, the whole-tensor
// overload; otherwise the explicit dims.
AtenOp list_reduction(at::Tensor (*all)(const at::Tensor&),
                      std::function<at::Tensor(const at::Tensor&, at::IntArrayRef, bool)> some) {
  return [all, some](const Tensors& in, const json& a) {
    const bool keepdim = get_bool(a, "keepdim");
    if (!has(a, "dim") && !keepdim && all) return all(in[0]);
    return some(in[0], dims_of(in[0], a), keepdim);
  };
}

// Variance with an arbitrary correction, written out because at::var's
// correction argument changed type between libtorch 1.13 and 2.x.
at::Tensor variance(const at::Tensor& x, const json& a) {
  const std::vector<int64_t> dims = dims_of(x, a);
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  const at::Tensor centered = x - x.mean(dims, /*keepdim=*/true);
  return centered.square().sum(dims, get_bool(a, "keepdim")) / static_cast<double>(n - get_int(a, "correction"));
}

}  // namespace

void add_reduction_ops(AtenOpTable& t) {
  t["sum"] = list_reduction([](const at::Tensor& x) { return at::sum(x); },
                            [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::sum(x, d, k); });
  t["mean"] = list_reduction([](const at::Tensor& x) { return at::mean(x); },
                             [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::mean(x, d, k); });
  t["amax"] = list_reduction(nullptr, [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::amax(x, d, k); });
  t["amin"] = list_reduction(nullptr, [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::amin(x, d, k); });
  t["logsumexp"] =
      list_reduction(nullptr, [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::logsumexp(x, d, k); });
  t["var"] = [](const Tensors& in, const json& a) { return variance(in[0], a); };
  t["std"] = [](const Tensors& in, const json& a) { return at::sqrt(variance(in[0], a)); };
  t["norm"] = [](const Tensors& in, const json& a) {
    const at::Scalar p(get_float(a, "p"));
    const bool keepdim = get_bool(a, "keepdim");
    if (!has(a, "dim")) return at::linalg_vector_norm(in[0], p, c10::nullopt, keepdim, c10::nullopt);
    const std::vector<int64_t> dims = dims_of(in[0], a);
    return at::linalg_vector_norm(in[0], p, at::IntArrayRef(dims), keepdim, c10::nullopt);
  };

  t["max"] = [](const Tensors& in, const json& a) {
    if (!has(a, "dim")) return at::max(in[0]);
    return std::get<0>(at::max(in[0], get_int(a, "dim"), get_bool(a, "keepdim")));
  };
  t["min"] = [](const Tensors& in, const json& a) {
    if (!has(a, "dim")) return at::min(in[0]);
    return std::get<0>(at::min(in[0], get_int(a, "dim"), get_bool(a, "keepdim")));
  };
  t["prod"] = [](const Tensors& in, const json& a) {
    if (!has(a, "dim")) return at::prod(in[0]);
    return at::prod(in[0], get_int(a, "dim"), get_bool(a, "keepdim"));
  };
  t["argmax"] = [](const Tensors& in, const json& a) {
    if (!has(a, "dim")) return at::argmax(in[0]);
    return at::argmax(in[0], get_int(a, "dim"), get_bool(a, "keepdim"));
  };
  t["argmin"] = [](const Tensors& in, const json& a) {
    if (!has(a, "dim")) return at::argmin(in[0]);
    return at::argmin(in[0], get_int(a, "dim"), get_bool(a, "keepdim"));
  };
  t["cumsum"] = [](const Tensors& in, const json& a) { return at::cumsum(in[0], get_int(a, "dim")); };
}

}  // namespace kforge::ref::internal
