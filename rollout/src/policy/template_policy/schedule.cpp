#include "policy/template_policy/schedule.h"

#include <algorithm>
#include <set>

namespace kforge::rollout::template_policy {
namespace {

const Value& at(const KernelGraph& g, int id) { return g.values[static_cast<size_t>(id)]; }

bool same_shapes(const Value& a, const Value& b) { return a.shapes == b.shapes; }

// Operands reached from `id`'s expression through inlined pointwise values.
void walk(const KernelGraph& g, const Schedule& s, int id, bool is_root, std::vector<int>* out, std::set<int>* seen) {
  const Value& v = at(g, id);
  const bool inlined = v.kind == ValueKind::kPointwise && (is_root || !s.materialized[static_cast<size_t>(id)]);
  if (!inlined) {
    if (seen->insert(id).second) out->push_back(id);
    return;
  }
  for (int o : v.operands) walk(g, s, o, false, out, seen);
}

// The reduces a row kernel rooted at `root` would compute per row, or false
// when the root is no such kernel: every reduce its fused expression reads
// (transitively through the reduces' own inputs) must reduce the trailing
// dims of a value shaped like the root, all from the same dim.
bool row_registers(const KernelGraph& g, const Schedule& s, int root, std::vector<int>* regs, int* split) {
  std::vector<int> pending;
  expression_leaves(g, s, root, true, &pending);
  std::set<int> found;
  int from = -1;
  const Value& r = at(g, root);
  for (size_t i = 0; i < pending.size(); ++i) {
    const Value& v = at(g, pending[i]);
    if (v.kind != ValueKind::kReduce) continue;
    const Value& input = at(g, v.operands[0]);
    if (!same_shapes(input, r) || v.red_end != r.rank()) return false;
    if (from >= 0 && v.red_begin != from) return false;
    from = v.red_begin;
    if (!found.insert(v.id).second) continue;
    // The reduce's input expression runs in the row loop too.
    std::vector<int> more;
    expression_leaves(g, s, v.operands[0], false, &more);
    for (int m : more) pending.push_back(m);
  }
  if (found.empty()) return false;
  regs->assign(found.begin(), found.end());  // ascending id: inputs before users
  *split = from;
  return true;
}

// The pointwise value that a matmul's result flows into through a chain of
// single-use inlined values, when that value can be computed at the store.
int epilogue_of(const KernelGraph& g, const Schedule& s, int matmul) {
  const Value& m = at(g, matmul);
  if (m.output_index >= 0) return -1;
  int id = matmul;
  while (true) {
    const auto& users = g.consumers[static_cast<size_t>(id)];
    if (users.size() != 1) return -1;
    const Value& u = at(g, users[0]);
    if (u.kind != ValueKind::kPointwise) return -1;
    // The matmul must feed the value once (a second read would need the
    // product of another element).
    if (std::count(u.operands.begin(), u.operands.end(), id) != 1) return -1;
    if (s.materialized[static_cast<size_t>(u.id)]) return same_shapes(u, m) ? u.id : -1;
    id = u.id;
  }
}

}  // namespace

void expression_leaves(const KernelGraph& graph, const Schedule& schedule, int id, bool as_root,
                       std::vector<int>* leaves) {
  std::set<int> seen(leaves->begin(), leaves->end());
  walk(graph, schedule, id, as_root, leaves, &seen);
}

namespace {

// Which values start as buffers: inputs, outputs, matmul and conv results and
// what a matmul, a conv or a view reads (never a view itself), and without
// fusion every pointwise and reduce.
void initially_materialized(const KernelGraph& g, const Variant& variant, Schedule* s) {
  for (const Value& v : g.values) {
    bool m = v.kind == ValueKind::kInput || v.output_index >= 0 || v.kind == ValueKind::kMatmul ||
             v.kind == ValueKind::kConv;
    if (v.kind == ValueKind::kPointwise && !variant.fuse) m = true;
    if (v.kind == ValueKind::kReduce && !variant.fuse) m = true;
    for (int u : g.consumers[static_cast<size_t>(v.id)]) {
      const ValueKind k = at(g, u).kind;
      if (k == ValueKind::kMatmul || k == ValueKind::kView || k == ValueKind::kConv) m = true;
    }
    if (v.kind == ValueKind::kView) m = false;
    s->materialized[static_cast<size_t>(v.id)] = m;
  }
}

// Epilogues: a fused matmul keeps its product in registers. The pointwise
// root of each epilogue -> its matmul (-1 where none).
std::vector<int> plan_epilogues(const KernelGraph& g, const Variant& variant, Schedule* s) {
  std::vector<int> epilogue(g.values.size(), -1);
  if (!variant.fuse) return epilogue;
  for (const Value& v : g.values) {
    if (v.kind != ValueKind::kMatmul) continue;
    const int p = epilogue_of(g, *s, v.id);
    std::vector<int> regs;
    int split = 0;
    if (p >= 0 && epilogue[static_cast<size_t>(p)] < 0 && !row_registers(g, *s, p, &regs, &split)) {
      epilogue[static_cast<size_t>(p)] = v.id;
      s->materialized[static_cast<size_t>(v.id)] = false;
    }
  }
  return epilogue;
}

// A kernel for each materialized value, of the kind that computes it.
void list_kernels(const KernelGraph& g, const Variant& variant, const std::vector<int>& epilogue, Schedule* s) {
  s->kernels.clear();
  for (const Value& v : g.values) {
    if (!s->materialized[static_cast<size_t>(v.id)] || v.kind == ValueKind::kInput) continue;
    Kernel k;
    k.root = v.id;
    if (v.kind == ValueKind::kReduce) {
      k.kind = KernelKind::kReduce;
    } else if (v.kind == ValueKind::kMatmul) {
      k.kind = KernelKind::kMatmul;
      k.matmul = v.id;
    } else if (v.kind == ValueKind::kConv) {
      k.kind = KernelKind::kConv;
    } else if (epilogue[static_cast<size_t>(v.id)] >= 0) {
      k.kind = KernelKind::kMatmul;
      k.matmul = epilogue[static_cast<size_t>(v.id)];
    } else if (variant.fuse && row_registers(g, *s, v.id, &k.registers, &k.split)) {
      k.kind = KernelKind::kRow;
    } else {
      k.kind = KernelKind::kPointwise;
    }
    s->kernels.push_back(k);
  }
}

// Makes every value a kernel reads as a buffer materialized; true when one
// changed.
bool materialize_buffer_reads(const KernelGraph& g, Schedule* s) {
  bool changed = false;
  for (const Kernel& k : s->kernels) {
    std::vector<int> leaves;
    if (k.kind == KernelKind::kReduce) {
      expression_leaves(g, *s, at(g, k.root).operands[0], false, &leaves);
    } else if ((k.kind == KernelKind::kMatmul && k.root == k.matmul) || k.kind == KernelKind::kConv) {
      leaves = at(g, k.root).operands;
    } else {
      expression_leaves(g, *s, k.root, true, &leaves);
      if (k.kind == KernelKind::kRow) {
        for (int r : k.registers) expression_leaves(g, *s, at(g, r).operands[0], false, &leaves);
      }
    }
    for (int l : leaves) {
      const bool reg = std::find(k.registers.begin(), k.registers.end(), l) != k.registers.end() || l == k.matmul;
      if (!reg && !s->materialized[static_cast<size_t>(l)] && at(g, l).kind != ValueKind::kView) {
        s->materialized[static_cast<size_t>(l)] = true;
        changed = true;
      }
    }
  }
  return changed;
}

// A materialized value is its own storage; a view is its base's.
void assign_storage(const KernelGraph& g, Schedule* s) {
  for (const Value& v : g.values) {
    if (s->materialized[static_cast<size_t>(v.id)]) s->storage[static_cast<size_t>(v.id)] = v.id;
  }
  for (const Value& v : g.values) {  // views, in order: a view of a view resolves
    if (v.kind == ValueKind::kView)
      s->storage[static_cast<size_t>(v.id)] = s->storage[static_cast<size_t>(v.operands[0])];
  }
}

// An output that is a view (a reduction with keepdim=false) is written by
// the kernel of the value it views, straight into the output buffer.
void assign_output_buffers(const KernelGraph& g, Schedule* s) {
  s->output_of.assign(g.values.size(), -1);
  for (const Value& v : g.values) {
    if (v.output_index < 0) continue;
    const int base = s->storage[static_cast<size_t>(v.id)];
    if (base < 0 || at(g, base).kind == ValueKind::kInput || (base != v.id && at(g, base).output_index >= 0) ||
        s->output_of[static_cast<size_t>(base)] >= 0) {
      throw Unsupported("output \"" + v.name + "\" shares its memory with an input or another output");
    }
    s->output_of[static_cast<size_t>(base)] = v.output_index;
  }
}

}  // namespace

Schedule plan(const KernelGraph& g, const Variant& variant) {
  const size_t n = g.values.size();
  Schedule s;
  s.materialized.assign(n, false);
  s.storage.assign(n, -1);
  initially_materialized(g, variant, &s);
  const std::vector<int> epilogue = plan_epilogues(g, variant, &s);
  // Reduces start as registers where fusion is on; any kernel that reads one
  // as a buffer makes it materialized, until nothing changes.
  for (bool changed = true; changed;) {
    list_kernels(g, variant, epilogue, &s);
    changed = materialize_buffer_reads(g, &s);
  }
  assign_storage(g, &s);
  assign_output_buffers(g, &s);
  return s;
}

}  // namespace kforge::rollout::template_policy
