#include "reference/aten_ops.h"

namespace kforge::ref::internal {

const AtenOpTable& aten_ops() {
  static const AtenOpTable kTable = [] {
    AtenOpTable t;
    add_main_loop_ops(t);
    add_pointwise_ops(t);
    add_norm_ops(t);
    add_reduction_ops(t);
    add_pooling_ops(t);
    add_layout_ops(t);
    return t;
  }();
  return kTable;
}

c10::optional<at::Tensor> optional_input(const Tensors& in, size_t i) {
  if (in.size() > i) return in[i];
  return c10::nullopt;
}

at::Scalar to_scalar(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return at::Scalar(value.get<int64_t>());
  if (value.is_boolean()) return at::Scalar(value.get<bool>());
  return at::Scalar(value.get<double>());
}

}  // namespace kforge::ref::internal
