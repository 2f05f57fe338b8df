// matmul, bmm, linear and the convolutions, as torch.nn.functional calls them.
#include "ops/op_helpers.h"
#include "reference/aten_ops.h"

namespace kforge::ref::internal {
namespace {

using ops::get_int;
using ops::get_int_tuple;

at::Tensor conv(const Tensors& in, const json& a, size_t n) {
  const auto stride = get_int_tuple(a, "stride", n);
  const auto padding = get_int_tuple(a, "padding", n);
  const auto dilation = get_int_tuple(a, "dilation", n);
  const int64_t groups = get_int(a, "groups");
  const auto bias = optional_input(in, 2);
  switch (n) {
    case 1:
      return at::conv1d(in[0], in[1], bias, stride, padding, dilation, groups);
    case 2:
      return at::conv2d(in[0], in[1], bias, stride, padding, dilation, groups);
    default:
      return at::conv3d(in[0], in[1], bias, stride, padding, dilation, groups);
  }
}

at::Tensor conv_transpose(const Tensors& in, const json& a, size_t n) {
  const auto stride = get_int_tuple(a, "stride", n);
  const auto padding = get_int_tuple(a, "padding", n);
  const auto output_padding = get_int_tuple(a, "output_padding", n);
  const auto dilation = get_int_tuple(a, "dilation", n);
  const int64_t groups = get_int(a, "groups");
  const auto bias = optional_input(in, 2);
  switch (n) {
    case 1:
      return at::conv_transpose1d(in[0], in[1], bias, stride, padding, output_padding, groups, dilation);
    case 2:
      return at::conv_transpose2d(in[0], in[1], bias, stride, padding, output_padding, groups, dilation);
    default:
      return at::conv_transpose3d(in[0], in[1], bias, stride, padding, output_padding, groups, dilation);
  }
}

}  // namespace

void add_main_loop_ops(AtenOpTable& t) {
  t["matmul"] = [](const Tensors& in, const json&) { return at::matmul(in[0], in[1]); };
  t["bmm"] = [](const Tensors& in, const json&) { return at::bmm(in[0], in[1]); };
  t["linear"] = [](const Tensors& in, const json&) { return at::linear(in[0], in[1], optional_input(in, 2)); };
  for (size_t n = 1; n <= 3; ++n) {
    const std::string dims = std::to_string(n) + "d";
    t["conv" + dims] = [n](const Tensors& in, const json& a) { return conv(in, a, n); };
    t["conv_transpose" + dims] = [n](const Tensors& in, const json& a) { return conv_transpose(in, a, n); };
  }
}

}  // namespace kforge::ref::internal
