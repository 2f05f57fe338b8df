#include "kforge/data_synth/composer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "kforge/core/op_registry.h"
#include "kforge/data_synth/rng.h"

namespace kforge::synth {
namespace {

// What is known about the values of a tensor, so that domain-restricted ops
// (log, sqrt, reciprocal) are only drawn where they are defined and ops that
// would be no-ops there (relu of a non-negative tensor) are not drawn at all.
enum class Domain { kAny, kNonNegative, kPositive };

struct Value {
  std::string name;
  TensorType type;
  Domain domain = Domain::kAny;
};

// Builds the task node by node, type-checking each node as it is added
// (infer_node), so an impossible draw fails where it is made.
class GraphBuilder {
 public:
  GraphBuilder(DType dtype, int64_t batch) : dtype_(dtype), batch_(batch) {}

  DType dtype() const { return dtype_; }
  int64_t batch() const { return batch_; }

  // A kernel input: `shape` excludes the batch dim, which is prepended.
  Value input(std::vector<int64_t> shape, InitSpec init = {}) {
    shape.insert(shape.begin(), batch_);
    TensorSpec t{"x" + (inputs_ == 0 ? std::string() : std::to_string(inputs_ + 1)), shape, dtype_, init};
    ++inputs_;
    task_.inputs.push_back(t);
    return {t.name, TensorType(t.shape, t.dtype, t.name), init.kind == "positive" ? Domain::kPositive : Domain::kAny};
  }

  Value param(const std::string& stem, std::vector<int64_t> shape, InitSpec init) {
    TensorSpec t{stem + std::to_string(params_++), std::move(shape), dtype_, std::move(init)};
    task_.params.push_back(t);
    return {t.name, TensorType(t.shape, t.dtype, t.name), Domain::kAny};
  }

  Value node(const std::string& op, const std::vector<Value>& in, json attrs, Domain domain) {
    GraphNode n{op, {}, "t" + std::to_string(task_.nodes.size()), std::move(attrs)};
    std::vector<TensorType> types;
    for (const auto& v : in) {
      n.in.push_back(v.name);
      types.push_back(v.type);
    }
    TensorType out = infer_node(n, types, "node " + std::to_string(task_.nodes.size()) + " (" + op + ")");
    out.name = n.out;
    task_.nodes.push_back(n);
    values_.push_back({n.out, out, domain});
    return values_.back();
  }

  // Earlier values (inputs excluded) with exactly this type: residual sources.
  std::vector<Value> earlier_with_type(const TensorType& t, const std::string& except) const {
    std::vector<Value> out;
    for (const auto& v : values_) {
      if (v.name != except && v.type.shape == t.shape && v.type.dtype == t.dtype) out.push_back(v);
    }
    return out;
  }

  TaskSpec finish(const std::string& output) {
    task_.outputs = {output};
    return task_;
  }

  TaskSpec& task() { return task_; }

 private:
  DType dtype_;
  int64_t batch_;
  int inputs_ = 0;
  int params_ = 0;
  TaskSpec task_;
  std::vector<Value> values_;
};

InitSpec normal(double mean = 0.0, double std = 1.0) {
  InitSpec s;
  s.kind = "normal";
  s.mean = mean;
  s.std = std;
  return s;
}

InitSpec uniform(double low, double high) {
  InitSpec s;
  s.kind = "uniform";
  s.low = low;
  s.high = high;
  return s;
}

InitSpec kind(const std::string& k) {
  InitSpec s;
  s.kind = k;
  return s;
}

// A size drawn log-uniformly, then usually rounded the way real models size
// things (powers of two, multiples of 8), sometimes left odd: kernels must not
// assume divisibility.
int64_t draw_dim(Rng& rng, int64_t lo, int64_t hi) {
  int64_t v = rng.log_uniform(lo, hi);
  const double r = rng.uniform();
  if (r < 0.55) {
    int64_t p = 1;
    while (p * 2 <= v) p *= 2;
    v = (v - p < 2 * p - v) || 2 * p > hi ? p : 2 * p;
  } else if (r < 0.8 && v >= 16) {
    v = v / 8 * 8;
  }
  return std::clamp<int64_t>(v, lo, hi);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

struct Draw {
  Rng& rng;
  GraphBuilder& g;
  std::vector<std::string> pattern;
};

// ---------------------------------------------------------------- main loop

Value bias_for_channels(Draw& d, int64_t channels, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
  return d.g.param("b", {channels}, uniform(-bound, bound));
}

Value main_gemm(Draw& d) {
  // K and N from 64: a GEMM of 16 columns is launch overhead, not a main loop.
  const int64_t k = draw_dim(d.rng, 64, 4096);
  const int64_t n = draw_dim(d.rng, 64, 4096);
  const int variant = static_cast<int>(d.rng.weighted({0.45, 0.25, 0.15, 0.15}));
  if (variant == 0) {  // nn.Linear on [B, K] or [B, S, K]
    const bool seq = d.rng.chance(0.3);
    const int64_t s = draw_dim(d.rng, 4, 256);
    Value x = seq ? d.g.input({s, k}) : d.g.input({k});
    Value w = d.g.param("w", {n, k}, kind("kaiming_uniform"));
    std::vector<Value> in = {x, w};
    if (d.rng.chance(0.7)) in.push_back(bias_for_channels(d, n, k));
    d.pattern.push_back("linear");
    return d.g.node("linear", in, json::object(), Domain::kAny);
  }
  if (variant == 1) {  // x @ W with W [K, N]
    Value x = d.g.input({k});
    Value w = d.g.param("w", {k, n}, kind("xavier_uniform"));
    d.pattern.push_back("matmul");
    return d.g.node("matmul", {x, w}, json::object(), Domain::kAny);
  }
  // Batched products of two kernel inputs: [B, M, K] x [B, K, N].
  const int64_t m = draw_dim(d.rng, 8, 512);
  const int64_t kk = draw_dim(d.rng, 8, 512);
  const int64_t nn = draw_dim(d.rng, 8, 512);
  Value a = d.g.input({m, kk});
  Value b = d.g.input({kk, nn});
  const std::string op = variant == 2 ? "bmm" : "matmul";
  d.pattern.push_back(op);
  return d.g.node(op, {a, b}, json::object(), Domain::kAny);
}

Value main_conv(Draw& d, int spatial, bool transposed) {
  // Image-like 3 channels sometimes; otherwise at least 16: a convolution
  // over a few channels is memory-bound whatever the kernel does.
  const int64_t cin = d.rng.chance(0.05) ? 3 : draw_dim(d.rng, 16, spatial == 3 ? 64 : (spatial == 2 ? 128 : 256));
  int64_t cout = draw_dim(d.rng, 16, spatial == 3 ? 64 : (spatial == 2 ? 256 : 256));
  const std::vector<int64_t> size_hi = {0, 4096, 256, 48};
  const std::vector<int64_t> size_lo = {0, 64, 16, 8};
  std::vector<int64_t> dims;
  const bool square = d.rng.chance(0.7);
  for (int i = 0; i < spatial; ++i) {
    dims.push_back(square && i > 0 ? dims[0] : draw_dim(d.rng, size_lo[spatial], size_hi[spatial]));
  }
  const int64_t k = d.rng.pick(spatial == 3 ? std::vector<int64_t>{1, 3, 3} : std::vector<int64_t>{1, 3, 3, 5, 7});
  const int64_t stride = d.rng.chance(transposed ? 0.6 : 0.3) ? 2 : 1;
  int64_t dilation = !transposed && k > 1 && d.rng.chance(0.12) ? 2 : 1;
  const int64_t padding = d.rng.chance(0.6) ? (k / 2) * dilation : 0;
  int64_t groups = 1;
  if (!transposed && d.rng.chance(0.15)) {  // depthwise
    groups = cin;
    cout = cin * d.rng.range(1, 2);
  } else if (d.rng.chance(0.1) && cin % 4 == 0 && cout % 4 == 0) {
    groups = 4;
  }
  json attrs = json::object();
  if (stride != 1) attrs["stride"] = stride;
  if (padding != 0) attrs["padding"] = padding;
  if (dilation != 1) attrs["dilation"] = dilation;
  if (groups != 1) attrs["groups"] = groups;
  if (transposed && stride > 1 && d.rng.chance(0.3)) attrs["output_padding"] = 1;
  Value x = d.g.input(dims.size() == 1 ? std::vector<int64_t>{cin, dims[0]}
                                       : (dims.size() == 2 ? std::vector<int64_t>{cin, dims[0], dims[1]}
                                                           : std::vector<int64_t>{cin, dims[0], dims[1], dims[2]}));
  std::vector<int64_t> wshape =
      transposed ? std::vector<int64_t>{cin, cout / groups} : std::vector<int64_t>{cout, cin / groups};
  for (int i = 0; i < spatial; ++i) wshape.push_back(k);
  Value w = d.g.param("w", wshape, kind("kaiming_uniform"));
  std::vector<Value> in = {x, w};
  int64_t fan_in = (transposed ? cout / groups : cin / groups);
  for (int i = 0; i < spatial; ++i) fan_in *= k;
  if (d.rng.chance(0.6)) in.push_back(bias_for_channels(d, cout, fan_in));
  const std::string op = std::string(transposed ? "conv_transpose" : "conv") + std::to_string(spatial) + "d";
  d.pattern.push_back(op);
  return d.g.node(op, in, attrs, Domain::kAny);
}

Value main_loop(Draw& d) {
  switch (d.rng.weighted({0.40, 0.12, 0.22, 0.08, 0.05, 0.08, 0.05})) {
    case 0:
      return main_gemm(d);
    case 1:
      return main_conv(d, 1, false);
    case 2:
      return main_conv(d, 2, false);
    case 3:
      return main_conv(d, 3, false);
    case 4:
      return main_conv(d, 1, true);
    case 5:
      return main_conv(d, 2, true);
    default:
      return main_conv(d, 3, true);
  }
}

// An epilogue-only graph starts from a plain input of rank 2-4.
Value plain_input(Draw& d) {
  const int rank = static_cast<int>(d.rng.weighted({0.45, 0.3, 0.25})) + 2;
  std::vector<int64_t> shape;
  // At least ~2,000 elements per sample: smaller rows put the batch at its
  // cap with nothing per sample to parallelize over.
  if (rank == 2) {
    shape = {draw_dim(d.rng, 2048, 16384)};
  } else if (rank == 3) {
    shape = {draw_dim(d.rng, 16, 512), draw_dim(d.rng, 128, 2048)};
  } else {
    shape = {draw_dim(d.rng, 8, 128), draw_dim(d.rng, 16, 128), draw_dim(d.rng, 16, 128)};
  }
  return d.g.input(shape);
}

// ----------------------------------------------------------------- epilogue

struct Choice {
  std::string op;
  json attrs;
  Domain domain;
};

double scalar_of(Rng& rng, const std::vector<double>& options) { return rng.pick(options); }

// One activation or unary function suited to the current value's domain.
std::optional<Choice> unary(Draw& d, const Value& cur) {
  const bool nonneg = cur.domain != Domain::kAny;
  std::vector<Choice> options = {
      {"gelu", json::object(), Domain::kAny},
      {"gelu", {{"approximate", "tanh"}}, Domain::kAny},
      {"silu", json::object(), Domain::kAny},
      {"sigmoid", json::object(), Domain::kPositive},
      {"tanh", json::object(), Domain::kAny},
      {"mish", json::object(), Domain::kAny},
      {"softplus", json::object(), Domain::kPositive},
      {"softplus", {{"beta", 2.0}}, Domain::kPositive},
      {"hardswish", json::object(), Domain::kAny},
      {"hardsigmoid", json::object(), Domain::kNonNegative},
      {"softsign", json::object(), Domain::kAny},
      {"erf", json::object(), Domain::kAny},
      {"sin", json::object(), Domain::kAny},
      {"cos", json::object(), Domain::kAny},
      {"square", json::object(), Domain::kNonNegative},
      {"neg", json::object(), Domain::kAny},
      {"exp", json::object(), Domain::kPositive},
  };
  if (!nonneg) {
    options.push_back({"relu", json::object(), Domain::kNonNegative});
    options.push_back({"relu", json::object(), Domain::kNonNegative});
    options.push_back({"relu6", json::object(), Domain::kNonNegative});
    options.push_back({"abs", json::object(), Domain::kNonNegative});
    options.push_back({"leaky_relu", {{"negative_slope", scalar_of(d.rng, {0.01, 0.1, 0.2})}}, Domain::kAny});
    options.push_back({"elu", {{"alpha", scalar_of(d.rng, {1.0, 0.5})}}, Domain::kAny});
    options.push_back({"selu", json::object(), Domain::kAny});
    options.push_back({"hardtanh", json::object(), Domain::kAny});
    options.push_back({"hardtanh", {{"min_val", -0.5}, {"max_val", 0.5}}, Domain::kAny});
    options.push_back({"sign", json::object(), Domain::kAny});
  } else {
    options.push_back({"sqrt", json::object(), Domain::kNonNegative});
    options.push_back({"log1p", json::object(), Domain::kNonNegative});
    options.push_back({"tanh", json::object(), Domain::kNonNegative});
  }
  if (cur.domain == Domain::kPositive) {
    options.push_back({"log", json::object(), Domain::kAny});
    options.push_back({"rsqrt", json::object(), Domain::kPositive});
    options.push_back({"reciprocal", json::object(), Domain::kPositive});
  }
  return d.rng.pick(options);
}

// Tensor-scalar arithmetic and clamps.
std::optional<Choice> scalar_op(Draw& d, const Value& cur) {
  switch (d.rng.range(0, 6)) {
    case 0:
      return Choice{"mul", {{"other", scalar_of(d.rng, {0.5, 2.0, 1.5, 0.25, 3.0, -1.0})}}, Domain::kAny};
    case 1:
      return Choice{"add", {{"other", scalar_of(d.rng, {1.0, 0.5, -0.5, 0.1, 2.0})}}, Domain::kAny};
    case 2:
      return Choice{"sub", {{"other", scalar_of(d.rng, {1.0, 0.5, 0.25})}}, Domain::kAny};
    case 3:
      return Choice{"div", {{"other", scalar_of(d.rng, {2.0, 4.0, 3.0, 0.5})}}, cur.domain};
    case 4:
      return Choice{"pow", {{"other", 2.0}}, Domain::kNonNegative};
    case 5: {
      const double bound = scalar_of(d.rng, {0.0, 0.5, -0.5});
      return d.rng.chance(0.5) ? Choice{"maximum", {{"other", bound}}, bound >= 0 ? Domain::kNonNegative : Domain::kAny}
                               : Choice{"minimum", {{"other", bound}}, Domain::kAny};
    }
    default: {
      const double lo = scalar_of(d.rng, {-1.0, -0.5, 0.0});
      return Choice{"clamp",
                    {{"min", lo}, {"max", lo + scalar_of(d.rng, {1.0, 2.0})}},
                    lo >= 0 ? Domain::kNonNegative : Domain::kAny};
    }
  }
}

// Index of the channel dim for (N, C, *) layouts (conv outputs), else the last dim.
bool channel_layout(const Value& cur, bool conv_like) { return conv_like && cur.type.shape.size() >= 3; }

// The shape of a param broadcast over the channel dim of (N, C, *) or over
// the last dim.
std::vector<int64_t> broadcast_param_shape(const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  std::vector<int64_t> shape;
  if (channel_layout(cur, conv_like)) {
    shape.push_back(s[1]);
    for (size_t i = 2; i < s.size(); ++i) shape.push_back(1);
  } else {
    shape.push_back(s.back());
  }
  return shape;
}

// A binary op with a broadcast param (bias or scale), a second kernel input of
// the same shape, or a residual connection to an earlier value.
std::optional<Value> binary_branch(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int kind_of = static_cast<int>(d.rng.weighted({0.45, 0.25, 0.30}));
  if (kind_of == 2) {
    std::vector<Value> sources = d.g.earlier_with_type(cur.type, cur.name);
    if (sources.empty()) return std::nullopt;
    const Value& other = d.rng.pick(sources);
    const std::string op = d.rng.pick(std::vector<std::string>{"add", "add", "mul", "sub"});
    d.pattern.push_back("residual_" + op);
    return d.g.node(op, {cur, other}, json::object(), Domain::kAny);
  }
  if (kind_of == 1) {
    std::vector<int64_t> shape(s.begin() + 1, s.end());
    const bool positive = d.rng.chance(0.2);
    Value other = d.g.input(shape, positive ? kind("positive") : normal());
    const std::string op = positive ? "div" : d.rng.pick(std::vector<std::string>{"add", "mul", "sub", "maximum"});
    d.pattern.push_back("input_" + op);
    return d.g.node(op, {cur, other}, json::object(), Domain::kAny);
  }
  const std::vector<int64_t> shape = broadcast_param_shape(cur, conv_like);
  const bool scale = d.rng.chance(0.35);
  Value p = d.g.param(scale ? "scale" : "bias", shape, scale ? normal(1.0, 0.5) : normal());
  d.pattern.push_back(scale ? "scale" : "bias");
  return d.g.node(scale ? "mul" : "add", {cur, p}, json::object(), Domain::kAny);
}

std::optional<Value> norm(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  std::vector<std::string> options = {"layer_norm", "rms_norm"};
  if (rank >= 2) options.push_back("batch_norm");
  if (rank >= 3 && conv_like) {
    options.push_back("group_norm");
    options.push_back("group_norm");
    options.push_back("instance_norm");
  }
  const std::string op = d.rng.pick(options);
  const bool affine = d.rng.chance(0.6);
  std::vector<Value> in = {cur};
  json attrs = json::object();
  if (op == "layer_norm" || op == "rms_norm") {
    if (s.back() < 2) return std::nullopt;
    attrs["normalized_ndim"] = 1;
    if (affine) {
      in.push_back(d.g.param("gamma", {s.back()}, normal(1.0, 0.1)));
      if (op == "layer_norm") in.push_back(d.g.param("beta", {s.back()}, normal(0.0, 0.1)));
    }
  } else {
    const int64_t c = s[1];
    if (op == "group_norm") {
      std::vector<int64_t> divisors;
      for (int64_t g : {2, 4, 8, 16, 32}) {
        if (c % g == 0 && g < c) divisors.push_back(g);
      }
      if (divisors.empty()) return std::nullopt;
      attrs["num_groups"] = d.rng.pick(divisors);
    }
    if (affine) {
      in.push_back(d.g.param("gamma", {c}, normal(1.0, 0.1)));
      in.push_back(d.g.param("beta", {c}, normal(0.0, 0.1)));
    }
  }
  d.pattern.push_back(op);
  return d.g.node(op, in, attrs, Domain::kAny);
}

std::optional<Value> reduction(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2) return std::nullopt;
  // Never over the batch dim: the shape variants change it.
  std::vector<int64_t> dims;
  const int64_t dim = conv_like && rank >= 3 && d.rng.chance(0.5) ? 1 : rank - 1;
  if (s[dim] < 2) return std::nullopt;
  dims.push_back(dim);
  if (conv_like && rank >= 4 && d.rng.chance(0.4)) dims = {rank - 2, rank - 1};  // global spatial
  const bool keepdim = d.rng.chance(0.4);
  const std::string op = d.rng.pick(std::vector<std::string>{"sum", "mean", "mean", "amax", "amin", "logsumexp", "norm",
                                                             "std", "var", "max", "min", "cumsum"});
  json attrs = json::object();
  if (op == "max" || op == "min" || op == "cumsum") {
    attrs["dim"] = dims.back();
  } else {
    attrs["dim"] = dims;
  }
  if (op != "cumsum") attrs["keepdim"] = keepdim;
  d.pattern.push_back(op);
  const Domain domain = op == "norm" || op == "std" || op == "var" ? Domain::kNonNegative : Domain::kAny;
  return d.g.node(op, {cur}, attrs, domain);
}

std::optional<Value> pooling(Draw& d, const Value& cur) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t spatial = static_cast<int64_t>(s.size()) - 2;
  if (spatial < 1 || spatial > 3) return std::nullopt;
  const std::string n = std::to_string(spatial) + "d";
  int64_t smallest = s[2];
  for (size_t i = 2; i < s.size(); ++i) smallest = std::min(smallest, s[i]);
  const int which = static_cast<int>(d.rng.weighted({0.4, 0.3, 0.3}));
  if (which == 2 || smallest < 4) {
    const int64_t size = smallest >= 4 && d.rng.chance(0.4) ? 2 : 1;
    const bool max = spatial == 2 && d.rng.chance(0.3);
    const std::string op = (max ? "adaptive_max_pool" : "adaptive_avg_pool") + n;
    d.pattern.push_back(op);
    return d.g.node(op, {cur}, {{"output_size", size}}, cur.domain);
  }
  const int64_t k = smallest >= 6 && d.rng.chance(0.3) ? 3 : 2;
  const std::string op = (which == 0 ? "max_pool" : "avg_pool") + n;
  d.pattern.push_back(op);
  return d.g.node(op, {cur}, {{"kernel_size", k}, {"stride", 2}}, cur.domain);
}

std::optional<Value> softmax(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2) return std::nullopt;
  const int64_t dim = conv_like && rank >= 3 && d.rng.chance(0.5) ? 1 : rank - 1;
  if (s[dim] < 2) return std::nullopt;
  const bool log = d.rng.chance(0.3);
  const std::string op = log ? "log_softmax" : "softmax";
  d.pattern.push_back(op);
  return d.g.node(op, {cur}, {{"dim", dim}}, log ? Domain::kAny : Domain::kPositive);
}

// A second main-loop op on the current value: an MLP's next linear over the
// last dim, or a convolution over (N, C, *) with the same spatial rank (the
// chains of KernelBench's level 3 and level1/86, level2/45).
std::optional<Value> chained_main_loop(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2) return std::nullopt;
  if (conv_like && rank >= 3 && rank <= 5) {
    if (s[1] < 8) return std::nullopt;  // a convolution over a reduced channel dim
    const int spatial = static_cast<int>(rank - 2);
    const int64_t cin = s[1], cout = draw_dim(d.rng, 16, 256);
    const int64_t k = d.rng.pick(std::vector<int64_t>{1, 3, 3});
    std::vector<int64_t> wshape = {cout, cin};
    for (int i = 0; i < spatial; ++i) wshape.push_back(k);
    std::vector<Value> in = {cur, d.g.param("w", wshape, kind("kaiming_uniform"))};
    int64_t fan_in = cin;
    for (int i = 0; i < spatial; ++i) fan_in *= k;
    if (d.rng.chance(0.5)) in.push_back(bias_for_channels(d, cout, fan_in));
    const std::string op = "conv" + std::to_string(spatial) + "d";
    d.pattern.push_back(op);
    json attrs = json::object();
    if (k > 1) attrs["padding"] = k / 2;
    return d.g.node(op, in, attrs, Domain::kAny);
  }
  const int64_t k = s.back(), n = draw_dim(d.rng, 64, 4096);
  std::vector<Value> in = {cur, d.g.param("w", {n, k}, kind("kaiming_uniform"))};
  if (d.rng.chance(0.7)) in.push_back(bias_for_channels(d, n, k));
  d.pattern.push_back("linear");
  return d.g.node("linear", in, json::object(), Domain::kAny);
}

// where(cur > t, cur, other): a gate on a comparison, with `other` a
// broadcast param or a scaled copy.
std::optional<Value> gate(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  if (s.size() < 2) return std::nullopt;
  const std::string cmp = d.rng.pick(std::vector<std::string>{"gt", "lt", "ge", "le"});
  const Value cond = d.g.node(cmp, {cur}, {{"other", scalar_of(d.rng, {0.0, 0.5, -0.5})}}, Domain::kAny);
  const std::vector<int64_t> shape = broadcast_param_shape(cur, conv_like);
  const Value other = d.g.param("alt", shape, normal());
  d.pattern.push_back(cmp + "_where");
  return d.g.node("where", {cond, cur, other}, json::object(), Domain::kAny);
}

// cat of the current value with an earlier one of its type (or a second
// input) along the last dim; tril/triu of the last two dims.
std::optional<Value> structural(Draw& d, const Value& cur) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2) return std::nullopt;
  if (rank >= 3 && d.rng.chance(0.4)) {
    const std::string op = d.rng.chance(0.5) ? "tril" : "triu";
    d.pattern.push_back(op);
    return d.g.node(op, {cur}, {{"diagonal", d.rng.pick(std::vector<int64_t>{0, 1, -1})}}, cur.domain);
  }
  std::vector<Value> sources = d.g.earlier_with_type(cur.type, cur.name);
  const Value other = sources.empty() ? d.g.input(std::vector<int64_t>(s.begin() + 1, s.end())) : d.rng.pick(sources);
  d.pattern.push_back("cat");
  return d.g.node("cat", {cur, other}, {{"dim", rank - 1}}, Domain::kAny);
}

// argmax/argmin (int64 indices) or prod over a short dim; only last: nothing
// in the vocabulary takes indices further.
std::optional<Value> index_reduction(Draw& d, const Value& cur) {
  const std::vector<int64_t>& s = cur.type.shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2 || s.back() < 2) return std::nullopt;
  if (s.back() <= 64 && d.rng.chance(0.5)) {
    d.pattern.push_back("prod");
    return d.g.node("prod", {cur}, {{"dim", rank - 1}}, Domain::kAny);
  }
  const std::string op = d.rng.chance(0.5) ? "argmax" : "argmin";
  d.pattern.push_back(op);
  return d.g.node(op, {cur}, {{"dim", rank - 1}}, Domain::kAny);
}

std::optional<Value> layout(Draw& d, const Value& cur, bool* conv_like) {
  const int64_t rank = static_cast<int64_t>(cur.type.shape.size());
  if (rank < 3) return std::nullopt;
  if (d.rng.chance(0.5)) {
    d.pattern.push_back("flatten");
    *conv_like = false;
    return d.g.node("flatten", {cur}, {{"start_dim", 1}}, cur.domain);
  }
  d.pattern.push_back("transpose");
  *conv_like = false;
  return d.g.node("transpose", {cur}, {{"dim0", 1}, {"dim1", rank - 1}}, cur.domain);
}

// One epilogue op after `cur`; nullopt when the drawn kind does not fit the
// current shape (the caller draws again).
std::optional<Value> epilogue_op(Draw& d, const Value& cur, bool* conv_like, bool last) {
  int category =
      static_cast<int>(d.rng.weighted({0.24, 0.17, 0.15, 0.10, 0.08, 0.05, 0.05, 0.04, 0.06, 0.03, 0.02, 0.01}));
  // A rank-1 value is the batch dim alone: only pointwise ops keep the graph
  // independent of the batch size.
  if (cur.type.shape.size() < 2 && category > 1) return std::nullopt;
  switch (category) {
    case 0: {
      auto c = unary(d, cur);
      d.pattern.push_back(c->op);
      return d.g.node(c->op, {cur}, c->attrs, c->domain);
    }
    case 1: {
      auto c = scalar_op(d, cur);
      d.pattern.push_back(c->op + "_scalar");
      return d.g.node(c->op, {cur}, c->attrs, c->domain);
    }
    case 2:
      return binary_branch(d, cur, *conv_like);
    case 3:
      return norm(d, cur, *conv_like);
    case 4:
      return reduction(d, cur, *conv_like);
    case 5:
      return pooling(d, cur);
    case 6:
      return softmax(d, cur, *conv_like);
    case 7:
      if (last) return std::nullopt;
      return layout(d, cur, conv_like);
    case 8:
      return chained_main_loop(d, cur, *conv_like);
    case 9:
      return gate(d, cur, *conv_like);
    case 10:
      return structural(d, cur);
    default:
      if (!last) return std::nullopt;
      return index_reduction(d, cur);
  }
}

}  // namespace

Tolerance synth_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return {2e-2, 2e-2};
    case DType::kBFloat16:
      return {4e-2, 4e-2};  // bfloat16's unit roundoff is 8x float16's
    default:
      return {1e-2, 1e-2};
  }
}

Composition compose(uint64_t seed, int64_t batch, const ComposeOptions& options) {
  Rng rng(seed);
  const int num_ops = static_cast<int>(rng.weighted(options.op_count_weights)) + 1;
  const double r = rng.uniform();
  const DType dtype = r < options.float16_share                            ? DType::kFloat16
                      : r < options.float16_share + options.bfloat16_share ? DType::kBFloat16
                                                                           : DType::kFloat32;
  GraphBuilder g(dtype, batch);
  Draw d{rng, g, {}};
  Value cur;
  bool conv_like = false;
  int made = 0;
  if (rng.chance(options.main_loop_share)) {
    cur = main_loop(d);
    conv_like = d.pattern.back().find("conv") != std::string::npos;
    made = 1;
  } else {
    cur = plain_input(d);
    conv_like = cur.type.shape.size() >= 4;
  }
  // Draws again when a kind does not fit; bounded so that a shape that fits
  // nothing ends the graph early instead of looping.
  for (int tries = 0; made < num_ops && tries < 40; ++tries) {
    std::optional<Value> next = epilogue_op(d, cur, &conv_like, made + 1 == num_ops);
    if (!next) continue;
    cur = *next;
    ++made;
  }
  Composition c;
  c.task = g.finish(cur.name);
  c.task.source = "synth";
  c.task.tolerance = synth_tolerance(dtype);
  c.pattern = join(d.pattern, ">");
  if (dtype != DType::kFloat32) c.pattern += " (" + dtype_name(dtype) + ")";
  return c;
}

}  // namespace kforge::synth
