// Elementwise ops: binary arithmetic with PyTorch broadcasting (tensor-tensor,
// or tensor-scalar through the `other` attr), comparisons, where, clamp and
// unary math.
#include "ops/op_helpers.h"

namespace kforge::ops {
namespace {

enum class BinaryKind {
  kArithmetic,  // result dtype of the operands
  kTrueDivide,  // integers divide to float32, as torch.div does
  kComparison,  // bool
};

// Two tensors, or one tensor and the scalar attr `other`.
TensorType infer_binary(const Types& in, const json& attrs, BinaryKind kind) {
  const bool scalar = has(attrs, "other");
  if (in.size() == 2 && scalar) {
    fail("got two inputs and attr \"other\"; give either a second tensor or the scalar \"other\", not both");
  }
  if (in.size() == 1 && !scalar) fail("needs a second input tensor or the scalar attr \"other\"");
  TensorType out;
  if (scalar) {
    out = {in[0].shape, promote_with_scalar(in[0].dtype, attrs.at("other"))};
  } else {
    require_same_dtype(in, 0, 1);
    out = {broadcast_shapes(in, 0, 1), in[0].dtype};
  }
  if (kind == BinaryKind::kTrueDivide) out.dtype = float_result(out.dtype);
  if (kind == BinaryKind::kComparison) out.dtype = DType::kBool;
  if (kind == BinaryKind::kArithmetic && out.dtype == DType::kBool) {
    fail(arg_label(in, 0) + " is bool; arithmetic needs numeric tensors");
  }
  return out;
}

struct BinaryDef {
  std::string name;
  std::string doc;
  BinaryKind kind;
  bool has_alpha;
  std::string py_fn;         // torch function taking (a, b)
  std::string py_scalar_fn;  // used instead when `other` is a scalar ("" = py_fn)
};

struct UnaryDef {
  std::string name;
  std::string doc;
  bool float_result;  // integer inputs give float32 (exp, sin, ...)
  std::string py_fn;
  double flops;
};

TensorType infer_unary(const Types& in, const std::string& name, bool to_float) {
  if (in[0].dtype == DType::kBool) {
    fail(arg_label(in, 0) + " is bool; " + name + " needs a numeric tensor");
  }
  return {in[0].shape, to_float ? float_result(in[0].dtype) : in[0].dtype};
}

TensorType infer_where(const Types& in, const json&) {
  if (in[0].dtype != DType::kBool) {
    fail(arg_label(in, 0) + " is " + dtype_name(in[0].dtype) + "; the condition of where must be bool");
  }
  require_same_dtype(in, 1, 2);
  bool ok = true;
  std::vector<int64_t> shape = broadcast_shapes(in[0].shape, in[1].shape, &ok);
  if (ok) shape = broadcast_shapes(shape, in[2].shape, &ok);
  if (!ok) {
    fail("shapes do not broadcast: " + arg_shape(in, 0) + ", " + arg_shape(in, 1) + " and " + arg_shape(in, 2));
  }
  return {shape, in[1].dtype};
}

TensorType infer_clamp(const Types& in, const json& attrs) {
  if (!has(attrs, "min") && !has(attrs, "max")) fail("needs at least one of the attrs \"min\" and \"max\"");
  if (in[0].dtype == DType::kBool) fail(arg_label(in, 0) + " is bool; clamp needs a numeric tensor");
  DType d = in[0].dtype;
  for (const char* k : {"min", "max"}) {
    if (has(attrs, k)) d = promote_with_scalar(d, attrs.at(k));
  }
  if (has(attrs, "min") && has(attrs, "max") && attrs.at("min").get<double>() > attrs.at("max").get<double>()) {
    fail("attr \"min\" (" + py_literal(attrs.at("min")) + ") is above \"max\" (" + py_literal(attrs.at("max")) + ")");
  }
  return {in[0].shape, d};
}

// a op b, or a op scalar: arithmetic and comparisons.
void register_binary_ops(OpRegistry& r) {
  const std::vector<BinaryDef> binaries = {
      {"add", "a + alpha * b", BinaryKind::kArithmetic, true, "torch.add", ""},
      {"sub", "a - alpha * b", BinaryKind::kArithmetic, true, "torch.sub", ""},
      {"mul", "a * b", BinaryKind::kArithmetic, false, "torch.mul", ""},
      {"div", "a / b (true division: integers give float32)", BinaryKind::kTrueDivide, false, "torch.div", ""},
      {"maximum", "elementwise max(a, b)", BinaryKind::kArithmetic, false, "torch.maximum", "torch.clamp_min"},
      {"minimum", "elementwise min(a, b)", BinaryKind::kArithmetic, false, "torch.minimum", "torch.clamp_max"},
      {"pow", "a ** b", BinaryKind::kArithmetic, false, "torch.pow", ""},
      {"eq", "a == b (bool)", BinaryKind::kComparison, false, "torch.eq", ""},
      {"ne", "a != b (bool)", BinaryKind::kComparison, false, "torch.ne", ""},
      {"lt", "a < b (bool)", BinaryKind::kComparison, false, "torch.lt", ""},
      {"le", "a <= b (bool)", BinaryKind::kComparison, false, "torch.le", ""},
      {"gt", "a > b (bool)", BinaryKind::kComparison, false, "torch.gt", ""},
      {"ge", "a >= b (bool)", BinaryKind::kComparison, false, "torch.ge", ""},
  };
  for (const auto& d : binaries) {
    OpSchema s;
    s.name = d.name;
    s.category = OpCategory::kElementwise;
    s.min_inputs = 1;
    s.max_inputs = 2;
    s.attrs = {attr_optional("other", "number", "scalar second operand, instead of a second input")};
    if (d.has_alpha) s.attrs.push_back(AttrSchema{"alpha", "number", 1, "multiplier of the second operand", false, {}});
    s.doc = d.doc + "; two tensors (broadcast) or a tensor and the scalar attr \"other\"";
    const BinaryKind kind = d.kind;
    s.infer = [kind](const Types& in, const json& attrs) { return infer_binary(in, attrs, kind); };
    s.flops = flops_per_output(d.name == "pow" ? 10 : 1);
    const BinaryDef def = d;
    s.python = [def](const Args& args, const Types&, const json& attrs) {
      const bool scalar = has(attrs, "other");
      Args call = args;
      if (scalar) call.push_back(py_literal(attrs.at("other")));
      std::string kwargs;
      if (def.has_alpha && !(attrs.at("alpha").is_number_integer() && attrs.at("alpha").get<int64_t>() == 1)) {
        kwargs = "alpha=" + py_literal(attrs.at("alpha"));
      }
      return py_call(scalar && !def.py_scalar_fn.empty() ? def.py_scalar_fn : def.py_fn, call, kwargs);
    };
    r.add(std::move(s));
  }
}

// The two ops that take other than one or two operands.
void register_where_and_clamp(OpRegistry& r) {
  OpSchema where;
  where.name = "where";
  where.category = OpCategory::kElementwise;
  where.min_inputs = where.max_inputs = 3;
  where.doc = "torch.where(cond, a, b): a where the bool cond holds, else b (broadcast)";
  where.infer = infer_where;
  where.flops = flops_per_output(1);
  where.python = [](const Args& args, const Types&, const json&) { return py_call("torch.where", args); };
  r.add(std::move(where));

  OpSchema clamp;
  clamp.name = "clamp";
  clamp.category = OpCategory::kElementwise;
  clamp.attrs = {attr_optional("min", "number", "lower bound (absent: none)"),
                 attr_optional("max", "number", "upper bound (absent: none)")};
  clamp.doc = "torch.clamp(x, min, max); at least one bound";
  clamp.infer = infer_clamp;
  clamp.flops = flops_per_output(2);
  clamp.python = [](const Args& args, const Types&, const json& attrs) {
    return py_call("torch.clamp", args, py_kwargs(attrs, {"min", "max"}));
  };
  r.add(std::move(clamp));
}

// f(x), one op per function.
void register_unary_ops(OpRegistry& r) {
  const std::vector<UnaryDef> unaries = {
      {"abs", "|x|", false, "torch.abs", 1},
      {"neg", "-x", false, "torch.neg", 1},
      {"exp", "e^x", true, "torch.exp", 4},
      {"log", "natural log", true, "torch.log", 4},
      {"log1p", "log(1 + x)", true, "torch.log1p", 4},
      {"sqrt", "square root", true, "torch.sqrt", 2},
      {"rsqrt", "1 / sqrt(x)", true, "torch.rsqrt", 2},
      {"reciprocal", "1 / x", true, "torch.reciprocal", 1},
      {"square", "x * x", false, "torch.square", 1},
      {"sin", "sine", true, "torch.sin", 4},
      {"cos", "cosine", true, "torch.cos", 4},
      {"erf", "error function", true, "torch.erf", 8},
      {"sign", "-1, 0 or 1 by the sign of x", false, "torch.sign", 1},
  };
  for (const auto& d : unaries) {
    OpSchema s;
    s.name = d.name;
    s.category = OpCategory::kElementwise;
    s.doc = d.doc;
    const std::string name = d.name;
    const bool to_float = d.float_result;
    s.infer = [name, to_float](const Types& in, const json&) { return infer_unary(in, name, to_float); };
    s.flops = flops_per_output(d.flops);
    const std::string fn = d.py_fn;
    s.python = [fn](const Args& args, const Types&, const json&) { return py_call(fn, args); };
    r.add(std::move(s));
  }
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  register_binary_ops(r);
  register_where_and_clamp(r);
  register_unary_ops(r);
}

}  // namespace kforge::ops
