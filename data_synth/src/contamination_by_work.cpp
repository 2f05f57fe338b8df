// Contamination by what the kernel must do (contamination.h): the cost-dominant
// part of a task against KernelBench problems' skeletons, pointwise-only tasks
// against level-1 elementwise problems, and problems contained as sub-graphs.
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "kforge/core/op_registry.h"
#include "kforge/data_synth/contamination.h"
#include "kforge/data_synth/graph_hash.h"

namespace kforge::synth {
namespace {

using Tokens = std::vector<std::string>;

std::string join(const Tokens& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + t[i];
  return s + "]";
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100 * share);
  return buf;
}

// The verdict of one rule against one problem, ordered so that the lowest
// level, then the name, reports it (never the file's order).
struct Match {
  const KernelBenchSignature* problem = nullptr;
  std::string relation, why;
};

void consider(Match* best, const KernelBenchSignature& p, const std::string& relation, const std::string& why) {
  if (best->problem && std::tie(best->problem->level, best->problem->name) <= std::tie(p.level, p.name)) return;
  *best = {&p, relation, why};
}

}  // namespace

WorkKind work_kind(const std::string& token) {
  if (token == "gemm") return WorkKind::kMainLoop;
  // The clamp family and the epilogue arithmetic are pointwise; the fused
  // composites are activations (rms_norm is a norm, found in the registry).
  if (token == "clamp" || token == "add" || token == "mul" || token == "softsign" || token == "hardswish" ||
      token == "mish" || token == "silu" || token == "gelu") {
    return WorkKind::kCheap;
  }
  const OpSchema* schema = op_registry().find(token);
  if (!schema) return WorkKind::kHeavy;  // "torch:<name>": outside the vocabulary, not assumed cheap
  switch (schema->category) {
    case OpCategory::kMainLoop:
      return WorkKind::kMainLoop;
    case OpCategory::kActivation:
    case OpCategory::kElementwise:
    case OpCategory::kLayout:
      return WorkKind::kCheap;
    default:
      return WorkKind::kHeavy;
  }
}

Tokens core_skeleton(const Tokens& core) {
  Tokens s;
  for (const auto& t : core) {
    if (work_kind(t) != WorkKind::kCheap) s.push_back(t);
  }
  return s;
}

DominantPart dominant_part(const TaskSpec& task, const DeviceProfile& profile, double min_share) {
  DominantPart d;
  d.core = contamination_core(contamination_ops(task));
  const std::vector<double> costs = node_costs_ms(task, profile);
  struct Node {
    std::string token;
    double share;
    bool heavy;
  };
  std::vector<Node> nodes;
  for (size_t i : canonical_node_order(task)) {
    // A single op's core: its token, or nothing for a scalar/bias epilogue
    // and a layout op (both cheap).
    const Tokens one = contamination_core({contamination_op(task, task.nodes[i])});
    const std::string token = one.empty() ? task.nodes[i].op : one.front();
    nodes.push_back({token, costs[i], !one.empty() && work_kind(token) != WorkKind::kCheap});
  }
  // Shares of the heavy work: pointwise work is free in a fused kernel, so a
  // long pointwise chain does not make its one reduction negligible.
  double heavy_total = 0;
  for (const Node& n : nodes) heavy_total += n.heavy ? n.share : 0.0;
  for (Node& n : nodes) n.share = heavy_total > 0 ? n.share / heavy_total : 0.0;
  // The costliest heavy node is always dominant: a task is never "all cheap"
  // because its one reduction is quick.
  size_t costliest = nodes.size();
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].heavy && (costliest == nodes.size() || nodes[k].share > nodes[costliest].share)) costliest = k;
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].heavy) d.skeleton.push_back(nodes[k].token);
    if (nodes[k].heavy && (k == costliest || nodes[k].share >= min_share)) {
      d.dominant.push_back(nodes[k].token);
      d.dominant_share += nodes[k].share;
    } else {
      d.rest.push_back(nodes[k].heavy ? nodes[k].token + " (" + percent(nodes[k].share) + ")" : nodes[k].token);
    }
  }
  return d;
}

bool contains_with_cheap_gaps(const Tokens& task, const Tokens& problem) {
  if (problem.empty()) return false;
  for (size_t start = 0; start < task.size(); ++start) {
    if (task[start] != problem[0]) continue;
    size_t j = 1;
    // Greedy: taking a match never hurts, since only skipped tokens are
    // constrained (they must be cheap).
    for (size_t k = start + 1; k < task.size() && j < problem.size(); ++k) {
      if (task[k] == problem[j]) {
        ++j;
      } else if (work_kind(task[k]) != WorkKind::kCheap) {
        break;
      }
    }
    if (j == problem.size()) return true;
  }
  return false;
}

NearestProblem KernelBenchSignatures::judge(const TaskSpec& task, const DeviceProfile& profile) const {
  NearestProblem by_meaning = nearest(contamination_ops(task));
  // Equal or containing is the strongest verdict; an edit-distance one may
  // fall under a lower SynthConfig::contamination_threshold, so the rules
  // below still decide.
  if (by_meaning.problem.empty() || by_meaning.distance == 0.0) return by_meaning;
  const DominantPart d = dominant_part(task, profile);
  Match best;
  for (const auto& p : problems_) {
    const Tokens skeleton = core_skeleton(p.core);
    if (!d.skeleton.empty() && !skeleton.empty() && (skeleton == d.dominant || skeleton == d.skeleton)) {
      const bool by_cost = skeleton == d.dominant && d.dominant != d.skeleton;
      consider(&best, p, "dominant",
               "the cost-dominant part " + join(skeleton == d.dominant ? d.dominant : d.skeleton) +
                   (by_cost ? " (" + percent(d.dominant_share) + " of the non-pointwise cost-model time)" : "") +
                   " is " + p.name + "'s computation " + join(skeleton) + "; the rest " + join(d.rest) +
                   " is cheap pointwise, layout or low-cost work");
    } else if (d.skeleton.empty() && p.core.size() == 1 && work_kind(p.core[0]) == WorkKind::kCheap &&
               (std::find(d.core.begin(), d.core.end(), p.core[0]) != d.core.end() ||
                (d.core.empty() && (p.core[0] == "mul" || p.core[0] == "add")))) {
      // Only pointwise work: one elementwise pass, which a level-1
      // elementwise problem already is when one of its ops is that problem.
      consider(&best, p, "pointwise",
               "only pointwise and layout work " + join(d.core) + ", and " + p.name + " " + join(p.core) +
                   " is one elementwise pass of it");
    } else if (p.core.size() >= 2 && contains_with_cheap_gaps(d.core, p.core)) {
      consider(&best, p, "subgraph",
               "the core " + join(d.core) + " contains " + p.name + "'s whole computation " + join(p.core) +
                   " as a sub-graph (only cheap ops between its tokens)");
    }
  }
  if (!best.problem) return by_meaning;
  NearestProblem r;
  r.problem = best.problem->name;
  r.distance = 0.0;
  r.relation = best.relation;
  r.task_core = d.core;
  r.problem_core = best.problem->core;
  r.why = "contaminated: " + best.why;
  return r;
}

}  // namespace kforge::synth
