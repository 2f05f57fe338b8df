#include "kforge/data_synth/graph_hash.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "kforge/core/op_registry.h"
#include "kforge/core/sha256.h"

namespace kforge::synth {
namespace {

struct Canon {
  std::map<std::string, std::string> label;  // value name -> canonical label (a hash)
  std::map<std::string, const GraphNode*> producer;
};

std::string tensor_label(const TensorSpec& t, bool param, int identity) {
  json j = {{"kind", param ? "param" : "input"},
            {"dtype", dtype_name(t.dtype)},
            {"rank", t.shape.size()},
            {"init", to_json(t.init)},
            {"id", identity}};
  return sha256_hex(j.dump());
}

// Labels every value bottom-up. `identity` distinguishes kernel inputs that
// have identical specs (add(x, x) is not add(x, y)); -1 leaves them equal.
Canon label_graph(const TaskSpec& task, const std::map<std::string, int>& identity) {
  Canon c;
  auto id_of = [&](const std::string& name) {
    auto it = identity.find(name);
    return it == identity.end() ? -1 : it->second;
  };
  for (const auto& t : task.inputs) c.label[t.name] = tensor_label(t, false, id_of(t.name));
  for (const auto& t : task.params) c.label[t.name] = tensor_label(t, true, id_of(t.name));
  for (const auto& n : task.nodes) {
    c.producer[n.out] = &n;
    const OpSchema* schema = op_registry().find(n.op);
    const json attrs = resolve_attrs(*schema, n.attrs, "");
    std::vector<std::string> ins;
    for (const auto& v : n.in) ins.push_back(c.label.at(v));
    if (ins.size() >= 2 && is_commutative(n.op, attrs)) std::sort(ins.begin(), ins.begin() + 2);
    c.label[n.out] = sha256_hex(json({{"op", n.op}, {"attrs", attrs}, {"in", ins}}).dump());
  }
  return c;
}

// Visits the graph from the outputs in canonical order and numbers the kernel
// inputs by first visit: a name-free identity for each.
std::map<std::string, int> input_identities(const TaskSpec& task, const Canon& structural) {
  std::map<std::string, int> ids;
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    if (!seen.insert(v).second) return;
    auto p = structural.producer.find(v);
    if (p == structural.producer.end()) {
      ids.emplace(v, static_cast<int>(ids.size()));
      return;
    }
    std::vector<std::string> ins = p->second->in;
    const OpSchema* schema = op_registry().find(p->second->op);
    if (ins.size() >= 2 && is_commutative(p->second->op, resolve_attrs(*schema, p->second->attrs, ""))) {
      if (structural.label.at(ins[1]) < structural.label.at(ins[0])) std::swap(ins[0], ins[1]);
    }
    for (const auto& i : ins) visit(i);
  };
  std::vector<std::string> outputs = task.outputs;
  std::sort(outputs.begin(), outputs.end(), [&](const std::string& a, const std::string& b) {
    return structural.label.at(a) < structural.label.at(b);
  });
  for (const auto& o : outputs) visit(o);
  return ids;
}

}  // namespace

bool is_commutative(const std::string& op, const json& attrs) {
  static const std::set<std::string> kOps = {"add", "mul", "maximum", "minimum", "eq", "ne"};
  if (!kOps.count(op)) return false;
  if (op == "add" && attrs.contains("alpha") && attrs["alpha"] != json(1)) return false;
  return true;
}

std::string canonical_graph_hash(const TaskSpec& task) {
  infer_graph(task);  // type-check first: labels assume a valid graph
  const Canon structural = label_graph(task, {});
  const Canon c = label_graph(task, input_identities(task, structural));
  std::vector<std::string> outputs;
  for (const auto& o : task.outputs) outputs.push_back(c.label.at(o));
  std::sort(outputs.begin(), outputs.end());
  return sha256_hex(json(outputs).dump());
}

std::vector<size_t> canonical_node_order(const TaskSpec& task) {
  // Kahn's algorithm, breaking ties by canonical label so that node order in
  // the file does not matter.
  const Canon c = label_graph(task, {});
  std::map<std::string, int> pending;  // node out -> unresolved node inputs
  std::map<std::string, std::vector<const GraphNode*>> users;
  for (const auto& n : task.nodes) {
    int deps = 0;
    for (const auto& v : n.in) {
      if (c.producer.count(v)) {
        ++deps;
        users[v].push_back(&n);
      }
    }
    pending[n.out] = deps;
  }
  auto cmp = [&](const GraphNode* a, const GraphNode* b) { return c.label.at(a->out) < c.label.at(b->out); };
  std::vector<const GraphNode*> ready;
  for (const auto& n : task.nodes) {
    if (pending[n.out] == 0) ready.push_back(&n);
  }
  std::vector<size_t> seq;
  while (!ready.empty()) {
    std::sort(ready.begin(), ready.end(), cmp);
    const GraphNode* n = ready.front();
    ready.erase(ready.begin());
    seq.push_back(static_cast<size_t>(n - task.nodes.data()));
    for (const GraphNode* u : users[n->out]) {
      if (--pending[u->out] == 0) ready.push_back(u);
    }
  }
  return seq;
}

std::vector<std::string> canonical_op_sequence(const TaskSpec& task) {
  std::vector<std::string> ops;
  for (size_t i : canonical_node_order(task)) ops.push_back(task.nodes[i].op);
  return ops;
}

}  // namespace kforge::synth
