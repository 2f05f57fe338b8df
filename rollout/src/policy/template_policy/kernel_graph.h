// The template policy's view of a task (rollout/policy/template_policy.h): the
// operator graph lowered to four primitives that every template kernel is
// made of, with the sizes of every value expressed through the kernel
// inputs' runtime shapes so that one source serves the base shape and every
// shape variant.
//
//   pointwise  an expression over operands that broadcast (PyTorch rules);
//              activations, arithmetic, and the epilogues of the others
//   reduce     sum / max / min / prod over a contiguous range of dims, kept
//              as size-1 dims (mean, var, norms and softmax are a reduce
//              plus pointwise arithmetic)
//   matmul     [batch..., M, K] x [K, N] (or [B, K, N], or the transposed
//              [N, K] weight of `linear`)
//   view       a materialized value seen with other dims (keepdim=false)
//   conv       a direct convolution, or a transposed one (conv1d/2d/3d,
//              conv_transpose1d/2d/3d: [N, C, spatial...] input, optional
//              [Co] bias)
//
// What cannot be lowered (pooling, layout ops, integer or half-precision
// data, broadcasts that change between shape variants) throws Unsupported
// with the reason; the policy then says it has no template.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::rollout::template_policy {

class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A size known at run time: constant * the product of kernel-input dims.
struct Dim {
  int64_t constant = 1;
  std::vector<std::pair<int, int>> factors;  // (kernel input index, axis)
};

enum class ValueKind { kInput, kPointwise, kReduce, kMatmul, kView, kConv };
enum class ReduceOp { kSum, kMax, kMin, kProd };

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

// A pointwise expression. Leaves are the value's operands (by index) or
// constants; `op` names the function (see codegen_common.cpp for the list).
struct Expr {
  enum class Kind { kOperand, kConst, kRuntime, kCall };
  Kind kind = Kind::kConst;
  int operand = -1;            // kOperand
  double value = 0.0;          // kConst
  std::string code;            // kRuntime: a C expression of sizes, e.g. "(float)(d3_1)"
  std::string op;              // kCall
  std::vector<double> params;  // kCall: the op's scalar parameters
  std::vector<ExprPtr> args;   // kCall
};

// The generated code's name for dim `axis` of value `value` (a field of the
// sizes struct S that every generated function receives).
std::string dim_var(int value, int axis);

ExprPtr operand_expr(int index);
ExprPtr const_expr(double v);
ExprPtr runtime_expr(std::string code);
ExprPtr call(std::string op, std::vector<ExprPtr> args, std::vector<double> params = {});

// A convolution's parameters, one per spatial dim (torch.nn.functional's).
struct ConvParams {
  int spatial = 0;  // 1, 2 or 3
  // Transposed: weight [C, Co / groups, kernel...], output (S - 1) stride -
  // 2 padding + dilation (K - 1) + output_padding + 1; else weight
  // [Co, C / groups, kernel...].
  bool transposed = false;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
};

struct Value {
  int id = -1;
  std::string name;  // the task's name for it, or a generated one
  ValueKind kind = ValueKind::kInput;
  // Shape in every judged case: [0] the base shape, then each variant's.
  std::vector<std::vector<int64_t>> shapes;
  std::vector<Dim> dims;   // runtime sizes (filled by lower())
  std::vector<bool> unit;  // dims that are 1 in every case
  std::vector<int> operands;
  int input_index = -1;   // kInput: position among the kernel inputs
  int output_index = -1;  // >= 0: written to that kernel output
  ExprPtr expr;           // kPointwise
  ReduceOp reduce = ReduceOp::kSum;
  int red_begin = 0, red_end = 0;  // kReduce: dims [red_begin, red_end) of operand 0
  bool b_transposed = false;       // kMatmul: operand 1 is [N, K]
  ConvParams conv;                 // kConv: operands x, weight[, bias]

  int rank() const { return static_cast<int>(shapes.front().size()); }
};

struct KernelGraph {
  std::string task_id;
  int num_inputs = 0;
  int num_outputs = 0;
  std::vector<Value> values;  // topological order; inputs first
  std::vector<int> outputs;   // value id of each kernel output
  // Values that read `id` as an operand.
  std::vector<std::vector<int>> consumers;
};

// Throws Unsupported naming the node and why; InputError for a task that does
// not type-check.
KernelGraph lower(const TaskSpec& task);

}  // namespace kforge::rollout::template_policy
