// Normalizations. batch_norm and instance_norm run in training mode without
// running statistics: the batch's own statistics, as a fresh nn.BatchNorm.
#include "ops/op_helpers.h"
#include "reference/aten_ops.h"

namespace kforge::ref::internal {
namespace {

using ops::get_float;
using ops::get_int;
using ops::get_int_list;
using ops::has;

// The number of trailing dims layer_norm/rms_norm normalize; the registry has
// already checked that the attrs agree with the shapes.
int64_t trailing_ndim(const Tensors& in, const json& a) {
  if (has(a, "normalized_ndim")) return get_int(a, "normalized_ndim");
  if (has(a, "normalized_shape")) return static_cast<int64_t>(get_int_list(a, "normalized_shape").size());
  return in.size() > 1 ? in[1].dim() : 1;
}

bool cudnn_enabled() { return at::globalContext().userEnabledCuDNN(); }

}  // namespace

void add_norm_ops(AtenOpTable& t) {
  t["layer_norm"] = [](const Tensors& in, const json& a) {
    const int64_t k = trailing_ndim(in, a);
    const at::IntArrayRef normalized = in[0].sizes().slice(static_cast<size_t>(in[0].dim() - k));
    return at::layer_norm(in[0], normalized, optional_input(in, 1), optional_input(in, 2), get_float(a, "eps"),
                          cudnn_enabled());
  };
  t["rms_norm"] = [](const Tensors& in, const json& a) {
    const int64_t k = trailing_ndim(in, a);
    std::vector<int64_t> dims;
    for (int64_t i = k; i >= 1; --i) dims.push_back(-i);
    // The same sequence of ops as the rendered Python, so both round alike.
    at::Tensor y = in[0] * at::rsqrt(in[0].pow(2).mean(dims, /*keepdim=*/true) + get_float(a, "eps"));
    if (in.size() > 1) y = y * in[1];
    return y;
  };
  t["group_norm"] = [](const Tensors& in, const json& a) {
    return at::group_norm(in[0], get_int(a, "num_groups"), optional_input(in, 1), optional_input(in, 2),
                          get_float(a, "eps"), cudnn_enabled());
  };
  t["batch_norm"] = [](const Tensors& in, const json& a) {
    return at::batch_norm(in[0], optional_input(in, 1), optional_input(in, 2), c10::nullopt, c10::nullopt,
                          /*training=*/true, /*momentum=*/0.1, get_float(a, "eps"), cudnn_enabled());
  };
  t["instance_norm"] = [](const Tensors& in, const json& a) {
    return at::instance_norm(in[0], optional_input(in, 1), optional_input(in, 2), c10::nullopt, c10::nullopt,
                             /*use_input_stats=*/true, /*momentum=*/0.1, get_float(a, "eps"), cudnn_enabled());
  };
}

}  // namespace kforge::ref::internal
