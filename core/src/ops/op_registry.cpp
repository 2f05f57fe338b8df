#include "kforge/core/op_registry.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "kforge/core/input_limits.h"
#include "ops/op_helpers.h"

namespace kforge {
namespace {

struct CategoryInfo {
  OpCategory category;
  std::string name;
};

const std::vector<CategoryInfo>& category_table() {
  static const std::vector<CategoryInfo> kTable = {
      {OpCategory::kMainLoop, "main_loop"}, {OpCategory::kActivation, "activation"},
      {OpCategory::kNorm, "norm"},          {OpCategory::kReduction, "reduction"},
      {OpCategory::kPooling, "pooling"},    {OpCategory::kElementwise, "elementwise"},
      {OpCategory::kSoftmax, "softmax"},    {OpCategory::kLayout, "layout"},
  };
  return kTable;
}

std::string list_names(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + ("\"" + names[i] + "\"");
  return s;
}

std::string type_description(const AttrSchema& a) {
  if (a.type == "int") return "an integer";
  if (a.type == "int_list") return "an integer or a list of integers";
  if (a.type == "float" || a.type == "number") return "a number";
  if (a.type == "bool") return "true or false";
  if (!a.choices.empty()) return "one of " + list_names(a.choices);
  return "a string";
}

// Integer attrs are bounded so that shape inference, which multiplies them
// with dimensions, cannot wrap (limits::kMaxAttrInt).
bool within_attr_range(int64_t v) { return v >= -limits::kMaxAttrInt && v <= limits::kMaxAttrInt; }

bool is_integral_number(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15;
  }
  return false;
}

// Returns the attr value in canonical form, or null when it has the wrong type.
json canonical_attr(const AttrSchema& a, const json& v) {
  if (a.type == "int") {
    return is_integral_number(v) && within_attr_range(v.get<int64_t>()) ? json(v.get<int64_t>()) : json();
  }
  if (a.type == "float") {
    return v.is_number() && std::isfinite(v.get<double>()) ? json(v.get<double>()) : json();
  }
  if (a.type == "number") {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return json();
    if (v.is_number_integer() || v.is_number_unsigned()) return json(v.get<int64_t>());
    return v.is_number() && std::isfinite(v.get<double>()) ? json(v.get<double>()) : json();
  }
  if (a.type == "bool") return v.is_boolean() ? v : json();
  if (a.type == "string") {
    if (!v.is_string()) return json();
    if (!a.choices.empty() && std::find(a.choices.begin(), a.choices.end(), v.get<std::string>()) == a.choices.end()) {
      return json();
    }
    return v;
  }
  if (a.type == "int_list") {
    if (is_integral_number(v)) return within_attr_range(v.get<int64_t>()) ? json(v.get<int64_t>()) : json();
    if (!v.is_array()) return json();
    json out = json::array();
    for (const auto& item : v) {
      if (!is_integral_number(item) || !within_attr_range(item.get<int64_t>())) return json();
      out.push_back(item.get<int64_t>());
    }
    return out;
  }
  throw std::logic_error("attr \"" + a.name + "\" has unknown schema type \"" + a.type + "\"");
}

// An int or int_list attr that has the right type but a value beyond
// limits::kMaxAttrInt.
bool integral_out_of_range(const AttrSchema& a, const json& v) {
  auto beyond = [](const json& x) { return is_integral_number(x) && !within_attr_range(x.get<int64_t>()); };
  auto beyond_u64 = [](const json& x) {
    return x.is_number_unsigned() && x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  };
  if (a.type == "int") return beyond(v) || beyond_u64(v);
  if (a.type != "int_list") return false;
  if (!v.is_array()) return beyond(v) || beyond_u64(v);
  bool any = false;
  for (const auto& x : v) {
    if (!is_integral_number(x) && !beyond_u64(x)) return false;  // a type error, reported as such
    any |= beyond(x) || beyond_u64(x);
  }
  return any;
}

std::string with_colon(const std::string& where) { return where.empty() ? "" : where + ": "; }

}  // namespace

int64_t TensorType::numel() const { return saturating_numel(shape); }

const std::string& op_category_name(OpCategory c) {
  for (const auto& info : category_table()) {
    if (info.category == c) return info.name;
  }
  return category_table().front().name;
}

const std::vector<OpCategory>& op_categories() {
  static const std::vector<OpCategory> kAll = [] {
    std::vector<OpCategory> v;
    for (const auto& info : category_table()) v.push_back(info.category);
    return v;
  }();
  return kAll;
}

const OpSchema* OpRegistry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, schema] : ops_) out.push_back(name);
  return out;
}

std::vector<const OpSchema*> OpRegistry::in_category(OpCategory c) const {
  std::vector<const OpSchema*> out;
  for (const auto& [name, schema] : ops_) {
    if (schema.category == c) out.push_back(&schema);
  }
  return out;
}

void OpRegistry::add(OpSchema schema) {
  if (!schema.infer || !schema.flops || !schema.python) {
    throw std::logic_error("op \"" + schema.name + "\" is missing its infer, flops or python function");
  }
  const std::string name = schema.name;
  if (!ops_.emplace(name, std::move(schema)).second) throw std::logic_error("op \"" + name + "\" is registered twice");
}

const OpRegistry& op_registry() {
  static const OpRegistry kRegistry = [] {
    OpRegistry r;
    ops::register_main_loop_ops(r);
    ops::register_activation_ops(r);
    ops::register_norm_ops(r);
    ops::register_reduction_ops(r);
    ops::register_pooling_ops(r);
    ops::register_elementwise_ops(r);
    ops::register_softmax_ops(r);
    ops::register_layout_ops(r);
    return r;
  }();
  return kRegistry;
}

json resolve_attrs(const OpSchema& schema, const json& attrs, const std::string& where) {
  const std::string prefix = with_colon(where);
  if (!attrs.is_null() && !attrs.is_object()) {
    throw InputError(prefix + "attrs must be an object, got " + describe_value(attrs));
  }
  std::vector<std::string> allowed;
  for (const auto& a : schema.attrs) allowed.push_back(a.name);
  json out = json::object();
  if (attrs.is_object()) {
    for (auto it = attrs.begin(); it != attrs.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
      const std::string hint = closest_match(it.key(), allowed);
      throw InputError(prefix + "unknown attr \"" + it.key() + "\"" +
                       (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") + "; " + schema.name +
                       " accepts: " + list_names(allowed));
    }
  }
  for (const auto& a : schema.attrs) {
    const bool given = attrs.is_object() && attrs.contains(a.name) && !attrs.at(a.name).is_null();
    if (!given) {
      if (a.default_value.is_null() && !a.optional) {
        throw InputError(prefix + "missing required attr \"" + a.name + "\" (" + type_description(a) + ": " + a.doc +
                         ")");
      }
      out[a.name] = a.default_value;
      continue;
    }
    const json& v = attrs.at(a.name);
    json c = canonical_attr(a, v);
    if (c.is_null() && integral_out_of_range(a, v)) {
      throw InputError(prefix + "attr \"" + a.name + "\" = " + describe_value(v) +
                       " is out of range: integer attrs are within [-2^31, 2^31] (limits::kMaxAttrInt)");
    }
    if (c.is_null()) {
      throw InputError(prefix + "attr \"" + a.name + "\" must be " + type_description(a) + ", got " +
                       describe_value(v));
    }
    out[a.name] = std::move(c);
  }
  return out;
}

TensorType infer_node(const GraphNode& node, const std::vector<TensorType>& inputs, const std::string& where) {
  const std::string prefix = with_colon(where);
  const OpSchema* schema = op_registry().find(node.op);
  if (!schema) {
    const std::vector<std::string> names = op_registry().names();
    const std::string hint = closest_match(node.op, names);
    throw InputError(prefix + "unknown op \"" + node.op + "\"" +
                     (hint.empty() ? "" : "; did you mean \"" + hint + "\"?") + " (docs/ops.md lists the vocabulary)");
  }
  const int n = static_cast<int>(inputs.size());
  if (n < schema->min_inputs || n > schema->max_inputs) {
    std::string allowed = std::to_string(schema->min_inputs);
    if (schema->max_inputs != schema->min_inputs) {
      allowed = schema->max_inputs > 64 ? "at least " + allowed : allowed + " to " + std::to_string(schema->max_inputs);
    }
    throw InputError(prefix + node.op + " takes " + allowed + " input" +
                     (schema->max_inputs == 1 && schema->min_inputs == 1 ? "" : "s") + ", got " + std::to_string(n));
  }
  const json attrs = resolve_attrs(*schema, node.attrs, where);
  try {
    TensorType out = schema->infer(inputs, attrs);
    out.name = node.out;
    return out;
  } catch (const InputError& e) {
    throw InputError(prefix + e.what());
  }
}

namespace {

// infer_graph with errors prefixed by `label` ("task 't'" or "task 't', shape
// variant 2"). Every tensor, inputs and intermediates alike, is checked
// against the shape limits as it is typed.
std::map<std::string, TensorType> infer_graph_labeled(const TaskSpec& task, const std::string& label) {
  std::map<std::string, TensorType> types;
  if (task.nodes.size() > limits::kMaxTaskNodes) {
    throw InputError(label + ": " + std::to_string(task.nodes.size()) + " nodes; a task has at most " +
                     std::to_string(limits::kMaxTaskNodes) + " (limits::kMaxTaskNodes)");
  }
  for (const auto& t : task.kernel_inputs()) {
    if (std::string why = check_shape_limits(t.shape); !why.empty()) {
      throw InputError(label + ": tensor \"" + t.name + "\": " + why);
    }
    if (!types.emplace(t.name, TensorType{t.shape, t.dtype, t.name}).second) {
      throw InputError(label + ": tensor \"" + t.name + "\" is defined twice");
    }
  }
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    const GraphNode& node = task.nodes[i];
    const std::string where = label + ": node " + std::to_string(i) + " (" + node.op + ")";
    std::vector<TensorType> in;
    for (const auto& name : node.in) {
      auto it = types.find(name);
      if (it == types.end()) {
        throw InputError(where + ": input \"" + name + "\" is not an input, a param or the output of an earlier node");
      }
      in.push_back(it->second);
    }
    TensorType out = infer_node(node, in, where);
    if (std::string why = check_shape_limits(out.shape); !why.empty()) {
      throw InputError(where + ": output \"" + node.out + "\": " + why);
    }
    if (!types.emplace(node.out, out).second) {
      throw InputError(where + ": output name \"" + node.out + "\" is already defined in this task");
    }
  }
  for (const auto& o : task.outputs) {
    if (!types.count(o)) throw InputError(label + ": output \"" + o + "\" is not produced by any node");
  }
  return types;
}

std::vector<TensorType> outputs_of(const TaskSpec& task, const std::map<std::string, TensorType>& types) {
  std::vector<TensorType> out;
  for (const auto& o : task.outputs) out.push_back(types.at(o));
  return out;
}

}  // namespace

std::map<std::string, TensorType> infer_graph(const TaskSpec& task) {
  return infer_graph_labeled(task, "task '" + task.id + "'");
}

std::vector<std::vector<TensorType>> validate_task(const TaskSpec& task) {
  const std::string label = "task '" + task.id + "'";
  if (task.shape_variants.size() > limits::kMaxShapeVariants) {
    throw InputError(label + ": " + std::to_string(task.shape_variants.size()) +
                     " shape variants; a task has at most " + std::to_string(limits::kMaxShapeVariants) +
                     " (limits::kMaxShapeVariants)");
  }
  std::vector<std::vector<TensorType>> outputs;
  outputs.push_back(outputs_of(task, infer_graph_labeled(task, label)));
  for (size_t v = 0; v < task.shape_variants.size(); ++v) {
    const TaskSpec variant = task.with_variant(v);
    outputs.push_back(
        outputs_of(variant, infer_graph_labeled(variant, label + ", shape variant " + std::to_string(v))));
  }
  return outputs;
}

std::vector<TensorType> infer_outputs(const TaskSpec& task) { return outputs_of(task, infer_graph(task)); }

WorkEstimate estimate_work(const TaskSpec& task) {
  const auto types = infer_graph(task);
  WorkEstimate w;
  for (const auto& t : task.kernel_inputs()) w.bytes += static_cast<double>(t.nbytes());
  for (const auto& o : task.outputs) {
    const TensorType& t = types.at(o);
    w.bytes += static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype));
  }
  for (const auto& node : task.nodes) {
    const OpSchema* schema = op_registry().find(node.op);
    std::vector<TensorType> in;
    for (const auto& name : node.in) in.push_back(types.at(name));
    const json attrs = resolve_attrs(*schema, node.attrs, "");
    w.flops += schema->flops(in, types.at(node.out), attrs);
  }
  return w;
}

}  // namespace kforge
