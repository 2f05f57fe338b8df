// Pooling, with the stride defaulting to the window as in torch.
#include "ops/op_helpers.h"
#include "reference/aten_ops.h"

namespace kforge::ref::internal {
namespace {

using ops::get_bool;
using ops::get_int;
using ops::get_int_tuple;
using ops::has;

struct Window {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

Window window_of(const json& a, size_t n, bool is_max) {
  Window w;
  w.kernel = get_int_tuple(a, "kernel_size", n);
  w.stride = has(a, "stride") ? get_int_tuple(a, "stride", n) : w.kernel;
  w.padding = get_int_tuple(a, "padding", n);
  w.dilation = is_max ? get_int_tuple(a, "dilation", n) : std::vector<int64_t>(n, 1);
  w.ceil_mode = get_bool(a, "ceil_mode");
  return w;
}

at::Tensor max_pool(const at::Tensor& x, const json& a, size_t n) {
  const Window w = window_of(a, n, true);
  switch (n) {
    case 1:
      return at::max_pool1d(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
    case 2:
      return at::max_pool2d(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
    default:
      return at::max_pool3d(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
  }
}

at::Tensor avg_pool(const at::Tensor& x, const json& a, size_t n) {
  const Window w = window_of(a, n, false);
  const bool include_pad = get_bool(a, "count_include_pad");
  c10::optional<int64_t> divisor;
  if (n > 1 && has(a, "divisor_override")) divisor = get_int(a, "divisor_override");
  switch (n) {
    case 1:
      return at::avg_pool1d(x, w.kernel, w.stride, w.padding, w.ceil_mode, include_pad);
    case 2:
      return at::avg_pool2d(x, w.kernel, w.stride, w.padding, w.ceil_mode, include_pad, divisor);
    default:
      return at::avg_pool3d(x, w.kernel, w.stride, w.padding, w.ceil_mode, include_pad, divisor);
  }
}

}  // namespace

void add_pooling_ops(AtenOpTable& t) {
  for (size_t n = 1; n <= 3; ++n) {
    const std::string dims = std::to_string(n) + "d";
    t["max_pool" + dims] = [n](const Tensors& in, const json& a) { return max_pool(in[0], a, n); };
    t["avg_pool" + dims] = [n](const Tensors& in, const json& a) { return avg_pool(in[0], a, n); };
  }
  t["adaptive_avg_pool1d"] = [](const Tensors& in, const json& a) {
    return at::adaptive_avg_pool1d(in[0], get_int_tuple(a, "output_size", 1));
  };
  t["adaptive_avg_pool2d"] = [](const Tensors& in, const json& a) {
    return at::adaptive_avg_pool2d(in[0], get_int_tuple(a, "output_size", 2));
  };
  t["adaptive_avg_pool3d"] = [](const Tensors& in, const json& a) {
    return at::adaptive_avg_pool3d(in[0], get_int_tuple(a, "output_size", 3));
  };
  t["adaptive_max_pool2d"] = [](const Tensors& in, const json& a) {
    return std::get<0>(at::adaptive_max_pool2d(in[0], get_int_tuple(a, "output_size", 2)));
  };
}

}  // namespace kforge::ref::internal
