// The op_cases library's own parts (op_cases.cpp,
// op_cases_reductions_layout.cpp): the helpers that write tensor specs and
// independent expectations, and the two halves of the case list. The suites
// that use the cases read op_cases.h only.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "op_cases.h"

namespace kforge::testing::internal {

using Fn = std::function<Tensors(const Tensors&)>;

// Applies a scalar function element by element in double precision on the
// CPU: an expectation that shares no code with the ATen kernel under test.
inline at::Tensor pointwise(const at::Tensor& x, const std::function<double(double)>& f) {
  at::Tensor d = x.to(at::kDouble).contiguous().clone();
  double* p = d.data_ptr<double>();
  for (int64_t i = 0; i < d.numel(); ++i) p[i] = f(p[i]);
  return d.to(x.scalar_type());
}

inline TensorSpec with_init(TensorSpec t, const std::string& kind, double a, double b) {
  t.init.kind = kind;
  if (kind == "normal") {
    t.init.mean = a;
    t.init.std = b;
  } else {
    t.init.low = a;
    t.init.high = b;
  }
  return t;
}

inline TensorSpec wide(const std::string& name, std::vector<int64_t> shape) {
  return with_init(tensor(name, std::move(shape)), "normal", 0.0, 4.0);
}

inline TensorSpec positive(const std::string& name, std::vector<int64_t> shape) {
  return with_init(tensor(name, std::move(shape)), "uniform", 0.5, 2.0);
}

inline TensorSpec ints(const std::string& name, std::vector<int64_t> shape, int64_t low, int64_t high,
                       DType d = DType::kInt32) {
  return with_init(tensor(name, std::move(shape), d, "randint"), "randint", static_cast<double>(low),
                   static_cast<double>(high));
}

inline Fn one(std::function<at::Tensor(const Tensors&)> f) {
  return [f](const Tensors& in) { return Tensors{f(in)}; };
}

inline Fn unary_expect(const std::function<double(double)>& f) {
  return one([f](const Tensors& in) { return pointwise(in[0], f); });
}

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Reference statistics for normalizations: biased variance, as torch uses.
inline at::Tensor normalize(const at::Tensor& x, at::IntArrayRef dims, double eps) {
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor mean = xd.mean(dims, true);
  const at::Tensor var = (xd - mean).pow(2).mean(dims, true);
  return ((xd - mean) / (var + eps).sqrt()).to(x.scalar_type());
}

// Channel-wise affine for (N, C, *) tensors.
inline at::Tensor channel_affine(const at::Tensor& y, const at::Tensor& w, const at::Tensor& b) {
  std::vector<int64_t> shape(static_cast<size_t>(y.dim()), 1);
  shape[1] = y.size(1);
  return y * w.reshape(shape) + b.reshape(shape);
}

// Sliding windows over the last n dims via unfold (no padding), for pooling.
inline at::Tensor windows(const at::Tensor& x, int64_t n, int64_t k, int64_t s) {
  at::Tensor u = x;
  for (int64_t i = 0; i < n; ++i) u = u.unfold(x.dim() - n + i, k, s);
  return u;
}

// Appends to `cases`, naming each case's task test/<label>.
struct AddCase {
  std::vector<OpCase>& cases;
  void operator()(std::string label, TaskSpec task, Fn expected, double tol = 1e-5) const {
    task.id = "test/" + label;
    cases.push_back(OpCase{std::move(label), std::move(task), std::move(expected), tol});
  }
};

// Contractions (matmul, linear, convolutions), activations, elementwise ops,
// softmax and norms, in that order.
void add_arithmetic_cases(const AddCase& add);
// Reductions, pooling, layout ops, then graphs of several ops, in that order.
void add_reduction_layout_and_graph_cases(const AddCase& add);

}  // namespace kforge::testing::internal
