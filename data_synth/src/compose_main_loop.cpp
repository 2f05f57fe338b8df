// The composer's main-loop ops (GEMM, batched GEMM, convolution, transposed
// convolution), the plain input of an epilogue-only graph, and the graph
// builder they all draw through.
#include <algorithm>
#include <cmath>

#include "compose_graph.h"

namespace kforge::synth::internal {

Value GraphBuilder::input(std::vector<int64_t> shape, InitSpec init) {
  shape.insert(shape.begin(), batch_);
  TensorSpec t{"x" + (inputs_ == 0 ? std::string() : std::to_string(inputs_ + 1)), shape, dtype_, init};
  ++inputs_;
  task_.inputs.push_back(t);
  return {t.name, TensorType(t.shape, t.dtype, t.name), init.kind == "positive" ? Domain::kPositive : Domain::kAny,
          std::nullopt, ""};
}

Value GraphBuilder::param(const std::string& stem, std::vector<int64_t> shape, InitSpec init) {
  TensorSpec t{stem + std::to_string(params_++), std::move(shape), dtype_, std::move(init)};
  task_.params.push_back(t);
  return {t.name, TensorType(t.shape, t.dtype, t.name), Domain::kAny, std::nullopt, ""};
}

Value GraphBuilder::node(const std::string& op, const std::vector<Value>& in, json attrs, Domain domain,
                         std::optional<double> atom) {
  GraphNode n{op, {}, "t" + std::to_string(task_.nodes.size()), std::move(attrs)};
  std::vector<TensorType> types;
  for (const auto& v : in) {
    n.in.push_back(v.name);
    types.push_back(v.type);
  }
  TensorType out = infer_node(n, types, "node " + std::to_string(task_.nodes.size()) + " (" + op + ")");
  out.name = n.out;
  task_.nodes.push_back(n);
  values_.push_back({n.out, out, domain, atom, op});
  return values_.back();
}

std::vector<Value> GraphBuilder::earlier_with_type(const TensorType& t, const std::string& except) const {
  std::vector<Value> out;
  for (const auto& v : values_) {
    if (v.name != except && v.type.shape == t.shape && v.type.dtype == t.dtype) out.push_back(v);
  }
  return out;
}

TaskSpec GraphBuilder::finish(const std::string& output) {
  task_.outputs = {output};
  return task_;
}

InitSpec normal(double mean, double std) {
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

std::vector<int64_t> broadcast_param_shape(const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  std::vector<int64_t> shape;
  if (conv_like && s.size() >= 3) {
    shape.push_back(s[1]);
    for (size_t i = 2; i < s.size(); ++i) shape.push_back(1);
  } else {
    shape.push_back(s.back());
  }
  return shape;
}

namespace {

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

}  // namespace

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

// The chains of KernelBench's level 3 and level1/86, level2/45.
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

}  // namespace kforge::synth::internal
