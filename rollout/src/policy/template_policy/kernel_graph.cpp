#include "policy/template_policy/kernel_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "kforge/core/op_registry.h"

namespace kforge::rollout::template_policy {
namespace {

using Shape = std::vector<int64_t>;
using Shapes = std::vector<Shape>;  // one per judged case

bool is_unit(const Shapes& shapes, size_t axis) {
  return std::all_of(shapes.begin(), shapes.end(), [&](const Shape& s) { return s[axis] == 1; });
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::vector<int64_t> int_list(const json& v) {
  if (v.is_number_integer()) return {v.get<int64_t>()};
  return v.get<std::vector<int64_t>>();
}

class Builder {
 public:
  explicit Builder(const TaskSpec& task) : task_(task) {
    cases_.push_back(task);
    for (size_t i = 0; i < task.shape_variants.size(); ++i) cases_.push_back(task.with_variant(i));
    // Type-checks every case (InputError) and gives the dtypes.
    for (const TaskSpec& c : cases_) infer_graph(c);
    for (const auto& [name, type] : infer_graph(task)) {
      if (type.dtype != DType::kFloat32) {
        throw Unsupported("value \"" + name + "\" is " + dtype_name(type.dtype) +
                          "; the template policy's templates are float32 only");
      }
    }
    graph_.task_id = task.id;
  }

  KernelGraph build() {
    const std::vector<TensorSpec> kernel_inputs = task_.kernel_inputs();
    graph_.num_inputs = static_cast<int>(kernel_inputs.size());
    for (size_t i = 0; i < kernel_inputs.size(); ++i) {
      Value v;
      v.kind = ValueKind::kInput;
      v.name = kernel_inputs[i].name;
      v.input_index = static_cast<int>(i);
      for (const TaskSpec& c : cases_) v.shapes.push_back(c.kernel_inputs()[i].shape);
      const std::string name = v.name;
      by_name_[name] = add(std::move(v));
    }
    for (size_t n = 0; n < task_.nodes.size(); ++n) {
      const GraphNode& node = task_.nodes[n];
      where_ = "node " + std::to_string(n) + " (" + node.op + ")";
      std::vector<int> in;
      for (const auto& name : node.in) in.push_back(by_name_.at(name));
      const OpSchema* schema = op_registry().find(node.op);
      const json attrs = resolve_attrs(*schema, node.attrs, where_);
      const int out = lower_node(node.op, in, attrs);
      by_name_[node.out] = out;
      graph_.values[static_cast<size_t>(out)].name = node.out;
    }
    for (size_t o = 0; o < task_.outputs.size(); ++o) {
      const int id = by_name_.at(task_.outputs[o]);
      Value& v = graph_.values[static_cast<size_t>(id)];
      if (v.kind == ValueKind::kInput) {
        throw Unsupported("output \"" + v.name + "\" is a kernel input itself; no template copies inputs");
      }
      if (v.output_index >= 0) throw Unsupported("value \"" + v.name + "\" is written to two outputs");
      v.output_index = static_cast<int>(o);
      graph_.outputs.push_back(id);
    }
    graph_.num_outputs = static_cast<int>(graph_.outputs.size());
    resolve_dims(kernel_inputs.size());
    graph_.consumers.assign(graph_.values.size(), {});
    for (const Value& v : graph_.values) {
      for (int o : v.operands) graph_.consumers[static_cast<size_t>(o)].push_back(v.id);
    }
    return std::move(graph_);
  }

 private:
  [[noreturn]] void unsupported(const std::string& why) const {
    throw Unsupported("task \"" + task_.id + "\": " + where_ + ": " + why);
  }

  int add(Value v) {
    v.id = static_cast<int>(graph_.values.size());
    if (v.name.empty()) v.name = "v" + std::to_string(v.id);
    graph_.values.push_back(std::move(v));
    return graph_.values.back().id;
  }
  const Value& val(int id) const { return graph_.values[static_cast<size_t>(id)]; }
  const Shapes& shapes(int id) const { return val(id).shapes; }
  int rank(int id) const { return val(id).rank(); }

  // PyTorch broadcasting, with one more rule: an operand dim that is
  // broadcast must be 1 in every case, so that the same index arithmetic is
  // right for every shape variant.
  int pointwise(std::vector<int> operands, ExprPtr expr) {
    Value v;
    v.kind = ValueKind::kPointwise;
    size_t out_rank = 0;
    for (int o : operands) out_rank = std::max(out_rank, static_cast<size_t>(rank(o)));
    for (size_t c = 0; c < cases_.size(); ++c) {
      Shape out(out_rank, 1);
      for (int o : operands) {
        const Shape& s = shapes(o)[c];
        for (size_t k = 0; k < s.size(); ++k) {
          int64_t& d = out[out_rank - s.size() + k];
          if (s[k] != 1) d = s[k];
        }
      }
      v.shapes.push_back(out);
    }
    for (int o : operands) {
      const Shapes& os = shapes(o);
      const size_t r = os.front().size();
      for (size_t k = 0; k < r; ++k) {
        const size_t ko = out_rank - r + k;
        for (size_t c = 0; c < cases_.size(); ++c) {
          if (os[c][k] != v.shapes[c][ko] && !is_unit(os, k)) {
            unsupported("operand \"" + val(o).name + "\" broadcasts in some shape cases and not in others (" +
                        shape_text(os[c]) + " against " + shape_text(v.shapes[c]) + ")");
          }
        }
      }
    }
    v.operands = std::move(operands);
    v.expr = std::move(expr);
    return add(std::move(v));
  }

  int unary(const std::string& op, int x, std::vector<double> params = {}) {
    return pointwise({x}, call(op, {operand_expr(0)}, std::move(params)));
  }
  int binary(const std::string& op, int a, int b) {
    return pointwise({a, b}, call(op, {operand_expr(0), operand_expr(1)}));
  }
  int with_scalar(const std::string& op, int a, double c) {
    return pointwise({a}, call(op, {operand_expr(0), const_expr(c)}));
  }
  int with_runtime(const std::string& op, int a, const std::string& code) {
    return pointwise({a}, call(op, {operand_expr(0), runtime_expr(code)}));
  }

  // The C expression of the element count of dims [from, to) of `id`.
  std::string count_code(int id, int from, int to) const {
    std::string s = "(float)(1";
    for (int k = from; k < to; ++k) s += " * " + dim_var(id, k);
    return s + ")";
  }

  int reduce(ReduceOp op, int x, int from, int to) {
    if (rank(x) == 0) unsupported("reducing a 0-d tensor");
    Value v;
    v.kind = ValueKind::kReduce;
    v.reduce = op;
    v.red_begin = from;
    v.red_end = to;
    for (const Shape& s : shapes(x)) {
      Shape out = s;
      for (int k = from; k < to; ++k) out[static_cast<size_t>(k)] = 1;
      v.shapes.push_back(out);
    }
    v.operands = {x};
    return add(std::move(v));
  }

  int view(int x, Shapes new_shapes) {
    Value v;
    v.kind = ValueKind::kView;
    v.shapes = std::move(new_shapes);
    v.operands = {x};
    return add(std::move(v));
  }

  // Drops the reduced dims of a keepdim result (keepdim=false).
  int squeeze(int x, int from, int to) {
    Shapes out;
    for (const Shape& s : shapes(x)) {
      Shape t;
      for (size_t k = 0; k < s.size(); ++k) {
        if (static_cast<int>(k) < from || static_cast<int>(k) >= to) t.push_back(s[k]);
      }
      out.push_back(t);
    }
    return view(x, std::move(out));
  }

  // The reduced dims as one contiguous range [from, to).
  std::pair<int, int> dim_range(int x, const json& dim) {
    const int r = rank(x);
    if (dim.is_null()) return {0, r};
    std::vector<int64_t> dims = int_list(dim);
    for (auto& d : dims) d = d < 0 ? d + r : d;
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    if (dims.empty()) return {0, r};
    for (size_t i = 1; i < dims.size(); ++i) {
      if (dims[i] != dims[i - 1] + 1) unsupported("the reduced dims are not contiguous");
    }
    return {static_cast<int>(dims.front()), static_cast<int>(dims.back()) + 1};
  }

  int finish_reduction(int result, int from, int to, const json& attrs) {
    const bool keepdim = attrs.contains("keepdim") && attrs["keepdim"].is_boolean() && attrs["keepdim"].get<bool>();
    return keepdim ? result : squeeze(result, from, to);
  }

  int mean_over(int x, int from, int to) {
    const int s = reduce(ReduceOp::kSum, x, from, to);
    return with_runtime("mul", s, "1.0f / " + count_code(x, from, to));
  }

  int lower_reduction(const std::string& op, int x, const json& attrs) {
    const auto [from, to] = dim_range(x, attrs.value("dim", json(nullptr)));
    int r = -1;
    if (op == "sum") {
      r = reduce(ReduceOp::kSum, x, from, to);
    } else if (op == "mean") {
      r = mean_over(x, from, to);
    } else if (op == "amax" || op == "max") {
      r = reduce(ReduceOp::kMax, x, from, to);
    } else if (op == "amin" || op == "min") {
      r = reduce(ReduceOp::kMin, x, from, to);
    } else if (op == "prod") {
      r = reduce(ReduceOp::kProd, x, from, to);
    } else if (op == "logsumexp") {
      const int m = reduce(ReduceOp::kMax, x, from, to);
      const int e = unary("exp", binary("sub", x, m));
      r = binary("add", unary("log", reduce(ReduceOp::kSum, e, from, to)), m);
    } else if (op == "var" || op == "std") {
      const int d = binary("sub", x, mean_over(x, from, to));
      const int s = reduce(ReduceOp::kSum, unary("square", d), from, to);
      const int64_t correction = attrs.value("correction", int64_t{1});
      r = with_runtime("mul", s, "1.0f / (" + count_code(x, from, to) + " - " + std::to_string(correction) + ".0f)");
      if (op == "std") r = unary("sqrt", r);
    } else if (op == "norm") {
      const double p = attrs.value("p", 2.0);
      if (p == 2.0) {
        r = unary("sqrt", reduce(ReduceOp::kSum, unary("square", x), from, to));
      } else if (p == 1.0) {
        r = reduce(ReduceOp::kSum, unary("abs", x), from, to);
      } else if (std::isinf(p) && p > 0) {
        r = reduce(ReduceOp::kMax, unary("abs", x), from, to);
      } else if (p > 0 && std::isfinite(p)) {
        const int s = reduce(ReduceOp::kSum, with_scalar("pow", unary("abs", x), p), from, to);
        r = with_scalar("pow", s, 1.0 / p);
      } else {
        unsupported("norm with p = " + std::to_string(p));
      }
    } else {
      unsupported("no template for the reduction " + op);
    }
    return finish_reduction(r, from, to, attrs);
  }

  // Normalizes the trailing dims [from, rank) of x; weight and bias (if any)
  // broadcast over them as they are.
  int normalize(int x, int from, int weight, int bias, double eps, bool rms) {
    const int to = rank(x);
    int y = -1;
    if (rms) {
      const int ms = with_runtime("mul", reduce(ReduceOp::kSum, unary("square", x), from, to),
                                  "1.0f / " + count_code(x, from, to));
      y = binary("mul", x, unary("rsqrt", with_scalar("add", ms, eps)));
    } else {
      const int d = binary("sub", x, mean_over(x, from, to));
      const int var = with_runtime("mul", reduce(ReduceOp::kSum, unary("square", d), from, to),
                                   "1.0f / " + count_code(x, from, to));
      y = binary("mul", d, unary("rsqrt", with_scalar("add", var, eps)));
    }
    if (weight >= 0) y = binary("mul", y, weight);
    if (bias >= 0) y = binary("add", y, bias);
    return y;
  }

  // A per-channel parameter [C] seen as [C, 1, ..., 1] against x [N, C, ...].
  int per_channel(int param, int x) {
    Shapes out;
    for (const Shape& s : shapes(param)) {
      Shape t = s;
      for (int k = 2; k < rank(x); ++k) t.push_back(1);
      out.push_back(t);
    }
    return view(param, std::move(out));
  }

  int binary_op(const std::string& op, const std::vector<int>& in, const json& attrs) {
    const double alpha = attrs.contains("alpha") && attrs["alpha"].is_number() ? attrs["alpha"].get<double>() : 1.0;
    const bool scalar = in.size() == 1;
    if (scalar && !(attrs.contains("other") && attrs["other"].is_number())) {
      unsupported("a binary op with one tensor and no scalar \"other\"");
    }
    const double other = scalar ? attrs["other"].get<double>() : 0.0;
    if (op == "add" || op == "sub") {
      if (scalar) return with_scalar(op, in[0], alpha * other);
      const int b = alpha == 1.0 ? in[1] : with_scalar("mul", in[1], alpha);
      return binary(op, in[0], b);
    }
    return scalar ? with_scalar(op, in[0], other) : binary(op, in[0], in[1]);
  }

  int matmul(int a, int b, bool transposed) {
    const int ra = rank(a), rb = rank(b);
    if (ra < 2 || rb < 2) unsupported("matrix products of 1-d tensors");
    if (rb > 2) {
      if (ra != rb) unsupported("batched products whose operands have different ranks");
      for (size_t c = 0; c < cases_.size(); ++c) {
        const Shape& sa = shapes(a)[c];
        const Shape& sb = shapes(b)[c];
        if (!std::equal(sa.begin(), sa.end() - 2, sb.begin())) unsupported("batch dims that broadcast");
      }
    }
    Value v;
    v.kind = ValueKind::kMatmul;
    v.b_transposed = transposed;
    for (size_t c = 0; c < cases_.size(); ++c) {
      Shape out = shapes(a)[c];
      const Shape& sb = shapes(b)[c];
      out.back() = transposed ? sb[sb.size() - 2] : sb.back();
      v.shapes.push_back(out);
    }
    v.operands = {a, b};
    return add(std::move(v));
  }

  // One value per spatial dim from an int or a list of them; "same" or
  // "valid" padding is left to PyTorch.
  std::vector<int64_t> spatial_param(const json& attrs, const char* key, int spatial, int64_t fallback) {
    const json v = attrs.value(key, json(fallback));
    if (v.is_string()) unsupported(std::string(key) + " \"" + v.get<std::string>() + "\" has no template");
    std::vector<int64_t> out = int_list(v);
    if (out.size() == 1) out.assign(static_cast<size_t>(spatial), out.front());
    if (out.size() != static_cast<size_t>(spatial)) unsupported(std::string(key) + " does not match the spatial dims");
    return out;
  }

  // x [N, C, S...] * w (+ bias [Co]) -> [N, Co, O...] (ConvParams).
  int convolution(const std::vector<int>& in, const json& attrs, int spatial, bool transposed) {
    Value v;
    v.kind = ValueKind::kConv;
    ConvParams& p = v.conv;
    p.spatial = spatial;
    p.transposed = transposed;
    p.output_padding = spatial_param(attrs, "output_padding", spatial, 0);
    p.stride = spatial_param(attrs, "stride", spatial, 1);
    p.padding = spatial_param(attrs, "padding", spatial, 0);
    p.dilation = spatial_param(attrs, "dilation", spatial, 1);
    const json groups = attrs.value("groups", json(1));
    if (!groups.is_number_integer() || groups.get<int64_t>() < 1) unsupported("groups that is no positive integer");
    p.groups = groups.get<int64_t>();
    if (rank(in[0]) != spatial + 2) unsupported("an input without its batch dim");
    if (in.size() > 2 && rank(in[2]) != 1) unsupported("a bias that is not [out_channels]");
    for (size_t c = 0; c < cases_.size(); ++c) {
      const Shape& x = shapes(in[0])[c];
      const Shape& w = shapes(in[1])[c];
      Shape out = {x[0], transposed ? w[1] * p.groups : w[0]};
      for (int d = 0; d < spatial; ++d) {
        const size_t k = static_cast<size_t>(d + 2), i = static_cast<size_t>(d);
        const int64_t span = p.dilation[i] * (w[k] - 1) + 1;
        out.push_back(transposed ? (x[k] - 1) * p.stride[i] - 2 * p.padding[i] + span + p.output_padding[i]
                                 : (x[k] + 2 * p.padding[i] - span) / p.stride[i] + 1);
      }
      v.shapes.push_back(out);
    }
    v.operands = in;
    return add(std::move(v));
  }

  int lower_node(const std::string& op, const std::vector<int>& in, const json& attrs) {
    static const std::vector<std::string> kUnary = {
        "relu",       "relu6",  "sigmoid", "tanh", "silu", "mish",  "softsign", "hardsigmoid",
        "hardswish",  "abs",    "neg",     "exp",  "log",  "log1p", "sqrt",     "rsqrt",
        "reciprocal", "square", "sin",     "cos",  "erf",  "sign"};
    if (std::find(kUnary.begin(), kUnary.end(), op) != kUnary.end()) return unary(op, in[0]);
    if (op == "gelu") return unary(attrs.value("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu", in[0]);
    if (op == "elu") return unary("elu", in[0], {attrs.value("alpha", 1.0)});
    if (op == "selu") return unary("selu", in[0]);
    if (op == "leaky_relu") return unary("leaky_relu", in[0], {attrs.value("negative_slope", 0.01)});
    if (op == "hardtanh") return unary("clamp", in[0], {attrs.value("min_val", -1.0), attrs.value("max_val", 1.0)});
    if (op == "softplus") return unary("softplus", in[0], {attrs.value("beta", 1.0), attrs.value("threshold", 20.0)});
    if (op == "clamp") {
      const double inf = std::numeric_limits<double>::infinity();
      const json lo = attrs.value("min", json(nullptr)), hi = attrs.value("max", json(nullptr));
      return unary("clamp", in[0], {lo.is_number() ? lo.get<double>() : -inf, hi.is_number() ? hi.get<double>() : inf});
    }
    if (op == "add" || op == "sub" || op == "mul" || op == "div" || op == "maximum" || op == "minimum" || op == "pow") {
      return binary_op(op, in, attrs);
    }
    if (op == "sum" || op == "mean" || op == "amax" || op == "amin" || op == "max" || op == "min" || op == "prod" ||
        op == "logsumexp" || op == "var" || op == "std" || op == "norm") {
      return lower_reduction(op, in[0], attrs);
    }
    if (op == "softmax" || op == "log_softmax") {
      const int r = rank(in[0]);
      int64_t d = attrs.value("dim", int64_t{-1});
      if (d < 0) d += r;
      const int from = static_cast<int>(d), to = from + 1;
      const int m = reduce(ReduceOp::kMax, in[0], from, to);
      const int shifted = binary("sub", in[0], m);
      const int e = unary("exp", shifted);
      const int s = reduce(ReduceOp::kSum, e, from, to);
      return op == "softmax" ? binary("div", e, s) : binary("sub", shifted, unary("log", s));
    }
    if (op == "layer_norm" || op == "rms_norm") {
      const int r = rank(in[0]);
      int64_t k = 1;
      if (attrs.contains("normalized_shape") && !attrs["normalized_shape"].is_null()) {
        k = static_cast<int64_t>(int_list(attrs["normalized_shape"]).size());
      } else if (attrs.contains("normalized_ndim") && !attrs["normalized_ndim"].is_null()) {
        k = attrs["normalized_ndim"].get<int64_t>();
      } else if (in.size() > 1) {
        k = rank(in[1]);
      }
      const int weight = in.size() > 1 ? in[1] : -1;
      const int bias = in.size() > 2 ? in[2] : -1;
      return normalize(in[0], r - static_cast<int>(k), weight, bias, attrs.value("eps", 1e-5), op == "rms_norm");
    }
    if (op == "instance_norm") {
      if (rank(in[0]) < 3) unsupported("instance_norm of a tensor without spatial dims");
      const int weight = in.size() > 1 ? per_channel(in[1], in[0]) : -1;
      const int bias = in.size() > 2 ? per_channel(in[2], in[0]) : -1;
      return normalize(in[0], 2, weight, bias, attrs.value("eps", 1e-5), false);
    }
    if (op == "conv1d" || op == "conv2d" || op == "conv3d") return convolution(in, attrs, op[4] - '0', false);
    if (op == "conv_transpose1d" || op == "conv_transpose2d" || op == "conv_transpose3d") {
      return convolution(in, attrs, op[14] - '0', true);
    }
    if (op == "matmul" || op == "bmm") return matmul(in[0], in[1], false);
    if (op == "linear") {
      const int m = matmul(in[0], in[1], true);
      return in.size() > 2 ? binary("add", m, in[2]) : m;
    }
    unsupported("no template for " + op);
  }

  // Each size as a kernel input's dim that equals it in every case (or a
  // constant when it never changes).
  void resolve_dims(size_t num_inputs) {
    std::vector<std::pair<int, int>> candidates;
    for (size_t i = 0; i < num_inputs; ++i) {
      for (int a = 0; a < rank(static_cast<int>(i)); ++a) candidates.emplace_back(static_cast<int>(i), a);
    }
    for (Value& v : graph_.values) {
      v.dims.assign(static_cast<size_t>(v.rank()), Dim{});
      v.unit.assign(static_cast<size_t>(v.rank()), false);
      for (size_t k = 0; k < v.dims.size(); ++k) {
        v.unit[k] = is_unit(v.shapes, k);
        if (v.kind == ValueKind::kInput) {
          v.dims[k].factors = {{v.input_index, static_cast<int>(k)}};
          continue;
        }
        bool found = false;
        for (const auto& [i, a] : candidates) {
          bool same = true;
          for (size_t c = 0; c < cases_.size() && same; ++c) {
            same = shapes(i)[c][static_cast<size_t>(a)] == v.shapes[c][k];
          }
          if (same) {
            v.dims[k].factors = {{i, a}};
            found = true;
            break;
          }
        }
        if (found) continue;
        const bool constant =
            std::all_of(v.shapes.begin(), v.shapes.end(), [&](const Shape& s) { return s[k] == v.shapes.front()[k]; });
        if (!constant) {
          throw Unsupported("task \"" + task_.id + "\": dim " + std::to_string(k) + " of \"" + v.name +
                            "\" is no kernel input's dim in every shape case");
        }
        v.dims[k].constant = v.shapes.front()[k];
      }
    }
  }

  const TaskSpec& task_;
  std::vector<TaskSpec> cases_;
  KernelGraph graph_;
  std::map<std::string, int> by_name_;
  std::string where_;
};

}  // namespace

std::string dim_var(int value, int axis) { return "S.d" + std::to_string(value) + "_" + std::to_string(axis); }

ExprPtr operand_expr(int index) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kOperand;
  e->operand = index;
  return e;
}

ExprPtr const_expr(double v) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kConst;
  e->value = v;
  return e;
}

ExprPtr runtime_expr(std::string code) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kRuntime;
  e->code = std::move(code);
  return e;
}

ExprPtr call(std::string op, std::vector<ExprPtr> args, std::vector<double> params) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kCall;
  e->op = std::move(op);
  e->args = std::move(args);
  e->params = std::move(params);
  return e;
}

KernelGraph lower(const TaskSpec& task) { return Builder(task).build(); }

}  // namespace kforge::rollout::template_policy
