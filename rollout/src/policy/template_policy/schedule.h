// Which values of a KernelGraph live in memory and which loops (CPU) or
// kernels (CUDA) compute them, for one Variant. Shared by both code
// generators, so the two backends fuse the same way.
#pragma once

#include <vector>

#include "policy/template_policy/kernel_graph.h"
#include "policy/template_policy/variant.h"

namespace kforge::rollout::template_policy {

enum class KernelKind {
  kPointwise,  // root: a pointwise value, over its own shape
  kReduce,     // root: a reduce value, over its operand's shape
  kRow,        // root: a pointwise value; `registers`: the reduces it needs,
               // each computed per row of the root's shape (normalizations)
  kMatmul,     // `matmul`: the product; root: it, or the pointwise value it
               // feeds (epilogue applied at the store)
  kConv,       // root: a conv value, one output element per iteration
};

struct Kernel {
  KernelKind kind = KernelKind::kPointwise;
  int root = -1;
  int matmul = -1;
  std::vector<int> registers;
  // kRow: the first reduced dim (rows are the dims before it).
  int split = 0;
};

struct Schedule {
  // materialized[v]: v has its own buffer (inputs, outputs, temporaries).
  std::vector<bool> materialized;
  // storage[v]: the value whose buffer holds v's data (itself, or for a
  // view the value it views); -1 when v is never in memory.
  std::vector<int> storage;
  std::vector<Kernel> kernels;  // in execution order
  // output_of[v]: the kernel output whose buffer is v's storage (outputs, and
  // values viewed by an output), else -1.
  std::vector<int> output_of;
};

Schedule plan(const KernelGraph& graph, const Variant& variant);

// The values the expression of `id` reads when every non-materialized
// pointwise value is inlined: buffer leaves (materialized values, views) and
// reduce or matmul values (registers where the kernel computes them). As a
// root, `id`'s own expression is expanded even though it is materialized;
// otherwise a materialized `id` is its own leaf. Appended in first-use order,
// without repeating what `leaves` holds.
void expression_leaves(const KernelGraph& graph, const Schedule& schedule, int id, bool as_root,
                       std::vector<int>* leaves);

}  // namespace kforge::rollout::template_policy
