// Normalizations. Optional affine inputs follow the input: (x, weight, bias);
// a bias without a weight is not expressible (pass ones as the weight).
// batch_norm and instance_norm use the statistics of the batch itself, which
// is what a freshly constructed nn.BatchNorm*/InstanceNorm* computes in
// training mode (how KernelBench calls them).
#include <algorithm>

#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

void require_affine(const Types& in, size_t i, const std::vector<int64_t>& expected, const std::string& role) {
  if (in.size() > i && in[i].shape != expected) {
    fail(role + " does not match: " + arg_shape(in, i) + "; expected " + shape_to_string(expected));
  }
}

void require_affine_dtypes(const Types& in) {
  require_floating(in, 0);
  for (size_t i = 1; i < in.size(); ++i) require_same_dtype(in, 0, i);
}

// How many trailing dims layer_norm/rms_norm normalize: attr normalized_shape
// (must match the trailing dims), attr normalized_ndim, the weight's rank, or 1.
int64_t trailing_norm_ndim(const Types& in, const json& attrs) {
  const auto& shape = in[0].shape;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  int64_t k = -1;
  if (has(attrs, "normalized_shape")) {
    const std::vector<int64_t> ns = get_int_list(attrs, "normalized_shape");
    k = static_cast<int64_t>(ns.size());
    if (k > ndim || !std::equal(ns.begin(), ns.end(), shape.end() - k)) {
      fail("attr \"normalized_shape\" = " + shape_to_string(ns) + " does not match the trailing dims of " +
           arg_of_shape(in, 0));
    }
  }
  if (has(attrs, "normalized_ndim")) {
    const int64_t n = get_int(attrs, "normalized_ndim");
    if (n < 1 || n > ndim) {
      fail("attr \"normalized_ndim\" = " + std::to_string(n) + " must be in [1, " + std::to_string(ndim) + "] for " +
           arg_of_shape(in, 0));
    }
    if (k >= 0 && k != n) fail("attrs \"normalized_shape\" and \"normalized_ndim\" disagree");
    k = n;
  }
  if (k < 0) k = in.size() > 1 ? static_cast<int64_t>(in[1].shape.size()) : 1;
  if (k < 1 || k > ndim) fail(arg_shape(in, 0) + "; cannot normalize its last " + std::to_string(k) + " dims");
  return k;
}

TensorType infer_trailing_norm(const Types& in, const json& attrs) {
  require_affine_dtypes(in);
  const int64_t k = trailing_norm_ndim(in, attrs);
  const std::vector<int64_t> normalized(in[0].shape.end() - k, in[0].shape.end());
  require_affine(in, 1, normalized, "weight");
  require_affine(in, 2, normalized, "bias");
  return {in[0].shape, in[0].dtype};
}

int64_t channels_of(const Types& in, size_t min_rank, const std::string& layout) {
  require_affine_dtypes(in);
  if (in[0].shape.size() < min_rank) fail(arg_shape(in, 0) + "; expected " + layout);
  const int64_t c = in[0].shape[1];
  require_affine(in, 1, {c}, "weight");
  require_affine(in, 2, {c}, "bias");
  return c;
}

TensorType infer_group_norm(const Types& in, const json& attrs) {
  const int64_t c = channels_of(in, 2, "(N, C, *)");
  const int64_t g = get_int(attrs, "num_groups");
  if (g < 1 || c % g != 0) {
    fail("attr \"num_groups\" = " + std::to_string(g) + " must be positive and divide the " + std::to_string(c) +
         " channels of " + arg_of_shape(in, 0));
  }
  return {in[0].shape, in[0].dtype};
}

TensorType infer_batch_norm(const Types& in, const json&) {
  const int64_t c = channels_of(in, 2, "(N, C) or (N, C, *)");
  if (in[0].numel() / c < 2) {
    fail(arg_shape(in, 0) + "; batch statistics need more than one value per channel");
  }
  return {in[0].shape, in[0].dtype};
}

TensorType infer_instance_norm(const Types& in, const json&) {
  channels_of(in, 3, "(N, C, *spatial) with at least one spatial dim");
  if (product(in[0].shape, 2) < 2) fail(arg_shape(in, 0) + "; instance statistics need more than one spatial value");
  return {in[0].shape, in[0].dtype};
}

std::string affine_arg(const Args& args, size_t i) { return args.size() > i ? args[i] : "None"; }

std::string trailing_shape_py(const Args& args, const Types& in, const json& attrs) {
  return args[0] + ".shape[-" + std::to_string(trailing_norm_ndim(in, attrs)) + ":]";
}

std::string trailing_dims_py(const Types& in, const json& attrs) {
  const int64_t k = trailing_norm_ndim(in, attrs);
  std::string s = "(";
  for (int64_t i = k; i >= 1; --i) s += "-" + std::to_string(i) + (i > 1 ? ", " : (k == 1 ? "," : ""));
  return s + ")";
}

std::vector<AttrSchema> trailing_attrs() {
  return {attr_optional("normalized_ndim", "int", "number of trailing dims to normalize (default: weight rank or 1)"),
          attr_optional("normalized_shape", "int_list", "the trailing shape to normalize, as in torch"),
          attr_float("eps", 1e-5, "added to the variance for stability")};
}

// Normalized over the trailing dims of each sample.
void register_trailing_norms(OpRegistry& r) {
  OpSchema ln;
  ln.name = "layer_norm";
  ln.category = OpCategory::kNorm;
  ln.min_inputs = 1;
  ln.max_inputs = 3;
  ln.attrs = trailing_attrs();
  ln.doc = "(x - mean) / sqrt(var + eps) * weight + bias over the trailing dims; inputs x, [weight], [bias]";
  ln.infer = infer_trailing_norm;
  ln.flops = flops_per_output(8);
  ln.python = [](const Args& args, const Types& in, const json& attrs) {
    return py_call("F.layer_norm",
                   {args[0], trailing_shape_py(args, in, attrs), affine_arg(args, 1), affine_arg(args, 2)},
                   py_kwargs(attrs, {"eps"}));
  };
  r.add(std::move(ln));

  OpSchema rms;
  rms.name = "rms_norm";
  rms.category = OpCategory::kNorm;
  rms.min_inputs = 1;
  rms.max_inputs = 2;
  rms.attrs = trailing_attrs();
  rms.doc = "x * rsqrt(mean(x^2 over the trailing dims) + eps) * weight; inputs x, [weight]";
  rms.infer = infer_trailing_norm;
  rms.flops = flops_per_output(4);
  rms.python = [](const Args& args, const Types& in, const json& attrs) {
    std::string s = args[0] + " * torch.rsqrt(" + args[0] + ".pow(2).mean(dim=" + trailing_dims_py(in, attrs) +
                    ", keepdim=True) + " + py_literal(attrs.at("eps")) + ")";
    if (args.size() > 1) s += " * " + args[1];
    return s;
  };
  r.add(std::move(rms));
}

// Normalized per channel or group of channels.
void register_channel_norms(OpRegistry& r) {
  OpSchema gn;
  gn.name = "group_norm";
  gn.category = OpCategory::kNorm;
  gn.min_inputs = 1;
  gn.max_inputs = 3;
  gn.attrs = {attr_required("num_groups", "int", "number of channel groups (divides C)"),
              attr_float("eps", 1e-5, "added to the variance for stability")};
  gn.doc = "normalizes each group of channels of (N, C, *) per sample; inputs x, [weight (C)], [bias (C)]";
  gn.infer = infer_group_norm;
  gn.flops = flops_per_output(8);
  gn.python = [](const Args& args, const Types&, const json& attrs) {
    return py_call("F.group_norm",
                   {args[0], py_literal(attrs.at("num_groups")), affine_arg(args, 1), affine_arg(args, 2)},
                   py_kwargs(attrs, {"eps"}));
  };
  r.add(std::move(gn));

  OpSchema bn;
  bn.name = "batch_norm";
  bn.category = OpCategory::kNorm;
  bn.min_inputs = 1;
  bn.max_inputs = 3;
  bn.attrs = {attr_float("eps", 1e-5, "added to the variance for stability")};
  bn.doc =
      "normalizes each channel of (N, C, *) with the batch's own mean and biased variance (training-mode "
      "nn.BatchNorm); inputs x, [weight (C)], [bias (C)]";
  bn.infer = infer_batch_norm;
  bn.flops = flops_per_output(8);
  bn.python = [](const Args& args, const Types&, const json& attrs) {
    return py_call("F.batch_norm", {args[0], "None", "None", affine_arg(args, 1), affine_arg(args, 2)},
                   "training=True, eps=" + py_literal(attrs.at("eps")));
  };
  r.add(std::move(bn));

  OpSchema in_norm;
  in_norm.name = "instance_norm";
  in_norm.category = OpCategory::kNorm;
  in_norm.min_inputs = 1;
  in_norm.max_inputs = 3;
  in_norm.attrs = {attr_float("eps", 1e-5, "added to the variance for stability")};
  in_norm.doc =
      "normalizes each (sample, channel) of (N, C, *spatial) over its spatial values; inputs x, "
      "[weight (C)], [bias (C)]";
  in_norm.infer = infer_instance_norm;
  in_norm.flops = flops_per_output(8);
  in_norm.python = [](const Args& args, const Types&, const json& attrs) {
    return py_call("F.instance_norm", {args[0], "None", "None", affine_arg(args, 1), affine_arg(args, 2)},
                   "use_input_stats=True, eps=" + py_literal(attrs.at("eps")));
  };
  r.add(std::move(in_norm));
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  register_trailing_norms(r);
  register_channel_norms(r);
}

}  // namespace kforge::ops
