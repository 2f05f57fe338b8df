// The second half of the op cases (op_cases.h): reductions, pooling, layout
// ops, and graphs of several ops.
#include <cmath>

#include "op_cases_support.h"

namespace kforge::testing::internal {

void add_reduction_layout_and_graph_cases(const AddCase& add) {
  // ---- reductions ----
  const TensorSpec x3 = tensor("x", {3, 4, 5});
  add("sum_dims_keepdim", single_op_task("sum", {x3}, {{"dim", {0, 2}}, {"keepdim", true}}), one([](const Tensors& in) {
        return in[0].select(0, 0).sum(1).reshape({1, 4, 1}) + in[0].select(0, 1).sum(1).reshape({1, 4, 1}) +
               in[0].select(0, 2).sum(1).reshape({1, 4, 1});
      }),
      1e-5);
  add("sum_all", single_op_task("sum", {x3}),
      one([](const Tensors& in) { return at::scalar_tensor(in[0].to(at::kDouble).sum().item<double>(), at::kFloat); }),
      1e-5);
  add("sum_int", single_op_task("sum", {ints("x", {3, 4}, -9, 9)}, {{"dim", 1}}),
      one([](const Tensors& in) { return in[0].to(at::kLong).sum(1); }));
  add("mean", single_op_task("mean", {x3}, {{"dim", 1}}), one([](const Tensors& in) { return in[0].sum(1) / 4; }));
  add("amax", single_op_task("amax", {x3}, {{"dim", -1}}),
      one([](const Tensors& in) { return std::get<0>(in[0].sort(-1, true)).select(-1, 0); }));
  add("amin_keepdim", single_op_task("amin", {x3}, {{"dim", {0, 1}}, {"keepdim", true}}), one([](const Tensors& in) {
        return std::get<0>(in[0].reshape({12, 5}).sort(0)).narrow(0, 0, 1).unsqueeze(0);
      }));
  add("max_dim", single_op_task("max", {x3}, {{"dim", 1}}),
      one([](const Tensors& in) { return std::get<0>(in[0].sort(1, true)).select(1, 0); }));
  add("max_all", single_op_task("max", {x3}),
      one([](const Tensors& in) { return std::get<0>(in[0].flatten().sort(0, true)).select(0, 0); }));
  add("min_keepdim", single_op_task("min", {x3}, {{"dim", 0}, {"keepdim", true}}),
      one([](const Tensors& in) { return std::get<0>(in[0].sort(0)).narrow(0, 0, 1); }));
  add("prod", single_op_task("prod", {positive("x", {3, 4, 5})}, {{"dim", 1}}), one([](const Tensors& in) {
        return in[0].select(1, 0) * in[0].select(1, 1) * in[0].select(1, 2) * in[0].select(1, 3);
      }),
      1e-5);
  add("prod_int_all", single_op_task("prod", {ints("x", {2, 3}, 1, 4)}), one([](const Tensors& in) {
        int64_t p = 1;
        at::Tensor x = in[0].contiguous();
        for (int64_t i = 0; i < 6; ++i) p *= x.data_ptr<int32_t>()[i];
        return at::scalar_tensor(p, at::kLong);
      }));
  add("argmax", single_op_task("argmax", {x3}, {{"dim", 2}}),
      one([](const Tensors& in) { return std::get<1>(in[0].sort(2, true)).select(2, 0); }));
  add("argmax_flat", single_op_task("argmax", {x3}),
      one([](const Tensors& in) { return std::get<1>(in[0].flatten().sort(0, true)).select(0, 0); }));
  add("argmin_keepdim", single_op_task("argmin", {x3}, {{"dim", 0}, {"keepdim", true}}),
      one([](const Tensors& in) { return std::get<1>(in[0].sort(0)).narrow(0, 0, 1); }));
  add("logsumexp", single_op_task("logsumexp", {x3}, {{"dim", 1}}),
      one([](const Tensors& in) { return at::log(at::exp(in[0].to(at::kDouble)).sum(1)).to(at::kFloat); }));
  add("var_correction0", single_op_task("var", {x3}, {{"dim", {1, 2}}, {"correction", 0}}), one([](const Tensors& in) {
        at::Tensor xd = in[0].to(at::kDouble);
        return (xd - xd.mean({1, 2}, true)).pow(2).sum({1, 2}).div(20).to(at::kFloat);
      }));
  add("std", single_op_task("std", {x3}, {{"dim", 1}, {"keepdim", true}}), one([](const Tensors& in) {
        at::Tensor xd = in[0].to(at::kDouble);
        return (xd - xd.mean(1, true)).pow(2).sum(1, true).div(3).sqrt().to(at::kFloat);
      }));
  add("norm_p3", single_op_task("norm", {x3}, {{"p", 3.0}, {"dim", 1}}), one([](const Tensors& in) {
        return at::pow(in[0].to(at::kDouble).abs().pow(3).sum(1), 1.0 / 3).to(at::kFloat);
      }));
  add("norm_all", single_op_task("norm", {x3}),
      one([](const Tensors& in) { return in[0].to(at::kDouble).pow(2).sum().sqrt().to(at::kFloat); }));
  add("cumsum", single_op_task("cumsum", {x3}, {{"dim", 1}}), one([](const Tensors& in) {
        std::vector<at::Tensor> parts = {in[0].select(1, 0)};
        for (int64_t i = 1; i < 4; ++i) parts.push_back(parts.back() + in[0].select(1, i));
        return at::stack(parts, 1);
      }));

  // ---- pooling ----
  add("max_pool1d", single_op_task("max_pool1d", {tensor("x", {2, 3, 11})}, {{"kernel_size", 3}, {"stride", 2}}),
      one([](const Tensors& in) { return windows(in[0], 1, 3, 2).amax(-1); }));
  add("max_pool2d", single_op_task("max_pool2d", {tensor("x", {2, 3, 8, 8})}, {{"kernel_size", 2}}),
      one([](const Tensors& in) {
        return windows(in[0], 2, 2, 2).amax({-1, -2});
      }));
  add("max_pool2d_pad_ceil_dilation",
      single_op_task("max_pool2d", {tensor("x", {1, 2, 9, 9})},
                     {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"dilation", 2}, {"ceil_mode", true}}),
      one([](const Tensors& in) {
        return at::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, {2, 2}, true);
      }));
  add("max_pool3d", single_op_task("max_pool3d", {tensor("x", {1, 2, 4, 4, 4})}, {{"kernel_size", 2}}),
      one([](const Tensors& in) {
        return windows(in[0], 3, 2, 2).amax({-1, -2, -3});
      }));
  add("avg_pool1d", single_op_task("avg_pool1d", {tensor("x", {2, 3, 10})}, {{"kernel_size", 3}, {"stride", 1}}),
      one([](const Tensors& in) { return windows(in[0], 1, 3, 1).mean(-1); }));
  add("avg_pool2d", single_op_task("avg_pool2d", {tensor("x", {2, 3, 8, 8})}, {{"kernel_size", 2}}),
      one([](const Tensors& in) {
        return windows(in[0], 2, 2, 2).mean({-1, -2});
      }));
  add("avg_pool2d_pad_ceil",
      single_op_task(
          "avg_pool2d", {tensor("x", {1, 2, 7, 7})},
          {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"ceil_mode", true}, {"count_include_pad", false}}),
      one([](const Tensors& in) {
        return at::avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, true, false);
      }));
  add("avg_pool3d", single_op_task("avg_pool3d", {tensor("x", {1, 2, 4, 4, 4})}, {{"kernel_size", 2}}),
      one([](const Tensors& in) {
        return windows(in[0], 3, 2, 2).mean({-1, -2, -3});
      }));
  add("adaptive_avg_pool1d", single_op_task("adaptive_avg_pool1d", {tensor("x", {2, 3, 8})}, {{"output_size", 4}}),
      one([](const Tensors& in) {
        return in[0].reshape({2, 3, 4, 2}).mean(-1);
      }));
  add("adaptive_avg_pool2d",
      single_op_task("adaptive_avg_pool2d", {tensor("x", {2, 3, 5, 7})}, {{"output_size", {1, 1}}}),
      one([](const Tensors& in) {
        return in[0].mean({2, 3}, true);
      }));
  add("adaptive_avg_pool2d_uneven",
      single_op_task("adaptive_avg_pool2d", {tensor("x", {1, 2, 5, 5})}, {{"output_size", 3}}),
      one([](const Tensors& in) {
        // torch's windows: [floor(i*5/3), ceil((i+1)*5/3)) = [0,2), [1,4), [3,5).
        const int64_t starts[] = {0, 1, 3}, ends[] = {2, 4, 5};
        at::Tensor out = at::empty({1, 2, 3, 3});
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) {
            out.select(2, i).select(2, j).copy_(
                in[0].narrow(2, starts[i], ends[i] - starts[i]).narrow(3, starts[j], ends[j] - starts[j]).mean({2, 3}));
          }
        }
        return out;
      }));
  add("adaptive_avg_pool3d",
      single_op_task("adaptive_avg_pool3d", {tensor("x", {1, 2, 4, 4, 4})}, {{"output_size", 2}}),
      one([](const Tensors& in) {
        return windows(in[0], 3, 2, 2).mean({-1, -2, -3});
      }));
  add("adaptive_max_pool2d",
      single_op_task("adaptive_max_pool2d", {tensor("x", {2, 3, 6, 6})}, {{"output_size", {2, 3}}}),
      one([](const Tensors& in) {
        return in[0].unfold(2, 3, 3).unfold(3, 2, 2).amax({-1, -2});
      }));

  // ---- layout ----
  add("transpose", single_op_task("transpose", {x3}, {{"dim0", 0}, {"dim1", 2}}), one([](const Tensors& in) {
        return in[0].permute({2, 1, 0});
      }));
  add("permute", single_op_task("permute", {x3}, {{"dims", {2, 0, 1}}}),
      one([](const Tensors& in) { return in[0].movedim(2, 0); }));
  add("reshape", single_op_task("reshape", {x3}, {{"shape", {-1, 10}}}), one([](const Tensors& in) {
        return in[0].contiguous().view({6, 10});
      }));
  add("flatten", single_op_task("flatten", {tensor("x", {2, 3, 4, 5})}, {{"start_dim", 1}, {"end_dim", 2}}),
      one([](const Tensors& in) {
        return in[0].reshape({2, 12, 5});
      }));
  add("squeeze", single_op_task("squeeze", {tensor("x", {3, 1, 4, 1})}), one([](const Tensors& in) {
        return in[0].reshape({3, 4});
      }));
  add("squeeze_dim", single_op_task("squeeze", {tensor("x", {3, 1, 4, 1})}, {{"dim", -1}}), one([](const Tensors& in) {
        return in[0].reshape({3, 1, 4});
      }));
  add("unsqueeze", single_op_task("unsqueeze", {tensor("x", {3, 4})}, {{"dim", -1}}), one([](const Tensors& in) {
        return in[0].reshape({3, 4, 1});
      }));
  add("cat", single_op_task("cat", {tensor("a", {2, 3}), tensor("b", {2, 5}), tensor("c", {2, 1})}, {{"dim", 1}}),
      one([](const Tensors& in) {
        at::Tensor out = at::empty({2, 9});
        out.narrow(1, 0, 3).copy_(in[0]);
        out.narrow(1, 3, 5).copy_(in[1]);
        out.narrow(1, 8, 1).copy_(in[2]);
        return out;
      }));
  add("stack", single_op_task("stack", {tensor("a", {2, 3}), tensor("b", {2, 3})}, {{"dim", 1}}),
      one([](const Tensors& in) {
        return at::cat({in[0].unsqueeze(1), in[1].unsqueeze(1)}, 1);
      }));
  add("narrow", single_op_task("narrow", {x3}, {{"dim", 2}, {"start", 1}, {"length", 3}}),
      one([](const Tensors& in) { return in[0].index_select(2, at::arange(1, 4)); }));
  add("slice", single_op_task("slice", {tensor("x", {3, 10})}, {{"dim", 1}, {"start", -8}, {"end", 9}, {"step", 3}}),
      one([](const Tensors& in) { return in[0].index_select(1, at::arange(2, 9, 3)); }));
  add("expand", single_op_task("expand", {tensor("x", {3, 1})}, {{"shape", {2, -1, 4}}}), one([](const Tensors& in) {
        return in[0].repeat({2, 1, 4});
      }));
  add("contiguous", single_op_task("contiguous", {x3}), one([](const Tensors& in) { return in[0].clone(); }));
  add("repeat", single_op_task("repeat", {tensor("x", {2, 3})}, {{"repeats", {2, 1, 2}}}), one([](const Tensors& in) {
        at::Tensor row = at::cat({in[0], in[0]}, 1);
        return at::stack({row, row});
      }));
  add("tril", single_op_task("tril", {tensor("x", {2, 4, 5})}, {{"diagonal", 1}}), one([](const Tensors& in) {
        at::Tensor i = at::arange(4).unsqueeze(1), j = at::arange(5).unsqueeze(0);
        return in[0] * (j - i <= 1).to(at::kFloat);
      }));
  add("triu", single_op_task("triu", {tensor("x", {4, 4})}), one([](const Tensors& in) {
        at::Tensor i = at::arange(4).unsqueeze(1), j = at::arange(4).unsqueeze(0);
        return in[0] * (j >= i).to(at::kFloat);
      }));

  // ---- graphs of several ops ----
  {
    TaskSpec t;
    t.inputs = {tensor("x", {16, 32})};
    t.params = {tensor("w", {32, 32}, DType::kFloat32, "kaiming_uniform")};
    t.nodes = {{"matmul", {"x", "w"}, "t0", json::object()},
               {"gelu", {"t0"}, "t1", {{"approximate", "tanh"}}},
               {"add", {"t1", "x"}, "y", json::object()}};
    t.outputs = {"y"};
    add("graph_gemm_gelu_residual", t, one([](const Tensors& in) {
          at::Tensor h = at::mm(in[0], in[1]);
          return pointwise(h,
                           [](double v) {
                             return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
                           }) +
                 in[0];
        }),
        1e-4);
  }
  {
    TaskSpec t;
    t.inputs = {tensor("x", {2, 3, 12, 12})};
    t.params = {tensor("w", {8, 3, 3, 3}, DType::kFloat32, "kaiming_uniform"),
                tensor("gamma", {8}, DType::kFloat32, "ones"), tensor("beta", {8}, DType::kFloat32, "zeros")};
    t.nodes = {{"conv2d", {"x", "w"}, "c", {{"padding", 1}}},
               {"batch_norm", {"c", "gamma", "beta"}, "n", json::object()},
               {"relu", {"n"}, "r", json::object()},
               {"max_pool2d", {"r"}, "p", {{"kernel_size", 2}}},
               {"mean", {"p"}, "pooled", {{"dim", {2, 3}}}}};
    t.outputs = {"p", "pooled"};
    add(
        "graph_conv_bn_relu_pool", t,
        [](const Tensors& in) {
          at::Tensor c = at::conv2d(in[0], in[1], c10::nullopt, {1, 1}, {1, 1});
          at::Tensor r = at::clamp_min(channel_affine(normalize(c, {0, 2, 3}, 1e-5), in[2], in[3]), 0);
          at::Tensor p = windows(r, 2, 2, 2).amax({-1, -2});
          return Tensors{p, p.mean({2, 3})};
        },
        1e-4);
  }
  {
    TaskSpec t;
    t.inputs = {tensor("q", {2, 4, 8}), tensor("k", {2, 6, 8}), tensor("v", {2, 6, 8})};
    t.nodes = {{"transpose", {"k"}, "kt", json::object()},
               {"bmm", {"q", "kt"}, "s", json::object()},
               {"mul", {"s"}, "scaled", {{"other", 0.35355339059327373}}},
               {"softmax", {"scaled"}, "p", {{"dim", -1}}},
               {"bmm", {"p", "v"}, "o", json::object()}};
    t.outputs = {"o"};
    add("graph_attention", t, one([](const Tensors& in) {
          at::Tensor s = at::matmul(in[0], in[1].transpose(1, 2)) / std::sqrt(8.0);
          at::Tensor e = at::exp(s - std::get<0>(s.max(-1, true)));
          return at::matmul(e / e.sum(-1, true), in[2]);
        }),
        1e-4);
  }
  {
    TaskSpec t;
    t.inputs = {tensor("x", {6, 10}, DType::kFloat64), tensor("mask", {6, 10}, DType::kBool, "bernoulli")};
    t.nodes = {{"exp", {"x"}, "e", json::object()},
               {"where", {"mask", "e", "x"}, "m", json::object()},
               {"argmax", {"m"}, "idx", {{"dim", 1}}},
               {"sum", {"m"}, "total", {{"dim", 0}}}};
    t.outputs = {"idx", "total"};
    add(
        "graph_float64_mask_argmax", t,
        [](const Tensors& in) {
          at::Tensor m = at::where(in[1], at::exp(in[0]), in[0]);
          return Tensors{std::get<1>(m.sort(1, true)).select(1, 0), m.sum(0)};
        },
        1e-10);
  }
}

}  // namespace kforge::testing::internal
