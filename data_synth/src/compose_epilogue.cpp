// The composer's epilogue ops: activations and unary functions chosen for
// the value's known domain, tensor-scalar arithmetic and clamps, bias/scale
// params, second inputs, residuals, norms, reductions, pooling, softmax,
// layout ops, chained main loops, gates (where on a comparison), cat,
// tril/triu and the index reductions that may only come last.
#include <algorithm>

#include "compose_graph.h"

namespace kforge::synth::internal {
namespace {

// The share of graphs whose last op is drawn as an index reduction first.
constexpr double kIndexReductionShare = 0.12;

struct Choice {
  std::string op;
  json attrs;
  Domain domain;
  std::optional<double> atom = std::nullopt;
};

double scalar_of(Rng& rng, const std::vector<double>& options) { return rng.pick(options); }

// log(exp(x)) and exp(log(x)) are x: a kernel would skip both ops.
bool log_fits(const Value& cur) { return cur.domain == Domain::kPositive && cur.op != "exp"; }

// One activation or unary function suited to the current value's domain.
Choice unary(Draw& d, const Value& cur) {
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
  };
  if (cur.op != "log") options.push_back({"exp", json::object(), Domain::kPositive});
  if (!nonneg) {
    // The clipping activations leave a share of the elements at their bound:
    // an atom that eq/ne can test (gate).
    options.push_back({"relu", json::object(), Domain::kNonNegative, 0.0});
    options.push_back({"relu", json::object(), Domain::kNonNegative, 0.0});
    options.push_back({"relu6", json::object(), Domain::kNonNegative, 0.0});
    options.push_back({"abs", json::object(), Domain::kNonNegative});
    options.push_back({"leaky_relu", {{"negative_slope", scalar_of(d.rng, {0.01, 0.1, 0.2})}}, Domain::kAny});
    options.push_back({"elu", {{"alpha", scalar_of(d.rng, {1.0, 0.5})}}, Domain::kAny});
    options.push_back({"selu", json::object(), Domain::kAny});
    options.push_back({"hardtanh", json::object(), Domain::kAny, -1.0});
    options.push_back({"hardtanh", {{"min_val", -0.5}, {"max_val", 0.5}}, Domain::kAny, -0.5});
    options.push_back({"sign", json::object(), Domain::kAny, 1.0});
  } else {
    options.push_back({"sqrt", json::object(), Domain::kNonNegative});
    options.push_back({"log1p", json::object(), Domain::kNonNegative});
    options.push_back({"tanh", json::object(), Domain::kNonNegative});
  }
  if (cur.domain == Domain::kPositive) {
    if (log_fits(cur)) {
      options.push_back({"log", json::object(), Domain::kAny});
      options.push_back({"log", json::object(), Domain::kAny});
    }
    options.push_back({"rsqrt", json::object(), Domain::kPositive});
    options.push_back({"reciprocal", json::object(), Domain::kPositive});
  }
  return d.rng.pick(options);
}

// Tensor-scalar arithmetic and clamps, with what they do to the domain: a
// positive scale keeps it, a positive shift makes a non-negative value
// positive (relu(x) + 0.5 may go into log), and a clamp or max/min with a
// scalar leaves an atom at its bound.
Choice scalar_op(Draw& d, const Value& cur) {
  switch (d.rng.range(0, 6)) {
    case 0: {
      const double s = scalar_of(d.rng, {0.5, 2.0, 1.5, 0.25, 3.0, -1.0});
      return Choice{"mul", {{"other", s}}, s > 0 ? cur.domain : Domain::kAny};
    }
    case 1: {
      const double s = scalar_of(d.rng, {1.0, 0.5, -0.5, 0.1, 2.0});
      return Choice{"add", {{"other", s}}, s > 0 && cur.domain != Domain::kAny ? Domain::kPositive : Domain::kAny};
    }
    case 2:
      return Choice{"sub", {{"other", scalar_of(d.rng, {1.0, 0.5, 0.25})}}, Domain::kAny};
    case 3:
      return Choice{"div", {{"other", scalar_of(d.rng, {2.0, 4.0, 3.0, 0.5})}}, cur.domain};
    case 4:
      return Choice{"pow", {{"other", 2.0}}, Domain::kNonNegative};
    case 5: {
      const double bound = scalar_of(d.rng, {0.0, 0.5, -0.5});
      return d.rng.chance(0.5)
                 ? Choice{"maximum",
                          {{"other", bound}},
                          bound > 0 ? Domain::kPositive : (bound == 0 ? Domain::kNonNegative : Domain::kAny),
                          bound}
                 : Choice{"minimum", {{"other", bound}}, Domain::kAny, bound};
    }
    default: {
      const double lo = scalar_of(d.rng, {-1.0, -0.5, 0.0});
      return Choice{"clamp",
                    {{"min", lo}, {"max", lo + scalar_of(d.rng, {1.0, 2.0})}},
                    lo >= 0 ? Domain::kNonNegative : Domain::kAny,
                    lo};
    }
  }
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

// where(cur > t, cur, other): a gate on a comparison, with `other` a
// broadcast param. On a value with an atom (the bound a relu or clamp
// clipped to) the comparison is usually eq/ne against that atom: the clipped
// elements are replaced by the param (where(cur == a, other, cur), or
// where(cur != a, cur, other)), a mask that is true for a share of the
// elements and false for the rest. eq/ne against a continuous value would be
// all false (constant_node rejects that).
std::optional<Value> gate(Draw& d, const Value& cur, bool conv_like) {
  const std::vector<int64_t>& s = cur.type.shape;
  if (s.size() < 2) return std::nullopt;
  const std::vector<int64_t> shape = broadcast_param_shape(cur, conv_like);
  if (cur.atom && d.rng.chance(0.7)) {
    const bool eq = d.rng.chance(0.5);
    const Value cond = d.g.node(eq ? "eq" : "ne", {cur}, {{"other", *cur.atom}}, Domain::kAny);
    const Value other = d.g.param("alt", shape, normal());
    d.pattern.push_back(std::string(eq ? "eq" : "ne") + "_where");
    return eq ? d.g.node("where", {cond, other, cur}, json::object(), Domain::kAny)
              : d.g.node("where", {cond, cur, other}, json::object(), Domain::kAny);
  }
  const std::string cmp = d.rng.pick(std::vector<std::string>{"gt", "lt", "ge", "le"});
  const Value cond = d.g.node(cmp, {cur}, {{"other", scalar_of(d.rng, {0.0, 0.5, -0.5})}}, Domain::kAny);
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
  // prod only over a short dim (a long product under- or overflows); the
  // index reductions take two thirds of the draws where prod fits.
  if (s.back() <= 64 && d.rng.chance(1.0 / 3)) {
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

}  // namespace

std::optional<Value> epilogue_op(Draw& d, const Value& cur, bool* conv_like, bool last) {
  // The follow-ups a value invites: a mask on the bound a relu or clamp
  // clipped to (eq/ne), the log (or rsqrt, reciprocal) of a positive value (log after exp excluded,
  // after softplus, sigmoid, softmax, relu + c, ...). Drawn first so that eq,
  // ne and log are reached at a useful rate rather than at the product of a
  // rare category and a rare choice inside it (a 1,000-task set had none).
  if (cur.atom && cur.type.shape.size() >= 2 && d.rng.chance(0.4)) return gate(d, cur, *conv_like);
  // The last op is an index reduction (argmax/argmin, or prod) this often:
  // drawn as one of twelve categories it came out in 1 task of 1,000 on the
  // H200 (argmax in none), and contamination by work rejects those whose
  // dominant part is a lone reduction.
  if (last && d.rng.chance(kIndexReductionShare)) {
    if (std::optional<Value> v = index_reduction(d, cur)) return v;
  }
  if (log_fits(cur) && d.rng.chance(0.3)) {
    // rsqrt and reciprocal share the draw: they too are defined only on
    // positive values, and a draw that took every positive value to log
    // left them unused in a 1,000-task set.
    const std::string op = d.rng.pick(std::vector<std::string>{"log", "log", "log", "rsqrt", "reciprocal"});
    d.pattern.push_back(op);
    return d.g.node(op, {cur}, json::object(), op == "log" ? Domain::kAny : Domain::kPositive);
  }
  int category =
      static_cast<int>(d.rng.weighted({0.24, 0.17, 0.15, 0.10, 0.08, 0.05, 0.05, 0.04, 0.06, 0.03, 0.02, 0.01}));
  // A rank-1 value is the batch dim alone: only pointwise ops keep the graph
  // independent of the batch size.
  if (cur.type.shape.size() < 2 && category > 1) return std::nullopt;
  switch (category) {
    case 0: {
      const Choice c = unary(d, cur);
      d.pattern.push_back(c.op);
      return d.g.node(c.op, {cur}, c.attrs, c.domain, c.atom);
    }
    case 1: {
      const Choice c = scalar_op(d, cur);
      d.pattern.push_back(c.op + "_scalar");
      return d.g.node(c.op, {cur}, c.attrs, c.domain, c.atom);
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

}  // namespace kforge::synth::internal
