// Activations: elementwise nonlinearities with torch.nn.functional semantics.
// All keep the input's shape and dtype.
#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

struct ActivationDef {
  std::string name;
  std::string doc;
  double flops_per_element;
  std::vector<AttrSchema> attrs;
  std::string py_fn;              // called as py_fn(x, <attrs as kwargs>)
  bool integers_allowed = false;  // relu works on integer tensors in torch
};

TensorType infer_activation(const Types& in, bool integers_allowed) {
  if (integers_allowed) {
    if (in[0].dtype == DType::kBool) fail(arg_label(in, 0) + " is bool; expected a numeric tensor");
  } else {
    require_floating(in, 0);
  }
  return {in[0].shape, in[0].dtype};
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  const std::vector<ActivationDef> defs = {
      {"relu", "max(x, 0)", 1, {}, "F.relu", true},
      {"relu6", "min(max(x, 0), 6)", 2, {}, "F.relu6"},
      {"leaky_relu",
       "x if x >= 0 else negative_slope * x",
       2,
       {attr_float("negative_slope", 0.01, "slope for x < 0")},
       "F.leaky_relu"},
      {"elu",
       "x if x > 0 else alpha * (exp(x) - 1)",
       4,
       {attr_float("alpha", 1.0, "scale of the negative part")},
       "F.elu"},
      {"selu", "scale * (max(0, x) + min(0, alpha * (exp(x) - 1))) with the SELU constants", 5, {}, "F.selu"},
      {"gelu",
       "x * Phi(x) (exact erf form, or the tanh approximation)",
       10,
       {attr_string("approximate", "none", {"none", "tanh"}, "\"none\" (erf) or \"tanh\" approximation")},
       "F.gelu"},
      {"silu", "x * sigmoid(x) (swish)", 4, {}, "F.silu"},
      {"mish", "x * tanh(softplus(x))", 8, {}, "F.mish"},
      {"sigmoid", "1 / (1 + exp(-x))", 4, {}, "torch.sigmoid"},
      {"tanh", "hyperbolic tangent", 4, {}, "torch.tanh"},
      {"softplus",
       "log(1 + exp(beta * x)) / beta; linear where beta * x > threshold",
       4,
       {attr_float("beta", 1.0, "sharpness"), attr_float("threshold", 20.0, "beta * x above which it is linear")},
       "F.softplus"},
      {"softsign", "x / (1 + |x|)", 3, {}, "F.softsign"},
      {"hardswish", "x * relu6(x + 3) / 6", 4, {}, "F.hardswish"},
      {"hardsigmoid", "relu6(x + 3) / 6", 3, {}, "F.hardsigmoid"},
      {"hardtanh",
       "clamp(x, min_val, max_val)",
       2,
       {attr_float("min_val", -1.0, "lower bound"), attr_float("max_val", 1.0, "upper bound")},
       "F.hardtanh"},
  };
  for (const auto& d : defs) {
    OpSchema s;
    s.name = d.name;
    s.category = OpCategory::kActivation;
    s.attrs = d.attrs;
    s.doc = d.doc;
    const bool ints = d.integers_allowed;
    const bool is_hardtanh = d.name == "hardtanh";
    s.infer = [ints, is_hardtanh](const Types& in, const json& attrs) {
      if (is_hardtanh && !(get_float(attrs, "min_val") < get_float(attrs, "max_val"))) {
        fail("attr \"min_val\" (" + py_literal(attrs.at("min_val")) + ") must be below \"max_val\" (" +
             py_literal(attrs.at("max_val")) + ")");
      }
      return infer_activation(in, ints);
    };
    s.flops = flops_per_output(d.flops_per_element);
    std::vector<std::string> names;
    for (const auto& a : d.attrs) names.push_back(a.name);
    const std::string fn = d.py_fn;
    s.python = [fn, names](const Args& args, const Types&, const json& attrs) {
      return py_call(fn, args, py_kwargs(attrs, names));
    };
    r.add(std::move(s));
  }
}

}  // namespace kforge::ops
