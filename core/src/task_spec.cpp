#include "kforge/core/task_spec.h"

#include <set>

#include "kforge/core/input_limits.h"

namespace kforge {
namespace {

void check_name_length(const Field& where, const std::string& name) {
  if (name.size() > limits::kMaxNameBytes) {
    where.fail("a name of at most " + std::to_string(limits::kMaxNameBytes) + " bytes (limits::kMaxNameBytes)");
  }
}

const std::vector<std::string>& known_libraries() {
  static const std::vector<std::string> kLibs = {"cublas", "cublasLt", "cudnn"};
  return kLibs;
}

}  // namespace

std::vector<TensorSpec> TaskSpec::kernel_inputs() const {
  std::vector<TensorSpec> all = inputs;
  all.insert(all.end(), params.begin(), params.end());
  return all;
}

TaskSpec TaskSpec::with_variant(size_t index) const {
  // Field by field, leaving the variant list behind: copying it into every
  // variant would make a loop over the variants quadratic.
  TaskSpec t;
  t.id = id;
  t.source = source;
  t.description = description;
  t.inputs = inputs;
  t.params = params;
  t.nodes = nodes;
  t.outputs = outputs;
  t.tolerance = tolerance;
  t.baselines = baselines;
  t.libraries = libraries;
  for (const auto& [name, shape] : shape_variants.at(index)) {
    for (auto& in : t.inputs) {
      if (in.name == name) in.shape = shape;
    }
  }
  return t;
}

const TensorSpec* TaskSpec::find_tensor(const std::string& name) const {
  for (const auto& t : inputs) {
    if (t.name == name) return &t;
  }
  for (const auto& t : params) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

// Every tensor name of a task is defined once: inputs, params, node outputs.
class TaskNames {
 public:
  void declare(const Field& where, const std::string& name) {
    if (!names_.insert(name).second) where.fail_message("name \"" + name + "\" is already defined in this task");
  }
  bool defined(const std::string& name) const { return names_.count(name) > 0; }

 private:
  std::set<std::string> names_;
};

void parse_tensors(ObjectReader& r, TaskSpec* task, TaskNames* names) {
  for (const Field& f : r.required("inputs").as_array()) {
    task->inputs.push_back(parse_tensor_spec(f));
    names->declare(f, task->inputs.back().name);
  }
  if (auto params = r.optional("params")) {
    for (const Field& f : params->as_array()) {
      task->params.push_back(parse_tensor_spec(f));
      names->declare(f, task->params.back().name);
    }
  }
  if (task->inputs.size() + task->params.size() > limits::kMaxTaskTensors) {
    r.self().fail_message("a task has at most " + std::to_string(limits::kMaxTaskTensors) +
                          " input and param tensors (limits::kMaxTaskTensors)");
  }
}

GraphNode parse_node(const Field& f, TaskNames* names) {
  ObjectReader n = f.as_object();
  GraphNode node;
  node.op = n.required("op").as_string();
  Field in = n.required("in");
  node.in = in.as_string_list();
  for (size_t i = 0; i < node.in.size(); ++i) {
    if (!names->defined(node.in[i])) {
      in.as_array()[i].fail_message("\"" + node.in[i] + "\" is not an input, a param or the output of an earlier node");
    }
  }
  Field out = n.required("out");
  node.out = out.as_string();
  if (node.out.empty()) out.fail("a non-empty tensor name");
  check_name_length(out, node.out);
  names->declare(out, node.out);
  if (auto attrs = n.optional("attrs")) {
    attrs->as_object();  // type check only; the op registry validates the keys
    // Sized as compact JSON; the document's depth limit makes dump() safe.
    const size_t bytes = attrs->value().dump(-1, ' ', false, json::error_handler_t::replace).size();
    if (bytes > limits::kMaxAttrsBytes) {
      attrs->fail_message(std::to_string(bytes) + " bytes of attrs; a node's attrs are at most " +
                          std::to_string(limits::kMaxAttrsBytes) + " bytes as JSON (limits::kMaxAttrsBytes)");
    }
    node.attrs = attrs->value();
  }
  n.finish();
  return node;
}

void parse_nodes(ObjectReader& r, TaskSpec* task, TaskNames* names) {
  Field nodes = r.required("nodes");
  if (nodes.as_array().empty()) nodes.fail("a non-empty array of nodes");
  if (nodes.value().size() > limits::kMaxTaskNodes) {
    nodes.fail_message(std::to_string(nodes.value().size()) + " nodes; a task has at most " +
                       std::to_string(limits::kMaxTaskNodes) + " (limits::kMaxTaskNodes)");
  }
  for (const Field& f : nodes.as_array()) task->nodes.push_back(parse_node(f, names));
}

void parse_outputs(ObjectReader& r, TaskSpec* task) {
  Field outputs = r.required("outputs");
  task->outputs = outputs.as_string_list();
  if (task->outputs.empty()) outputs.fail("a non-empty array of node output names");
  std::set<std::string> seen_outputs;
  for (size_t i = 0; i < task->outputs.size(); ++i) {
    const std::string& o = task->outputs[i];
    bool produced = false;
    for (const auto& n : task->nodes) produced |= n.out == o;
    if (!produced) outputs.as_array()[i].fail_message("\"" + o + "\" is not the output of any node");
    if (!seen_outputs.insert(o).second) outputs.as_array()[i].fail_message("\"" + o + "\" is listed twice");
  }
}

void parse_shape_variants(const Field& variants, TaskSpec* task) {
  // Counted before any is read: each costs a type check of the graph.
  if (variants.value().is_array() && variants.value().size() > limits::kMaxShapeVariants) {
    variants.fail_message(std::to_string(variants.value().size()) + " shape variants; a task has at most " +
                          std::to_string(limits::kMaxShapeVariants) + " (limits::kMaxShapeVariants)");
  }
  for (const Field& v : variants.as_array()) {
    ObjectReader vr = v.as_object();
    std::map<std::string, std::vector<int64_t>> variant;
    for (auto it = v.value().begin(); it != v.value().end(); ++it) {
      Field shape = vr.required(it.key());
      bool is_input = false;
      for (const auto& in : task->inputs) is_input |= in.name == it.key();
      if (!is_input) {
        shape.fail_message("\"" + it.key() + "\" is not an input of the task (variants change input shapes only)");
      }
      variant[it.key()] = shape.as_shape();
      if (std::string why = check_shape_limits(variant[it.key()]); !why.empty()) shape.fail_message(why);
    }
    if (variant.empty()) v.fail("an object mapping input names to shapes");
    task->shape_variants.push_back(std::move(variant));
  }
}

Tolerance parse_tolerance(const Field& f) {
  ObjectReader t = f.as_object();
  Tolerance tol;
  tol.atol = t.required("atol").as_nonnegative_number();
  tol.rtol = t.required("rtol").as_nonnegative_number();
  t.finish();
  return tol;
}

Baselines parse_baselines(const Field& f) {
  ObjectReader b = f.as_object();
  Baselines base;
  if (auto d = b.optional("device")) base.device = d->as_string();
  if (auto e = b.optional("eager_ms")) base.eager_ms = e->as_positive_number();
  if (auto c = b.optional("compile_ms")) base.compile_ms = c->as_positive_number();
  b.finish();
  return base;
}

json parse_meta(const Field& f) {
  f.as_object();  // type check: free-form keys, never interpreted by the judge
  const size_t bytes = f.value().dump().size();
  if (bytes > kMaxTaskMetaBytes) {
    f.fail_message("is " + std::to_string(bytes) + " bytes serialized; at most " + std::to_string(kMaxTaskMetaBytes) +
                   " are allowed (keep bulky data out of the task)");
  }
  return f.value();
}

}  // namespace

TaskSpec parse_task(const Document& doc) {
  ObjectReader r = doc.root_object();
  TaskSpec task;
  Field id = r.required("id");
  task.id = id.as_string();
  if (task.id.empty()) id.fail("a non-empty task id such as \"synth/0001a3f2\"");
  check_name_length(id, task.id);
  if (auto f = r.optional("source")) task.source = f->as_enum({"synth", "kernelbench", "user"});
  if (auto f = r.optional("description")) task.description = f->as_string();

  TaskNames names;
  parse_tensors(r, &task, &names);
  parse_nodes(r, &task, &names);
  parse_outputs(r, &task);
  if (auto f = r.optional("shape_variants")) parse_shape_variants(*f, &task);
  if (auto f = r.optional("tolerance")) task.tolerance = parse_tolerance(*f);
  if (auto f = r.optional("baselines")) task.baselines = parse_baselines(*f);
  if (auto f = r.optional("libraries")) {
    for (const Field& lib : f->as_array()) task.libraries.push_back(lib.as_enum(known_libraries()));
  }
  if (auto f = r.optional("meta")) task.meta = parse_meta(*f);
  r.finish();
  return task;
}

TaskSpec load_task(const std::filesystem::path& path) { return parse_task(Document::from_file(path)); }

json to_json(const TaskSpec& task) {
  json j;
  j["id"] = task.id;
  j["source"] = task.source;
  if (!task.description.empty()) j["description"] = task.description;
  j["inputs"] = json::array();
  for (const auto& t : task.inputs) j["inputs"].push_back(to_json(t));
  if (!task.params.empty()) {
    j["params"] = json::array();
    for (const auto& t : task.params) j["params"].push_back(to_json(t));
  }
  j["nodes"] = json::array();
  for (const auto& n : task.nodes) {
    json node = {{"op", n.op}, {"in", n.in}, {"out", n.out}};
    if (!n.attrs.empty()) node["attrs"] = n.attrs;
    j["nodes"].push_back(node);
  }
  j["outputs"] = task.outputs;
  if (!task.shape_variants.empty()) {
    j["shape_variants"] = json::array();
    for (const auto& v : task.shape_variants) {
      json variant = json::object();
      for (const auto& [name, shape] : v) variant[name] = shape;
      j["shape_variants"].push_back(variant);
    }
  }
  if (task.tolerance) j["tolerance"] = {{"atol", task.tolerance->atol}, {"rtol", task.tolerance->rtol}};
  if (task.baselines) {
    json b = json::object();
    if (!task.baselines->device.empty()) b["device"] = task.baselines->device;
    if (task.baselines->eager_ms) b["eager_ms"] = *task.baselines->eager_ms;
    if (task.baselines->compile_ms) b["compile_ms"] = *task.baselines->compile_ms;
    j["baselines"] = b;
  }
  if (!task.libraries.empty()) j["libraries"] = task.libraries;
  if (!task.meta.empty()) j["meta"] = task.meta;
  return j;
}

}  // namespace kforge
