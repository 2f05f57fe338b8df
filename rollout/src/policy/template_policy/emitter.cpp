#include "policy/template_policy/emitter.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace kforge::rollout::template_policy {
namespace {

const Value& at(const KernelGraph& g, int id) { return g.values[static_cast<size_t>(id)]; }

// Unary and binary helpers by op name; the generated code calls kf_<op>.
const char* const kOpFunctions = R"(Q float kf_relu(float x) { return fmaxf(x, 0.0f); }
Q float kf_relu6(float x) { return fminf(fmaxf(x, 0.0f), 6.0f); }
Q float kf_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
Q float kf_tanh(float x) { return tanhf(x); }
Q float kf_silu(float x) { return x / (1.0f + expf(-x)); }
Q float kf_softplus(float x, float beta, float threshold) {
  return x * beta > threshold ? x : log1pf(expf(beta * x)) / beta;
}
Q float kf_mish(float x) { return x * tanhf(kf_softplus(x, 1.0f, 20.0f)); }
Q float kf_softsign(float x) { return x / (1.0f + fabsf(x)); }
Q float kf_hardsigmoid(float x) { return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
Q float kf_hardswish(float x) { return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
Q float kf_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
Q float kf_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
Q float kf_elu(float x, float alpha) { return x > 0.0f ? x : alpha * expm1f(x); }
Q float kf_selu(float x) { return 1.0507009873554805f * (x > 0.0f ? x : 1.6732632423543772f * expm1f(x)); }
Q float kf_leaky_relu(float x, float slope) { return x > 0.0f ? x : x * slope; }
Q float kf_clamp(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }
Q float kf_abs(float x) { return fabsf(x); }
Q float kf_neg(float x) { return -x; }
Q float kf_exp(float x) { return expf(x); }
Q float kf_log(float x) { return logf(x); }
Q float kf_log1p(float x) { return log1pf(x); }
Q float kf_sqrt(float x) { return sqrtf(x); }
Q float kf_rsqrt(float x) { return 1.0f / sqrtf(x); }
Q float kf_reciprocal(float x) { return 1.0f / x; }
Q float kf_square(float x) { return x * x; }
Q float kf_sin(float x) { return sinf(x); }
Q float kf_cos(float x) { return cosf(x); }
Q float kf_erf(float x) { return erff(x); }
Q float kf_sign(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }
Q float kf_add(float a, float b) { return a + b; }
Q float kf_sub(float a, float b) { return a - b; }
Q float kf_mul(float a, float b) { return a * b; }
Q float kf_div(float a, float b) { return a / b; }
Q float kf_maximum(float a, float b) { return fmaxf(a, b); }
Q float kf_minimum(float a, float b) { return fminf(a, b); }
Q float kf_pow(float a, float b) { return powf(a, b); }
)";

}  // namespace

std::string indent(const std::string& text, int spaces) {
  const std::string pad(static_cast<size_t>(spaces), ' ');
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    out += pad + text.substr(pos, end - pos) + "\n";
    pos = end + 1;
  }
  return out;
}

const char* init_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "0.0f";
    case ReduceOp::kProd:
      return "1.0f";
    case ReduceOp::kMax:
      return "(-INFINITY)";
    case ReduceOp::kMin:
      return "INFINITY";
  }
  return "0.0f";
}

std::string float_literal(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  if (std::isnan(v)) return "NAN";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  s += "f";
  return s[0] == '-' ? "(" + s + ")" : s;
}

std::string op_functions(const std::string& qualifier) {
  std::string out;
  std::string text = kOpFunctions;
  // "Q " at the start of each definition.
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.rfind("Q ", 0) == 0) line = qualifier + line.substr(1);
    out += line + "\n";
    pos = end + 1;
  }
  return out;
}

std::string sizes_struct(const KernelGraph& g) {
  std::string s = "struct KfSizes {\n";
  for (const Value& v : g.values) {
    for (int k = 0; k < v.rank(); ++k) s += "  int64_t d" + std::to_string(v.id) + "_" + std::to_string(k) + ";\n";
  }
  return s + "  int64_t unused;\n};\n";
}

std::string sizes_init(const KernelGraph& g) {
  std::string s = "  KfSizes S;\n  S.unused = 0;\n";
  for (const Value& v : g.values) {
    for (int k = 0; k < v.rank(); ++k) {
      const Dim& d = v.dims[static_cast<size_t>(k)];
      std::string e = std::to_string(d.constant);
      for (const auto& [input, axis] : d.factors) {
        e += " * inputs[" + std::to_string(input) + "].shape[" + std::to_string(axis) + "]";
      }
      s += "  " + dim_var(v.id, k) + " = " + e + ";\n";
    }
  }
  return s;
}

std::string size_product(int value, int from, int to) {
  if (from >= to) return "1";
  std::string s;
  for (int k = from; k < to; ++k) s += (s.empty() ? "" : " * ") + dim_var(value, k);
  return to - from > 1 ? "(" + s + ")" : s;
}

std::string buffer_name(const KernelGraph& g, const Schedule& s, int value) {
  const int base = s.storage[static_cast<size_t>(value)];
  if (base < 0) throw std::logic_error("value " + at(g, value).name + " is not in memory");
  const Value& b = at(g, base);
  if (b.kind == ValueKind::kInput) return "in" + std::to_string(b.input_index);
  if (s.output_of[static_cast<size_t>(base)] >= 0)
    return "out" + std::to_string(s.output_of[static_cast<size_t>(base)]);
  return "t" + std::to_string(base);
}

std::vector<int> temporaries(const KernelGraph& g, const Schedule& s) {
  std::vector<int> out;
  for (const Value& v : g.values) {
    const size_t i = static_cast<size_t>(v.id);
    if (s.materialized[i] && s.storage[i] == v.id && v.kind != ValueKind::kInput && s.output_of[i] < 0) {
      out.push_back(v.id);
    }
  }
  return out;
}

void Emitter::begin(int domain, int a, int b, std::map<int, std::string> registers) {
  domain_ = domain;
  a_ = a;
  b_ = b;
  rank_ = at(g_, domain).rank();
  registers_ = std::move(registers);
  leaves_.clear();
  leaf_index_.clear();
}

Emitter::Mode Emitter::group_mode(int leaf, int from, int to) const {
  const Value& d = at(g_, domain_);
  const Value& l = at(g_, leaf);
  bool any_full = false, any_broadcast = false;
  for (int k = from; k < to; ++k) {
    if (d.unit[static_cast<size_t>(k)]) continue;
    const int lk = k - (d.rank() - l.rank());
    const bool full = lk >= 0 && !l.unit[static_cast<size_t>(lk)];
    (full ? any_full : any_broadcast) = true;
  }
  if (any_full && any_broadcast) return Mode::kGeneral;
  return any_full ? Mode::kFull : Mode::kZero;
}

int Emitter::best_split(int domain, const std::vector<int>& roots) const {
  std::vector<int> leaves;
  for (int r : roots) expression_leaves(g_, s_, r, true, &leaves);
  Emitter probe(g_, s_);
  probe.domain_ = domain;
  const int rank = at(g_, domain).rank();
  for (int a = 0; a < rank; ++a) {
    bool uniform = true;
    for (int l : leaves) {
      if (at(g_, l).kind == ValueKind::kReduce || at(g_, l).kind == ValueKind::kMatmul) {
        // Registers of row kernels are per row: they are broadcast over the
        // mid group by construction; buffers of reduces are leaves like any.
        if (!s_.materialized[static_cast<size_t>(l)]) continue;
      }
      if (probe.group_mode(l, a, rank) == Mode::kGeneral) uniform = false;
    }
    if (uniform) return a;
  }
  return rank > 0 ? rank - 1 : 0;
}

// Offset of a leaf within dims [from, to) of the domain, for group index
// `index` (a C expression).
std::string Emitter::group_offset(const Leaf& l, int from, int to, const std::string& index, Mode mode) const {
  if (mode == Mode::kZero) return "0";
  const Value& d = at(g_, domain_);
  const Value& v = at(g_, l.value);
  const int shift = d.rank() - v.rank();
  // Stride of the leaf's dim aligned with domain dim k: the product of the
  // leaf's dims after it.
  auto leaf_stride = [&](int k) { return size_product(v.id, k - shift + 1, v.rank()); };
  if (mode == Mode::kFull) {
    // The flattened group index steps the leaf by the stride of the group's
    // last non-unit dim (the unit dims after it are 1 in the leaf too).
    int last = to - 1;
    while (last >= from && d.unit[static_cast<size_t>(last)]) --last;
    const std::string stride = last >= from ? leaf_stride(last) : "1";
    return stride == "1" ? "(" + index + ")" : "(" + index + ") * " + stride;
  }
  std::string sum;
  for (int k = from; k < to; ++k) {
    const int lk = k - shift;
    if (d.unit[static_cast<size_t>(k)] || lk < 0 || v.unit[static_cast<size_t>(lk)]) continue;
    const std::string below = size_product(d.id, k + 1, to);
    std::string idx = below == "1" ? "(" + index + ")" : "((" + index + ") / " + below + ")";
    idx = "(" + idx + " % " + dim_var(d.id, k) + ")";
    const std::string stride = leaf_stride(k);
    sum += (sum.empty() ? "" : " + ") + (stride == "1" ? idx : idx + " * " + stride);
  }
  return sum.empty() ? "0" : "(" + sum + ")";
}

std::string Emitter::load(int value, const std::string& k_var) {
  auto it = leaf_index_.find(value);
  size_t n = 0;
  if (it == leaf_index_.end()) {
    Leaf l;
    l.value = value;
    l.outer = group_mode(value, 0, a_);
    l.mid = group_mode(value, a_, b_);
    l.inner = group_mode(value, b_, rank_);
    n = leaves_.size();
    leaves_.push_back(l);
    leaf_index_[value] = n;
  } else {
    n = it->second;
  }
  const Leaf& l = leaves_[n];
  const std::string ns = std::to_string(n);
  if (lane_ >= 0 && b_ == rank_ && l.mid == Mode::kFull) return "L" + ns + "." + "xyzw"[lane_];
  std::string off = "ro" + ns;
  if (b_ < rank_) {
    if (l.mid != Mode::kZero) off += " + mo" + ns;
    if (l.inner != Mode::kZero) off += " + " + group_offset(l, b_, rank_, "i", l.inner);
  } else if (l.mid != Mode::kZero) {
    off += " + " + group_offset(l, a_, b_, k_var, l.mid);
  }
  return "p" + ns + "[" + off + "]";
}

std::string Emitter::call_code(const Expr& e, const std::vector<int>& operands, const std::string& k_var) {
  switch (e.kind) {
    case Expr::Kind::kOperand:
      return expr(operands[static_cast<size_t>(e.operand)], false, k_var);
    case Expr::Kind::kConst:
      return float_literal(e.value);
    case Expr::Kind::kRuntime:
      return "(" + e.code + ")";
    case Expr::Kind::kCall:
      break;
  }
  std::string s = "kf_" + e.op + "(";
  for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + call_code(*e.args[i], operands, k_var);
  for (double p : e.params) s += ", " + float_literal(p);
  return s + ")";
}

std::string Emitter::expr(int value, bool as_root, const std::string& k_var) {
  if (auto it = registers_.find(value); it != registers_.end()) return it->second;
  const Value& v = at(g_, value);
  const bool inline_it = v.kind == ValueKind::kPointwise && (as_root || !s_.materialized[static_cast<size_t>(value)]);
  if (inline_it) return call_code(*v.expr, v.operands, k_var);
  return load(value, k_var);
}

std::string Emitter::row_offsets(const std::string& o_var) const {
  std::string s;
  for (size_t n = 0; n < leaves_.size(); ++n) {
    s += "const int64_t ro" + std::to_string(n) + " = " + group_offset(leaves_[n], 0, a_, o_var, leaves_[n].outer) +
         ";\n";
  }
  return s;
}

std::string Emitter::mid_offsets(const std::string& k_var) const {
  std::string s;
  for (size_t n = 0; n < leaves_.size(); ++n) {
    if (leaves_[n].mid == Mode::kZero) continue;
    s += "const int64_t mo" + std::to_string(n) + " = " + group_offset(leaves_[n], a_, b_, k_var, leaves_[n].mid) +
         ";\n";
  }
  return s;
}

std::string Emitter::leaf_pointers(const std::string& indent) const {
  std::string s;
  for (size_t n = 0; n < leaves_.size(); ++n) {
    s += indent + "const float* __restrict__ p" + std::to_string(n) + " = " + buffer_name(g_, s_, leaves_[n].value) +
         ";\n";
  }
  return s;
}

std::string Emitter::leaf_params() const {
  std::string s;
  for (size_t n = 0; n < leaves_.size(); ++n) s += ", const float* __restrict__ p" + std::to_string(n);
  return s;
}

std::string Emitter::leaf_args() const {
  std::string s;
  for (const Leaf& l : leaves_) s += ", " + buffer_name(g_, s_, l.value);
  return s;
}

std::string Emitter::vector_loads(const std::string& k_var) const {
  std::string s;
  for (size_t n = 0; n < leaves_.size(); ++n) {
    if (leaves_[n].mid != Mode::kFull) continue;
    const std::string ns = std::to_string(n);
    s += "const float4 L" + ns + " = *reinterpret_cast<const float4*>(p" + ns + " + ro" + ns + " + " + k_var + ");\n";
  }
  return s;
}

std::vector<std::string> Emitter::vector_buffers() const {
  std::vector<std::string> out;
  for (const Leaf& l : leaves_) {
    if (l.mid == Mode::kFull) out.push_back(buffer_name(g_, s_, l.value));
  }
  return out;
}

bool Emitter::mid_is_simple() const {
  for (const Leaf& l : leaves_) {
    if (l.mid == Mode::kGeneral) return false;
  }
  return true;
}

std::string conv_sizes(const KernelGraph& g, int conv) {
  const Value& c = g.values[static_cast<size_t>(conv)];
  const int x = c.operands[0], w = c.operands[1];
  std::ostringstream o;
  o << "const int64_t N = " << dim_var(x, 0) << ", Ci = " << dim_var(x, 1) << ", Co = " << dim_var(conv, 1)
    << ", G = " << c.conv.groups << ", Cig = Ci / G, Cog = Co / G;\n";
  std::string is = "1", ks = "1", os = "1";
  for (int d = 0; d < c.conv.spatial; ++d) {
    const std::string n = std::to_string(d);
    o << "const int64_t I" << n << " = " << dim_var(x, d + 2) << ", K" << n << " = " << dim_var(w, d + 2) << ", O" << n
      << " = " << dim_var(conv, d + 2) << ";\n";
    is += " * I" + n;
    ks += " * K" + n;
    os += " * O" + n;
  }
  o << "const int64_t IS = " << is << ", KS = " << ks << ", OS = " << os << ";\n";
  return o.str();
}

std::string conv_element(const KernelGraph& g, int conv, const std::string& idx) {
  const Value& c = g.values[static_cast<size_t>(conv)];
  const int n = c.conv.spatial;
  std::ostringstream o;
  o << "const int64_t os = " << idx << " % OS, co = (" << idx << " / OS) % Co, n = " << idx << " / (OS * Co);\n";
  // The output position, then each tap's input position (last dim fastest).
  o << "int64_t r = os;\n";
  for (int d = n - 1; d >= 0; --d) {
    const std::string s = std::to_string(d);
    o << "const int64_t o" << s << " = r % O" << s << ";\nr /= O" << s << ";\n";
  }
  o << "const int64_t grp = co / Cog;\nfloat acc = 0.0f;\n";
  o << "for (int64_t ci = 0; ci < Cig; ++ci) {\n";
  o << "  const float* xc = px + (n * Ci + grp * Cig + ci) * IS;\n";
  // Weights: [Co, Cig, K...], or transposed [Ci, Cog, K...].
  o << "  const float* wc = pw + "
    << (c.conv.transposed ? "((grp * Cig + ci) * Cog + co % Cog) * KS" : "(co * Cig + ci) * KS") << ";\n";
  o << "  for (int64_t ks = 0; ks < KS; ++ks) {\n    int64_t q = ks;\n";
  std::string offset = "0";
  for (int d = n - 1; d >= 0; --d) {
    const std::string s = std::to_string(d);
    const size_t i = static_cast<size_t>(d);
    o << "    const int64_t k" << s << " = q % K" << s << ";\n    q /= K" << s << ";\n";
    if (c.conv.transposed) {
      // Output o receives input i where o = i stride - padding + k dilation.
      o << "    const int64_t t" << s << " = o" << s << " + " << c.conv.padding[i] << " - k" << s << " * "
        << c.conv.dilation[i] << ";\n";
      o << "    if (t" << s << " < 0 || t" << s << " % " << c.conv.stride[i] << " != 0) continue;\n";
      o << "    const int64_t i" << s << " = t" << s << " / " << c.conv.stride[i] << ";\n";
      o << "    if (i" << s << " >= I" << s << ") continue;\n";
    } else {
      o << "    const int64_t i" << s << " = o" << s << " * " << c.conv.stride[i] << " - " << c.conv.padding[i]
        << " + k" << s << " * " << c.conv.dilation[i] << ";\n";
      o << "    if (i" << s << " < 0 || i" << s << " >= I" << s << ") continue;\n";
    }
  }
  for (int d = 0; d < n; ++d) offset = "(" + offset + ") * I" + std::to_string(d) + " + i" + std::to_string(d);
  o << "    acc += xc[" << offset << "] * wc[ks];\n  }\n}\n";
  if (c.operands.size() > 2) o << "acc += pb[co];\n";
  return o.str();
}

}  // namespace kforge::rollout::template_policy
