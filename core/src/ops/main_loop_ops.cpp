// Main-loop ops: the GEMM- and convolution-shaped work that dominates a task's
// time. Shapes follow torch.matmul / torch.nn.functional exactly.
#include <algorithm>

#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

std::string shape_with(const std::vector<std::string>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i];
  return s + "]";
}

TensorType infer_matmul(const Types& in, const json&) {
  require_floating(in, 0);
  require_same_dtype(in, 0, 1);
  const auto& a = in[0].shape;
  const auto& b = in[1].shape;
  if (a.empty() || b.empty()) fail("both inputs need at least one dim: " + arg_shape(in, 0) + ", " + arg_shape(in, 1));
  const int64_t k_a = a.back();
  const int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k_a != k_b) {
    std::vector<std::string> expected;
    if (b.size() > 2) expected.push_back("...");
    expected.push_back(std::to_string(k_a));
    if (b.size() >= 2) expected.push_back("N");
    fail("inner dimensions differ: " + arg_shape(in, 0) + " and " + arg_shape(in, 1) + "; expected " +
         value_name(in, 1, "in[1]") + " of shape " + shape_with(expected));
  }
  const std::vector<int64_t> batch_a(a.begin(), a.end() - std::min<long>(2, static_cast<long>(a.size())));
  const std::vector<int64_t> batch_b(b.begin(), b.end() - std::min<long>(2, static_cast<long>(b.size())));
  bool ok = true;
  std::vector<int64_t> out = broadcast_shapes(batch_a, batch_b, &ok);
  if (!ok) {
    fail("batch dimensions do not broadcast: " + arg_shape(in, 0) + " and " + arg_shape(in, 1) +
         " (all but the last two dims must be equal or 1)");
  }
  if (a.size() >= 2) out.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out.push_back(b.back());
  return {out, in[0].dtype};
}

double matmul_flops(const Types& in, const TensorType& out, const json&) {
  return 2.0 * static_cast<double>(out.numel()) * static_cast<double>(in[0].shape.back());
}

TensorType infer_bmm(const Types& in, const json&) {
  require_floating(in, 0);
  require_same_dtype(in, 0, 1);
  require_rank_in(in, 0, {3}, "a 3-d tensor [B, M, K]");
  require_rank_in(in, 1, {3}, "a 3-d tensor [B, K, N]");
  const auto& a = in[0].shape;
  const auto& b = in[1].shape;
  if (a[0] != b[0] || a[2] != b[1]) {
    fail("shapes do not match: " + arg_shape(in, 0) + " and " + arg_shape(in, 1) + "; expected " +
         value_name(in, 1, "in[1]") + " of shape " + shape_with({std::to_string(a[0]), std::to_string(a[2]), "N"}));
  }
  return {{a[0], a[1], b[2]}, in[0].dtype};
}

TensorType infer_linear(const Types& in, const json&) {
  require_floating(in, 0);
  for (size_t i = 1; i < in.size(); ++i) require_same_dtype(in, 0, i);
  if (in[0].shape.empty()) fail(arg_shape(in, 0) + "; expected at least one dim [..., in_features]");
  const int64_t k = in[0].shape.back();
  if (in[1].shape.size() != 2 || in[1].shape[1] != k) {
    fail("weight does not match the input: " + arg_shape(in, 0) + " and " + arg_shape(in, 1) + "; expected " +
         value_name(in, 1, "in[1]") + " of shape [out_features, " + std::to_string(k) + "] (torch layout)");
  }
  const int64_t n = in[1].shape[0];
  if (in.size() == 3 && in[2].shape != std::vector<int64_t>{n}) {
    fail("bias does not match the weight: " + arg_shape(in, 2) + "; expected [" + std::to_string(n) + "]");
  }
  std::vector<int64_t> out = in[0].shape;
  out.back() = n;
  return {out, in[0].dtype};
}

double linear_flops(const Types& in, const TensorType& out, const json&) {
  const double mac = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(in[0].shape.back());
  return mac + (in.size() == 3 ? static_cast<double>(out.numel()) : 0.0);
}

std::string spatial_dims_text(size_t n) {
  static const char* kNames[] = {"L", "H, W", "D, H, W"};
  return kNames[n - 1];
}

std::string kernel_dims_text(size_t n) {
  static const char* kNames[] = {"kL", "kH, kW", "kD, kH, kW"};
  return kNames[n - 1];
}

struct ConvGeometry {
  bool batched = true;
  int64_t channels = 0;  // of the input
  std::vector<int64_t> spatial;
  std::vector<int64_t> kernel;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
};

ConvGeometry read_conv(const Types& in, const json& attrs, size_t n, bool transposed) {
  require_floating(in, 0);
  for (size_t i = 1; i < in.size(); ++i) require_same_dtype(in, 0, i);
  const std::string sp = spatial_dims_text(n);
  require_rank_in(in, 0, {n + 1, n + 2}, "(N, C_in, " + sp + ") or unbatched (C_in, " + sp + ")");
  ConvGeometry g;
  g.batched = in[0].shape.size() == n + 2;
  g.channels = in[0].shape[g.batched ? 1 : 0];
  g.spatial.assign(in[0].shape.end() - static_cast<long>(n), in[0].shape.end());
  const std::string wlayout = transposed ? "(C_in, C_out/groups, " + kernel_dims_text(n) + ")"
                                         : "(C_out, C_in/groups, " + kernel_dims_text(n) + ")";
  require_rank_in(in, 1, {n + 2}, "a weight of layout " + wlayout);
  g.kernel.assign(in[1].shape.begin() + 2, in[1].shape.end());
  g.stride = get_int_tuple(attrs, "stride", n);
  g.padding = get_int_tuple(attrs, "padding", n);
  g.dilation = get_int_tuple(attrs, "dilation", n);
  g.groups = get_int(attrs, "groups");
  if (transposed) g.output_padding = get_int_tuple(attrs, "output_padding", n);
  for (size_t i = 0; i < n; ++i) {
    if (g.stride[i] < 1) fail("attr \"stride\" must be positive, got " + shape_to_string(g.stride));
    if (g.dilation[i] < 1) fail("attr \"dilation\" must be positive, got " + shape_to_string(g.dilation));
    if (g.padding[i] < 0) fail("attr \"padding\" must be >= 0, got " + shape_to_string(g.padding));
    if (transposed &&
        (g.output_padding[i] < 0 || (g.output_padding[i] >= g.stride[i] && g.output_padding[i] >= g.dilation[i]))) {
      fail("attr \"output_padding\" = " + shape_to_string(g.output_padding) +
           " must be >= 0 and smaller than either stride or dilation");
    }
  }
  if (g.groups < 1) fail("attr \"groups\" must be positive, got " + std::to_string(g.groups));
  if (g.channels % g.groups != 0) {
    fail("attr \"groups\" = " + std::to_string(g.groups) + " does not divide the " + std::to_string(g.channels) +
         " input channels of " + arg_of_shape(in, 0));
  }
  return g;
}

TensorType conv_output(const Types& in, const ConvGeometry& g, int64_t out_channels) {
  if (in.size() == 3 && in[2].shape != std::vector<int64_t>{out_channels}) {
    fail("bias does not match the output channels: " + arg_shape(in, 2) + "; expected [" +
         std::to_string(out_channels) + "]");
  }
  std::vector<int64_t> out;
  if (g.batched) out.push_back(in[0].shape[0]);
  out.push_back(out_channels);
  return {out, in[0].dtype};
}

TensorType infer_conv(const Types& in, const json& attrs, size_t n) {
  const ConvGeometry g = read_conv(in, attrs, n, false);
  const auto& w = in[1].shape;
  if (w[1] * g.groups != g.channels) {
    fail("weight does not match the input channels: " + arg_shape(in, 0) + " and " + arg_shape(in, 1) + "; expected " +
         value_name(in, 1, "in[1]") + " of shape [C_out, " + std::to_string(g.channels / g.groups) + ", " +
         kernel_dims_text(n) + "] (C_in/groups = " + std::to_string(g.channels) + "/" + std::to_string(g.groups) + ")");
  }
  if (w[0] % g.groups != 0) {
    fail("attr \"groups\" = " + std::to_string(g.groups) + " does not divide the " + std::to_string(w[0]) +
         " output channels of " + arg_of_shape(in, 1));
  }
  TensorType out = conv_output(in, g, w[0]);
  for (size_t i = 0; i < n; ++i) {
    const int64_t extent = g.spatial[i] + 2 * g.padding[i] - g.dilation[i] * (g.kernel[i] - 1) - 1;
    if (extent < 0) {
      fail("the kernel " + shape_to_string(g.kernel) + " (dilation " + shape_to_string(g.dilation) +
           ") is larger than the padded input " + arg_of_shape(in, 0) + " (padding " + shape_to_string(g.padding) +
           ")");
    }
    out.shape.push_back(extent / g.stride[i] + 1);
  }
  return out;
}

TensorType infer_conv_transpose(const Types& in, const json& attrs, size_t n) {
  const ConvGeometry g = read_conv(in, attrs, n, true);
  const auto& w = in[1].shape;
  if (w[0] != g.channels) {
    fail("weight does not match the input channels: " + arg_shape(in, 0) + " and " + arg_shape(in, 1) + "; expected " +
         value_name(in, 1, "in[1]") + " of shape [" + std::to_string(g.channels) + ", C_out/groups, " +
         kernel_dims_text(n) + "] (transposed-conv layout)");
  }
  TensorType out = conv_output(in, g, w[1] * g.groups);
  for (size_t i = 0; i < n; ++i) {
    const int64_t size = (g.spatial[i] - 1) * g.stride[i] - 2 * g.padding[i] + g.dilation[i] * (g.kernel[i] - 1) +
                         g.output_padding[i] + 1;
    if (size < 1) {
      fail("the output would be empty along spatial dim " + std::to_string(i) + " (padding " +
           shape_to_string(g.padding) + " is too large for " + arg_of_shape(in, 0) + ")");
    }
    out.shape.push_back(size);
  }
  return out;
}

double conv_flops(const Types& in, const TensorType& out, const json& attrs) {
  // Each output element is a dot product over C_in/groups * prod(kernel).
  const auto& w = in[1].shape;
  const double per_out = static_cast<double>(w[1]) * static_cast<double>(product(w, 2));
  return 2.0 * static_cast<double>(out.numel()) * per_out;
}

double conv_transpose_flops(const Types& in, const TensorType& out, const json& attrs) {
  // Each input element scatters into C_out/groups * prod(kernel) outputs.
  const auto& w = in[1].shape;
  const double per_in = static_cast<double>(w[1]) * static_cast<double>(product(w, 2));
  return 2.0 * static_cast<double>(in[0].numel()) * per_in;
}

std::vector<AttrSchema> conv_attrs(bool transposed) {
  std::vector<AttrSchema> attrs = {
      attr_int_list("stride", 1, "step of the kernel per spatial dim (int or list)"),
      attr_int_list("padding", 0, "implicit zero padding per side (int or list)"),
  };
  if (transposed) {
    attrs.push_back(attr_int_list("output_padding", 0, "extra size added to one side of the output (int or list)"));
  }
  attrs.push_back(attr_int("groups", 1, "number of blocked connections from input to output channels"));
  attrs.push_back(attr_int_list("dilation", 1, "spacing between kernel elements (int or list)"));
  return attrs;
}

std::string py_conv(const std::string& fn, const Args& args, const json& attrs, bool transposed) {
  Args call = {args[0], args[1], args.size() == 3 ? args[2] : "None"};
  std::vector<std::string> names = {"stride", "padding"};
  if (transposed) names.push_back("output_padding");
  names.push_back("groups");
  names.push_back("dilation");
  return py_call(fn, call, py_kwargs(attrs, names));
}

void add_conv(OpRegistry& r, size_t n, bool transposed) {
  OpSchema s;
  const std::string dims = std::to_string(n) + "d";
  s.name = (transposed ? "conv_transpose" : "conv") + dims;
  s.category = OpCategory::kMainLoop;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = conv_attrs(transposed);
  const std::string sp = spatial_dims_text(n);
  s.doc = transposed ? "transposed " + dims + " convolution (F.conv_transpose" + dims + "): x (N, C_in, " + sp +
                           "), w (C_in, C_out/groups, " + kernel_dims_text(n) + "), optional bias (C_out)"
                     : dims + " convolution (F.conv" + dims + "): x (N, C_in, " + sp + "), w (C_out, C_in/groups, " +
                           kernel_dims_text(n) + "), optional bias (C_out)";
  if (transposed) {
    s.infer = [n](const Types& in, const json& a) { return infer_conv_transpose(in, a, n); };
    s.flops = conv_transpose_flops;
  } else {
    s.infer = [n](const Types& in, const json& a) { return infer_conv(in, a, n); };
    s.flops = conv_flops;
  }
  const std::string fn = "F." + s.name;
  s.python = [fn, transposed](const Args& args, const Types&, const json& a) {
    return py_conv(fn, args, a, transposed);
  };
  r.add(std::move(s));
}

}  // namespace

void register_main_loop_ops(OpRegistry& r) {
  OpSchema matmul;
  matmul.name = "matmul";
  matmul.category = OpCategory::kMainLoop;
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.doc = "torch.matmul(a, b): 1-d/2-d products and batched products with broadcast batch dims; b is [K, N]";
  matmul.infer = infer_matmul;
  matmul.flops = matmul_flops;
  matmul.python = [](const Args& args, const Types&, const json&) { return py_call("torch.matmul", args); };
  r.add(std::move(matmul));

  OpSchema bmm;
  bmm.name = "bmm";
  bmm.category = OpCategory::kMainLoop;
  bmm.min_inputs = bmm.max_inputs = 2;
  bmm.doc = "torch.bmm(a, b): batched product of [B, M, K] and [B, K, N]";
  bmm.infer = infer_bmm;
  bmm.flops = matmul_flops;
  bmm.python = [](const Args& args, const Types&, const json&) { return py_call("torch.bmm", args); };
  r.add(std::move(bmm));

  OpSchema linear;
  linear.name = "linear";
  linear.category = OpCategory::kMainLoop;
  linear.min_inputs = 2;
  linear.max_inputs = 3;
  linear.doc = "F.linear(x, w, b): x [..., in] @ w[out, in]^T + b[out] (nn.Linear layout)";
  linear.infer = infer_linear;
  linear.flops = linear_flops;
  linear.python = [](const Args& args, const Types&, const json&) { return py_call("F.linear", args); };
  r.add(std::move(linear));

  for (size_t n = 1; n <= 3; ++n) {
    add_conv(r, n, false);
    add_conv(r, n, true);
  }
}

}  // namespace kforge::ops
