// What the two code generators (cpp_codegen.cpp, cuda_codegen.cpp) share: the
// helper functions every generated source starts with, the struct of runtime
// sizes, buffer names, and the addressing of broadcast operands.
//
// Addressing. A kernel iterates a domain (the shape of one value) split into
// three groups of dims: outer [0, a) indexed by `o`, mid [a, b) by `k` and
// inner [b, rank) by `i` (pointwise and row kernels have no inner group). An
// operand ("leaf") that broadcasts against the domain is read at
//   row offset(o) + mid offset(k) + inner offset(i)
// where each part is 0 when the leaf is broadcast over the whole group, a
// multiple of the index when it is dense over it, and otherwise a
// decomposition of the index into the group's dims.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "policy/template_policy/kernel_graph.h"
#include "policy/template_policy/schedule.h"

namespace kforge::rollout::template_policy {

// Float literal for generated code ("0.5f", "INFINITY").
std::string float_literal(double v);

// `text` with every line indented by `spaces`.
std::string indent(const std::string& text, int spaces);

// The identity of a reduction, as a float literal ("0.0f", "(-INFINITY)").
const char* init_of(ReduceOp op);

// The helper functions (kf_relu, kf_add, ...), declared with `qualifier`
// ("static inline" or "__device__ __forceinline__ static").
std::string op_functions(const std::string& qualifier);

// "struct KfSizes { int64_t d0_0; ... };" for every dim of every value.
std::string sizes_struct(const KernelGraph& g);
// Statements filling `S` from the kernel inputs' shapes.
std::string sizes_init(const KernelGraph& g);

// "S.d3_0 * S.d3_1" over dims [from, to) of `value`, "1" when empty.
std::string size_product(int value, int from, int to);

// The generated code's pointer to the memory that holds `value`: in<i>,
// out<j> or t<v>. Throws std::logic_error for a value never in memory.
std::string buffer_name(const KernelGraph& g, const Schedule& s, int value);

// The temporaries a schedule needs: values materialized that are neither
// inputs nor (views of) outputs.
std::vector<int> temporaries(const KernelGraph& g, const Schedule& s);

// A direct convolution (ValueKind::kConv), the same in both generators:
// `conv_sizes` declares its sizes (N, Ci, Co, the output's spatial size OS,
// the kernel's KS, ...); `conv_element` computes the output element at flat
// index `idx` of [N, Co, O...] into `acc`, reading the pointers px, pw and,
// with a bias, pb.
std::string conv_sizes(const KernelGraph& g, int conv);
std::string conv_element(const KernelGraph& g, int conv, const std::string& idx);

class Emitter {
 public:
  enum class Mode { kZero, kFull, kGeneral };
  struct Leaf {
    int value = -1;
    Mode outer = Mode::kZero, mid = Mode::kZero, inner = Mode::kZero;
  };

  Emitter(const KernelGraph& g, const Schedule& s) : g_(g), s_(s) {}

  // Starts a kernel over `domain`'s shape with groups [0, a), [a, b),
  // [b, rank). `registers` maps values to the code that holds them in this
  // kernel (per-row reduce results, the matmul accumulator).
  void begin(int domain, int a, int b, std::map<int, std::string> registers);

  // The smallest split a such that every leaf of the expressions of `roots`
  // is dense or broadcast over all of [a, rank) (so the mid loop is
  // contiguous); `roots` are expanded as roots (expression_leaves).
  int best_split(int domain, const std::vector<int>& roots) const;

  // The expression of `value` at the current point. `as_root`: expand a
  // materialized pointwise value's own expression instead of loading it.
  // Index variables: o (outer), `k_var` (mid), i (inner).
  std::string expr(int value, bool as_root, const std::string& k_var = "k");

  // Statements computing the row offsets "ro<n>" of every leaf used so far
  // (call after every expr() of the kernel), for outer index `o_var`.
  std::string row_offsets(const std::string& o_var = "o") const;
  // Statements computing the mid offsets "mo<n>" (kernels with an inner
  // group: the mid index is a loop outside the inner one), for `k_var`.
  std::string mid_offsets(const std::string& k_var = "k") const;

  // Leaf pointer declarations: "const float* __restrict__ p<n> = <buffer>;".
  std::string leaf_pointers(const std::string& indent) const;
  // For CUDA kernels: the leaf pointers as parameters and as arguments.
  std::string leaf_params() const;
  std::string leaf_args() const;

  // CUDA float4 path (kernels without an inner group): while a lane 0..3 is
  // set, leaves read densely along the mid group come from the float4
  // "L<n>" that vector_loads() declares, component `lane`.
  void set_lane(int lane) { lane_ = lane; }
  // "const float4 L<n> = ...;" for every dense-mid leaf at mid index `k_var`.
  std::string vector_loads(const std::string& k_var) const;
  // Buffers read through float4 (their base must be 16-byte aligned).
  std::vector<std::string> vector_buffers() const;

  const std::vector<Leaf>& leaves() const { return leaves_; }
  // True when every leaf is dense or broadcast over the mid group (no index
  // decomposition per element).
  bool mid_is_simple() const;
  // The leaves read densely along the mid group (candidates for float4).
  bool leaf_dense_mid(size_t n) const { return leaves_[n].mid == Mode::kFull; }

 private:
  Mode group_mode(int leaf, int from, int to) const;
  std::string group_offset(const Leaf& l, int from, int to, const std::string& index, Mode mode) const;
  std::string load(int value, const std::string& k_var);
  std::string call_code(const Expr& e, const std::vector<int>& operands, const std::string& k_var);

  const KernelGraph& g_;
  const Schedule& s_;
  int domain_ = -1, a_ = 0, b_ = 0, rank_ = 0;
  std::map<int, std::string> registers_;
  std::vector<Leaf> leaves_;
  std::map<int, size_t> leaf_index_;
  int lane_ = -1;
};

}  // namespace kforge::rollout::template_policy
