// Activations, elementwise arithmetic and softmax.
#include "ops/op_helpers.h"
#include "reference/aten_ops.h"

namespace kforge::ref::internal {
namespace {

using ops::get_float;
using ops::get_int;
using ops::has;

using TensorTensorFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
using TensorScalarFn = std::function<at::Tensor(const at::Tensor&, const at::Scalar&)>;

// Binary ops take a second tensor or the scalar attr `other`.
AtenOp binary(TensorTensorFn tensor_fn, TensorScalarFn scalar_fn) {
  return [tensor_fn, scalar_fn](const Tensors& in, const json& a) {
    if (has(a, "other")) return scalar_fn(in[0], to_scalar(a.at("other")));
    return tensor_fn(in[0], in[1]);
  };
}

AtenOp unary(at::Tensor (*fn)(const at::Tensor&)) {
  return [fn](const Tensors& in, const json&) { return fn(in[0]); };
}

// Activations.
void add_activations(AtenOpTable& t) {
  t["relu"] = unary(at::relu);
  t["relu6"] = [](const Tensors& in, const json&) { return at::hardtanh(in[0], 0, 6); };
  t["leaky_relu"] = [](const Tensors& in, const json& a) {
    return at::leaky_relu(in[0], get_float(a, "negative_slope"));
  };
  t["elu"] = [](const Tensors& in, const json& a) { return at::elu(in[0], get_float(a, "alpha")); };
  t["selu"] = unary(at::selu);
  t["gelu"] = [](const Tensors& in, const json& a) { return at::gelu(in[0], a.at("approximate").get<std::string>()); };
  t["silu"] = unary(at::silu);
  t["mish"] = unary(at::mish);
  t["sigmoid"] = unary(at::sigmoid);
  t["tanh"] = unary(at::tanh);
  t["softplus"] = [](const Tensors& in, const json& a) {
    return at::softplus(in[0], get_float(a, "beta"), get_float(a, "threshold"));
  };
  // As F.softsign spells it: input / (input.abs() + 1).
  t["softsign"] = [](const Tensors& in, const json&) { return in[0] / (in[0].abs() + 1); };
  t["hardswish"] = unary(at::hardswish);
  t["hardsigmoid"] = unary(at::hardsigmoid);
  t["hardtanh"] = [](const Tensors& in, const json& a) {
    return at::hardtanh(in[0], get_float(a, "min_val"), get_float(a, "max_val"));
  };
}

// Binary elementwise ops.
void add_binary_ops(AtenOpTable& t) {
  t["add"] = [](const Tensors& in, const json& a) {
    const at::Scalar alpha = to_scalar(a.at("alpha"));
    if (has(a, "other")) return at::add(in[0], to_scalar(a.at("other")), alpha);
    return at::add(in[0], in[1], alpha);
  };
  t["sub"] = [](const Tensors& in, const json& a) {
    const at::Scalar alpha = to_scalar(a.at("alpha"));
    if (has(a, "other")) return at::sub(in[0], to_scalar(a.at("other")), alpha);
    return at::sub(in[0], in[1], alpha);
  };
  t["mul"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::mul(x, y); },
                    [](const at::Tensor& x, const at::Scalar& s) { return at::mul(x, s); });
  t["div"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::div(x, y); },
                    [](const at::Tensor& x, const at::Scalar& s) { return at::div(x, s); });
  t["maximum"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::maximum(x, y); },
                        [](const at::Tensor& x, const at::Scalar& s) { return at::clamp_min(x, s); });
  t["minimum"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::minimum(x, y); },
                        [](const at::Tensor& x, const at::Scalar& s) { return at::clamp_max(x, s); });
  t["pow"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::pow(x, y); },
                    [](const at::Tensor& x, const at::Scalar& s) { return at::pow(x, s); });
  t["eq"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::eq(x, y); },
                   [](const at::Tensor& x, const at::Scalar& s) { return at::eq(x, s); });
  t["ne"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::ne(x, y); },
                   [](const at::Tensor& x, const at::Scalar& s) { return at::ne(x, s); });
  t["lt"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::lt(x, y); },
                   [](const at::Tensor& x, const at::Scalar& s) { return at::lt(x, s); });
  t["le"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::le(x, y); },
                   [](const at::Tensor& x, const at::Scalar& s) { return at::le(x, s); });
  t["gt"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::gt(x, y); },
                   [](const at::Tensor& x, const at::Scalar& s) { return at::gt(x, s); });
  t["ge"] = binary([](const at::Tensor& x, const at::Tensor& y) { return at::ge(x, y); },
                   [](const at::Tensor& x, const at::Scalar& s) { return at::ge(x, s); });
  t["where"] = [](const Tensors& in, const json&) { return at::where(in[0], in[1], in[2]); };
  t["clamp"] = [](const Tensors& in, const json& a) {
    c10::optional<at::Scalar> lo, hi;
    if (has(a, "min")) lo = to_scalar(a.at("min"));
    if (has(a, "max")) hi = to_scalar(a.at("max"));
    return at::clamp(in[0], lo, hi);
  };
}

// Unary elementwise ops.
void add_unary_ops(AtenOpTable& t) {
  t["abs"] = unary(at::abs);
  t["neg"] = unary(at::neg);
  t["exp"] = unary(at::exp);
  t["log"] = unary(at::log);
  t["log1p"] = unary(at::log1p);
  t["sqrt"] = unary(at::sqrt);
  t["rsqrt"] = unary(at::rsqrt);
  t["reciprocal"] = unary(at::reciprocal);
  t["square"] = unary(at::square);
  t["sin"] = unary(at::sin);
  t["cos"] = unary(at::cos);
  t["erf"] = unary(at::erf);
  t["sign"] = unary(at::sign);
}

// Softmax and its log.
void add_softmax_ops(AtenOpTable& t) {
  t["softmax"] = [](const Tensors& in, const json& a) { return at::softmax(in[0], get_int(a, "dim")); };
  t["log_softmax"] = [](const Tensors& in, const json& a) { return at::log_softmax(in[0], get_int(a, "dim")); };
}

}  // namespace

void add_pointwise_ops(AtenOpTable& t) {
  add_activations(t);
  add_binary_ops(t);
  add_unary_ops(t);
  add_softmax_ops(t);
}

}  // namespace kforge::ref::internal
