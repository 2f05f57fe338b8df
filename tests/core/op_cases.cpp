#include "op_cases.h"

#include <cmath>

#include "op_cases_support.h"

namespace kforge::testing {
namespace internal {

void add_arithmetic_cases(const AddCase& add) {
  const TensorSpec x2 = tensor("x", {4, 33});

  // ---- main loop ----
  add("matmul_2d",
      single_op_task("matmul", {tensor("x", {8, 16})}, {}, {tensor("w", {16, 12}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) { return at::mm(in[0], in[1]); }), 1e-4);
  add("matmul_broadcast", single_op_task("matmul", {tensor("a", {2, 1, 4, 6}), tensor("b", {3, 6, 5})}),
      one([](const Tensors& in) {
        at::Tensor a = in[0].expand({2, 3, 4, 6}).reshape({6, 4, 6});
        at::Tensor b = in[1].expand({2, 3, 6, 5}).reshape({6, 6, 5});
        return at::bmm(a, b).reshape({2, 3, 4, 5});
      }),
      1e-4);
  add("matmul_vector", single_op_task("matmul", {tensor("a", {6}), tensor("b", {6, 3})}),
      one([](const Tensors& in) { return at::mm(in[0].unsqueeze(0), in[1]).squeeze(0); }), 1e-4);
  add("bmm", single_op_task("bmm", {tensor("a", {3, 4, 5}), tensor("b", {3, 5, 6})}), one([](const Tensors& in) {
        std::vector<at::Tensor> parts;
        for (int64_t i = 0; i < 3; ++i) parts.push_back(at::mm(in[0][i], in[1][i]));
        return at::stack(parts);
      }),
      1e-4);
  add("linear_bias",
      single_op_task("linear", {tensor("x", {2, 3, 8})}, {},
                     {tensor("w", {6, 8}, DType::kFloat32, "kaiming_uniform"),
                      tensor("b", {6}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) { return at::matmul(in[0], in[1].t()) + in[2]; }), 1e-4);
  add("linear_nobias",
      single_op_task("linear", {tensor("x", {5, 8})}, {}, {tensor("w", {3, 8}, DType::kFloat32, "xavier_uniform")}),
      one([](const Tensors& in) { return at::mm(in[0], in[1].t()); }), 1e-4);
  add("conv1d",
      single_op_task("conv1d", {tensor("x", {2, 4, 16})}, {{"stride", 2}, {"padding", 1}},
                     {tensor("w", {6, 4, 3}, DType::kFloat32, "kaiming_uniform"),
                      tensor("b", {6}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) {
        // im2col by hand: pad, take windows, contract with the weight.
        at::Tensor xp = at::constant_pad_nd(in[0], {1, 1});
        at::Tensor cols = xp.unfold(2, 3, 2);  // [N, C, L_out, k]
        return at::einsum("nclk,ock->nol", {cols, in[1]}) + in[2].reshape({1, 6, 1});
      }),
      1e-4);
  add("conv2d_groups_dilation",
      single_op_task("conv2d", {tensor("x", {2, 4, 10, 10})},
                     {{"groups", 2}, {"dilation", 2}, {"padding", json::array({1, 2})}},
                     {tensor("w", {6, 2, 3, 3}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) {
        return at::conv2d(in[0], in[1], c10::nullopt, {1, 1}, {1, 2}, {2, 2}, 2);
      }),
      1e-4);
  add("conv3d",
      single_op_task("conv3d", {tensor("x", {1, 2, 6, 6, 6})}, {},
                     {tensor("w", {4, 2, 3, 3, 3}, DType::kFloat32, "kaiming_uniform"),
                      tensor("b", {4}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) { return at::conv3d(in[0], in[1], in[2]); }), 1e-4);
  add("conv_transpose1d",
      single_op_task("conv_transpose1d", {tensor("x", {2, 4, 8})},
                     {{"stride", 2}, {"padding", 1}, {"output_padding", 1}},
                     {tensor("w", {4, 3, 3}, DType::kFloat32, "kaiming_uniform"),
                      tensor("b", {3}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) {
        // Scatter form: every input element adds x * w[c_in, :, :] at stride 2.
        at::Tensor full = at::zeros({2, 3, (8 - 1) * 2 + 3}, in[0].options());
        for (int64_t l = 0; l < 8; ++l) {
          at::Tensor contrib = at::einsum("nc,cok->nok", {in[0].select(2, l), in[1]});
          full.narrow(2, l * 2, 3).add_(contrib);
        }
        // padding 1 trims one element per side; output_padding 1 adds one at the end.
        at::Tensor out = at::zeros({2, 3, 16}, in[0].options());
        out.narrow(2, 0, 16).copy_(at::constant_pad_nd(full, {0, 1}).narrow(2, 1, 16));
        return out + in[2].reshape({1, 3, 1});
      }),
      1e-4);
  add("conv_transpose2d_groups",
      single_op_task("conv_transpose2d", {tensor("x", {1, 4, 5, 5})}, {{"stride", 2}, {"groups", 2}},
                     {tensor("w", {4, 2, 3, 3}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) {
        return at::conv_transpose2d(in[0], in[1], c10::nullopt, {2, 2}, {0, 0}, {0, 0}, 2, {1, 1});
      }),
      1e-4);
  add("conv_transpose3d",
      single_op_task("conv_transpose3d", {tensor("x", {1, 2, 3, 3, 3})}, {{"stride", 2}},
                     {tensor("w", {2, 3, 2, 2, 2}, DType::kFloat32, "kaiming_uniform")}),
      one([](const Tensors& in) {
        return at::conv_transpose3d(in[0], in[1], c10::nullopt, {2, 2, 2});
      }),
      1e-4);

  // ---- activations (inputs spread over [-12, 12] to reach every branch) ----
  add("relu", single_op_task("relu", {wide("x", {4, 33})}), unary_expect([](double v) { return v > 0 ? v : 0; }));
  add("relu_int", single_op_task("relu", {ints("x", {4, 9}, -5, 5)}),
      unary_expect([](double v) { return v > 0 ? v : 0; }));
  add("relu6", single_op_task("relu6", {wide("x", {4, 33})}),
      unary_expect([](double v) { return std::min(std::max(v, 0.0), 6.0); }));
  add("leaky_relu", single_op_task("leaky_relu", {wide("x", {4, 33})}, {{"negative_slope", 0.2}}),
      unary_expect([](double v) { return v >= 0 ? v : 0.2 * v; }));
  add("elu", single_op_task("elu", {wide("x", {4, 33})}, {{"alpha", 1.5}}),
      unary_expect([](double v) { return v > 0 ? v : 1.5 * (std::exp(v) - 1); }));
  add("selu", single_op_task("selu", {wide("x", {4, 33})}), unary_expect([](double v) {
        const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
        return scale * (std::max(0.0, v) + std::min(0.0, alpha * (std::exp(v) - 1)));
      }));
  add("gelu", single_op_task("gelu", {wide("x", {4, 33})}),
      unary_expect([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }));
  add("gelu_tanh", single_op_task("gelu", {wide("x", {4, 33})}, {{"approximate", "tanh"}}), unary_expect([](double v) {
        return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      }));
  add("silu", single_op_task("silu", {wide("x", {4, 33})}), unary_expect([](double v) { return v * sigmoid(v); }));
  add("mish", single_op_task("mish", {wide("x", {4, 33})}),
      unary_expect([](double v) { return v * std::tanh(std::log1p(std::exp(v))); }));
  add("sigmoid", single_op_task("sigmoid", {wide("x", {4, 33})}), unary_expect(sigmoid));
  add("tanh", single_op_task("tanh", {wide("x", {4, 33})}), unary_expect([](double v) { return std::tanh(v); }));
  add("softplus", single_op_task("softplus", {wide("x", {4, 33})}, {{"beta", 2.0}, {"threshold", 5.0}}),
      unary_expect([](double v) { return 2 * v > 5 ? v : std::log1p(std::exp(2 * v)) / 2; }));
  add("softsign", single_op_task("softsign", {wide("x", {4, 33})}),
      unary_expect([](double v) { return v / (1 + std::fabs(v)); }));
  add("hardswish", single_op_task("hardswish", {wide("x", {4, 33})}),
      unary_expect([](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }));
  add("hardsigmoid", single_op_task("hardsigmoid", {wide("x", {4, 33})}),
      unary_expect([](double v) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; }));
  add("hardtanh", single_op_task("hardtanh", {wide("x", {4, 33})}, {{"min_val", -2.0}, {"max_val", 1.5}}),
      unary_expect([](double v) { return std::min(std::max(v, -2.0), 1.5); }));

  // ---- elementwise ----
  add("add_broadcast_alpha", single_op_task("add", {tensor("a", {4, 1, 6}), tensor("b", {5, 1})}, {{"alpha", 2}}),
      one([](const Tensors& in) { return in[0] + 2 * in[1]; }));
  add("add_scalar", single_op_task("add", {x2}, {{"other", 0.5}, {"alpha", 2}}),
      unary_expect([](double v) { return v + 1.0; }));
  add("sub", single_op_task("sub", {tensor("a", {3, 5}), tensor("b", {5})}), one([](const Tensors& in) {
        return in[0] - in[1].unsqueeze(0).expand({3, 5});
      }));
  add("sub_scalar", single_op_task("sub", {x2}, {{"other", 1.5}}), unary_expect([](double v) { return v - 1.5; }));
  add("mul", single_op_task("mul", {tensor("a", {3, 5}), tensor("b", {3, 1})}), one([](const Tensors& in) {
        return in[0] * in[1].expand({3, 5});
      }));
  add("mul_int_scalar", single_op_task("mul", {ints("x", {3, 4}, -9, 9)}, {{"other", 3}}),
      unary_expect([](double v) { return 3 * v; }));
  add("mul_int_float_scalar", single_op_task("mul", {ints("x", {3, 4}, -9, 9)}, {{"other", 2.5}}),
      one([](const Tensors& in) { return pointwise(in[0].to(at::kFloat), [](double v) { return 2.5 * v; }); }));
  add("div", single_op_task("div", {tensor("a", {3, 5}), positive("b", {3, 5})}),
      one([](const Tensors& in) { return in[0] * at::reciprocal(in[1]); }), 1e-5);
  add("div_int", single_op_task("div", {ints("a", {3, 5}, -9, 9), ints("b", {3, 5}, 1, 5)}),
      one([](const Tensors& in) { return in[0].to(at::kFloat) / in[1].to(at::kFloat); }));
  add("maximum", single_op_task("maximum", {tensor("a", {3, 5}), tensor("b", {3, 5})}),
      one([](const Tensors& in) { return at::where(in[0] > in[1], in[0], in[1]); }));
  add("maximum_scalar", single_op_task("maximum", {x2}, {{"other", 0.3}}),
      unary_expect([](double v) { return std::max(v, 0.3); }));
  add("minimum", single_op_task("minimum", {tensor("a", {3, 5}), tensor("b", {3, 5})}),
      one([](const Tensors& in) { return at::where(in[0] < in[1], in[0], in[1]); }));
  add("minimum_scalar", single_op_task("minimum", {x2}, {{"other", -0.3}}),
      unary_expect([](double v) { return std::min(v, -0.3); }));
  add("pow", single_op_task("pow", {positive("a", {3, 5}), tensor("b", {3, 5})}),
      one([](const Tensors& in) { return at::exp(in[1] * at::log(in[0])); }), 1e-5);
  add("pow_scalar", single_op_task("pow", {x2}, {{"other", 3}}), unary_expect([](double v) { return v * v * v; }));
  const std::vector<std::pair<std::string, std::function<bool(int, int)>>> comparisons = {
      {"eq", [](int a, int b) { return a == b; }}, {"ne", [](int a, int b) { return a != b; }},
      {"lt", [](int a, int b) { return a < b; }},  {"le", [](int a, int b) { return a <= b; }},
      {"gt", [](int a, int b) { return a > b; }},  {"ge", [](int a, int b) { return a >= b; }},
  };
  for (const auto& [name, cmp] : comparisons) {
    auto f = cmp;
    add(name, single_op_task(name, {ints("a", {4, 6}, 0, 3), ints("b", {4, 6}, 0, 3)}), one([f](const Tensors& in) {
          at::Tensor a = in[0].contiguous(), b = in[1].contiguous();
          at::Tensor out = at::empty({4, 6}, at::kBool);
          for (int64_t i = 0; i < 24; ++i) {
            out.data_ptr<bool>()[i] = f(a.data_ptr<int32_t>()[i], b.data_ptr<int32_t>()[i]);
          }
          return out;
        }));
  }
  add("gt_scalar", single_op_task("gt", {x2}, {{"other", 0.25}}), one([](const Tensors& in) {
        return pointwise(in[0], [](double v) { return v > 0.25 ? 1.0 : 0.0; }).to(at::kBool);
      }));
  add("where",
      single_op_task("where", {tensor("c", {4, 6}, DType::kBool, "bernoulli"), tensor("a", {4, 6}), tensor("b", {6})}),
      one([](const Tensors& in) {
        at::Tensor m = in[0].to(at::kFloat);
        return m * in[1] + (1 - m) * in[2].expand({4, 6});
      }));
  add("clamp", single_op_task("clamp", {x2}, {{"min", -0.5}, {"max", 0.75}}),
      unary_expect([](double v) { return std::min(std::max(v, -0.5), 0.75); }));
  add("clamp_min_only", single_op_task("clamp", {x2}, {{"min", 0.1}}),
      unary_expect([](double v) { return std::max(v, 0.1); }));
  const std::vector<std::pair<std::string, std::function<double(double)>>> unaries = {
      {"abs", [](double v) { return std::fabs(v); }},
      {"neg", [](double v) { return -v; }},
      {"exp", [](double v) { return std::exp(v); }},
      {"log", [](double v) { return std::log(v); }},
      {"log1p", [](double v) { return std::log1p(v); }},
      {"sqrt", [](double v) { return std::sqrt(v); }},
      {"rsqrt", [](double v) { return 1 / std::sqrt(v); }},
      {"reciprocal", [](double v) { return 1 / v; }},
      {"square", [](double v) { return v * v; }},
      {"sin", [](double v) { return std::sin(v); }},
      {"cos", [](double v) { return std::cos(v); }},
      {"erf", [](double v) { return std::erf(v); }},
      {"sign", [](double v) { return static_cast<double>((v > 0) - (v < 0)); }},
  };
  for (const auto& [name, f] : unaries) {
    const bool needs_positive =
        name == "log" || name == "log1p" || name == "sqrt" || name == "rsqrt" || name == "reciprocal";
    add(name, single_op_task(name, {needs_positive ? positive("x", {4, 33}) : x2}), unary_expect(f));
  }
  add("exp_int", single_op_task("exp", {ints("x", {2, 5}, -3, 3)}),
      one([](const Tensors& in) { return pointwise(in[0].to(at::kFloat), [](double v) { return std::exp(v); }); }));

  // ---- softmax ----
  add("softmax", single_op_task("softmax", {tensor("x", {3, 7, 5})}, {{"dim", 1}}), one([](const Tensors& in) {
        at::Tensor e = at::exp(in[0] - std::get<0>(in[0].max(1, true)));
        return e / e.sum(1, true);
      }));
  add("log_softmax", single_op_task("log_softmax", {tensor("x", {3, 7, 5})}), one([](const Tensors& in) {
        at::Tensor xd = in[0].to(at::kDouble);
        return (xd - at::log(at::exp(xd).sum(-1, true))).to(at::kFloat);
      }));

  // ---- norms ----
  add("layer_norm_affine",
      single_op_task("layer_norm", {tensor("x", {4, 3, 8})}, {{"normalized_ndim", 2}, {"eps", 1e-5}},
                     {tensor("w", {3, 8}), tensor("b", {3, 8})}),
      one([](const Tensors& in) {
        return normalize(in[0], {1, 2}, 1e-5) * in[1] + in[2];
      }),
      1e-4);
  add("layer_norm_plain", single_op_task("layer_norm", {tensor("x", {4, 8})}, {{"normalized_shape", {8}}}),
      one([](const Tensors& in) { return normalize(in[0], {1}, 1e-5); }), 1e-4);
  add("rms_norm", single_op_task("rms_norm", {tensor("x", {4, 16})}, {{"eps", 1e-6}}, {tensor("w", {16})}),
      one([](const Tensors& in) {
        at::Tensor xd = in[0].to(at::kDouble);
        return (xd / (xd.pow(2).mean(-1, true) + 1e-6).sqrt()).to(at::kFloat) * in[1];
      }),
      1e-4);
  add("rms_norm_2d", single_op_task("rms_norm", {tensor("x", {2, 3, 4})}, {{"normalized_ndim", 2}}),
      one([](const Tensors& in) {
        at::Tensor xd = in[0].to(at::kDouble);
        return (xd / (xd.pow(2).mean({1, 2}, true) + 1e-5).sqrt()).to(at::kFloat);
      }),
      1e-4);
  add("group_norm",
      single_op_task("group_norm", {tensor("x", {2, 6, 4, 4})}, {{"num_groups", 3}},
                     {tensor("w", {6}), tensor("b", {6})}),
      one([](const Tensors& in) {
        at::Tensor g = normalize(in[0].reshape({2, 3, -1}), {2}, 1e-5).reshape({2, 6, 4, 4});
        return channel_affine(g, in[1], in[2]);
      }),
      1e-4);
  add("batch_norm", single_op_task("batch_norm", {tensor("x", {4, 3, 5, 5})}, {}, {tensor("w", {3}), tensor("b", {3})}),
      one([](const Tensors& in) {
        return channel_affine(normalize(in[0], {0, 2, 3}, 1e-5), in[1], in[2]);
      }),
      1e-4);
  add("batch_norm_2d_plain", single_op_task("batch_norm", {tensor("x", {8, 5})}, {{"eps", 1e-3}}),
      one([](const Tensors& in) { return normalize(in[0], {0}, 1e-3); }), 1e-4);
  add("instance_norm",
      single_op_task("instance_norm", {tensor("x", {2, 3, 6, 6})}, {}, {tensor("w", {3}), tensor("b", {3})}),
      one([](const Tensors& in) {
        return channel_affine(normalize(in[0], {2, 3}, 1e-5), in[1], in[2]);
      }),
      1e-4);
}

}  // namespace internal

TensorSpec tensor(const std::string& name, std::vector<int64_t> shape, DType dtype, const std::string& init) {
  TensorSpec t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.init.kind = init;
  if (init == "randint") {
    t.init.low = 0;
    t.init.high = 10;
  } else if (init == "bernoulli") {
    t.init.mean = 0.5;
  } else if (init == "positive") {
    t.init.low = 1e-3;
  }
  return t;
}

TaskSpec single_op_task(const std::string& op, std::vector<TensorSpec> inputs, json attrs,
                        std::vector<TensorSpec> params) {
  TaskSpec t;
  t.id = "test/" + op;
  t.inputs = std::move(inputs);
  t.params = std::move(params);
  GraphNode n;
  n.op = op;
  for (const auto& s : t.kernel_inputs()) n.in.push_back(s.name);
  n.out = "y";
  n.attrs = std::move(attrs);
  t.nodes.push_back(n);
  t.outputs = {"y"};
  return t;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> kCases = [] {
    std::vector<OpCase> cases;
    internal::add_arithmetic_cases(internal::AddCase{cases});
    internal::add_reduction_layout_and_graph_cases(internal::AddCase{cases});
    return cases;
  }();
  return kCases;
}

}  // namespace kforge::testing
