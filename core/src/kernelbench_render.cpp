#include "kforge/core/kernelbench_render.h"

#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "kforge/core/op_registry.h"
#include "ops/op_helpers.h"

namespace kforge {
namespace {

// Names the rendered module defines or imports at top level, plus Python
// keywords and the builtins the rendering itself calls.
const std::set<std::string>& reserved_names() {
  static const std::set<std::string> kReserved = {
      "False",  "None",   "True",    "and",      "as",       "assert",     "async",
      "await",  "break",  "class",   "continue", "def",      "del",        "elif",
      "else",   "except", "finally", "for",      "from",     "global",     "if",
      "import", "in",     "is",      "lambda",   "nonlocal", "not",        "or",
      "pass",   "raise",  "return",  "try",      "while",    "with",       "yield",
      "self",   "torch",  "nn",      "F",        "Model",    "get_inputs", "get_init_inputs",
      "super",  "tuple",  "range",   "print",    "len",      "list",       "int",
      "float",  "math",
  };
  return kReserved;
}

std::string sanitize(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class NameTable {
 public:
  std::string claim(const std::string& wanted) {
    std::string s = sanitize(wanted);
    while (reserved_names().count(s) || used_.count(s)) s += "_";
    used_.insert(s);
    return s;
  }

 private:
  std::set<std::string> used_;
};

std::string torch_dtype(DType d) {
  switch (d) {
    case DType::kFloat32:
      return "torch.float32";
    case DType::kFloat16:
      return "torch.float16";
    case DType::kBFloat16:
      return "torch.bfloat16";
    case DType::kFloat64:
      return "torch.float64";
    case DType::kInt32:
      return "torch.int32";
    case DType::kInt64:
      return "torch.int64";
    case DType::kInt8:
      return "torch.int8";
    case DType::kUInt8:
      return "torch.uint8";
    case DType::kBool:
      return "torch.bool";
  }
  return "torch.float32";
}

std::string py_float(double v) { return ops::py_literal(json(v)); }

// Mirrors make_inputs (reference/make_inputs.cpp): floating values are drawn
// in float32 (float64 for float64 tensors) and then converted.
std::string init_expression(const TensorSpec& t, const std::string& shape) {
  const InitSpec& init = t.init;
  const std::string d = torch_dtype(t.dtype);
  const std::string draw_dtype = t.dtype == DType::kFloat64 ? "torch.float64" : "torch.float32";
  const std::string convert = draw_dtype == d ? "" : ".to(" + d + ")";
  const std::string empty = "torch.empty(" + shape + ", dtype=" + draw_dtype + ")";
  if (init.kind == "zeros") return "torch.zeros(" + shape + ", dtype=" + d + ")";
  if (init.kind == "ones") return "torch.ones(" + shape + ", dtype=" + d + ")";
  if (init.kind == "normal") {
    return empty + ".normal_(" + py_float(init.mean) + ", " + py_float(init.std) + ")" + convert;
  }
  if (init.kind == "uniform") {
    return empty + ".uniform_(" + py_float(init.low) + ", " + py_float(init.high) + ")" + convert;
  }
  if (init.kind == "positive") {
    return "(" + empty + ".normal_(" + py_float(init.mean) + ", " + py_float(init.std) + ").abs_() + " +
           py_float(init.low) + ")" + convert;
  }
  if (init.kind == "kaiming_uniform" || init.kind == "xavier_uniform") {
    const double bound = init_uniform_bound(t);
    return empty + ".uniform_(" + py_float(-bound) + ", " + py_float(bound) + ")" + convert;
  }
  if (init.kind == "randint") {
    return "torch.randint(" + std::to_string(static_cast<int64_t>(std::ceil(init.low))) + ", " +
           std::to_string(static_cast<int64_t>(std::ceil(init.high))) + ", " + shape + ", dtype=" + d + ")";
  }
  if (init.kind == "bernoulli") {
    return "(torch.rand(" + shape + ") < " + py_float(init.mean) + ").to(" + d + ")";
  }
  // arange: 0, 1, ... in row-major order.
  return "torch.arange(" + std::to_string(t.numel()) + ").reshape(" + shape + ").to(" + d + ")";
}

std::string shape_tuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return "(" + std::to_string(shape[0]) + ",)";
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

std::string docstring_text(const std::string& text) {
  std::string s;
  for (char c : text) {
    if (c == '\\') {
      s += "\\\\";
    } else if (c == '"') {
      s += "\\\"";
    } else {
      s += c;
    }
  }
  return s;
}

struct Rendering {
  std::map<std::string, std::string> names;         // task value -> Python identifier
  std::map<std::string, std::string> shape_consts;  // input/param -> constant name
};

Rendering assign_names(const TaskSpec& task) {
  Rendering r;
  NameTable table;
  // Inputs and their shape constants first: they are what a reader of the
  // prompt refers to, so they keep their names when a node output collides.
  for (const auto& t : task.kernel_inputs()) r.names[t.name] = table.claim(t.name);
  for (const auto& t : task.kernel_inputs()) r.shape_consts[t.name] = table.claim(upper(r.names[t.name]) + "_SHAPE");
  for (const auto& n : task.nodes) r.names[n.out] = table.claim(n.out);
  return r;
}

}  // namespace

std::map<std::string, std::string> kernelbench_names(const TaskSpec& task) { return assign_names(task).names; }

std::string render_kernelbench(const TaskSpec& task) {
  const std::map<std::string, TensorType> types = infer_graph(task);
  const Rendering names = assign_names(task);
  std::set<std::string> params;
  for (const auto& p : task.params) params.insert(p.name);
  auto ref = [&](const std::string& value) {
    return params.count(value) ? "self." + names.names.at(value) : names.names.at(value);
  };

  std::ostringstream py;
  py << "# KernelForge task " << task.id << " (source: " << task.source << ")\n";
  py << "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n";
  for (const auto& t : task.kernel_inputs()) {
    py << names.shape_consts.at(t.name) << " = " << shape_tuple(t.shape) << "\n";
  }
  py << "\n\nclass Model(nn.Module):\n";
  py << "    \"\"\"" << docstring_text(task.description.empty() ? "Task " + task.id : task.description) << "\n\n";
  py << "    Params are the task's weights; forward computes:\n";
  for (const auto& n : task.nodes) {
    std::string ins;
    for (size_t i = 0; i < n.in.size(); ++i) ins += (i ? ", " : "") + n.in[i];
    py << "      " << docstring_text(n.out) << " = " << n.op << "(" << docstring_text(ins) << ")";
    if (!n.attrs.empty()) py << " " << docstring_text(n.attrs.dump());
    py << "\n";
  }
  py << "    \"\"\"\n\n";
  py << "    def __init__(self):\n        super().__init__()\n";
  for (const auto& p : task.params) {
    const std::string init = init_expression(p, names.shape_consts.at(p.name));
    if (dtype_is_floating(p.dtype)) {
      py << "        self." << names.names.at(p.name) << " = nn.Parameter(" << init << ")\n";
    } else {
      // nn.Parameter must be floating; integer weights are buffers.
      py << "        self.register_buffer('" << names.names.at(p.name) << "', " << init << ")\n";
    }
  }
  if (task.params.empty()) py << "        pass\n";
  py << "\n    def forward(self";
  for (const auto& t : task.inputs) py << ", " << names.names.at(t.name);
  py << "):\n";
  for (const auto& n : task.nodes) {
    const OpSchema* schema = op_registry().find(n.op);
    std::vector<std::string> args;
    std::vector<TensorType> in;
    for (const auto& v : n.in) {
      args.push_back(ref(v));
      in.push_back(types.at(v));
    }
    const json attrs = resolve_attrs(*schema, n.attrs, "");
    py << "        " << names.names.at(n.out) << " = " << schema->python(args, in, attrs) << "\n";
  }
  py << "        return ";
  for (size_t i = 0; i < task.outputs.size(); ++i) py << (i ? ", " : "") << names.names.at(task.outputs[i]);
  py << "\n\n\ndef get_inputs():\n";
  for (const auto& t : task.inputs) {
    py << "    " << names.names.at(t.name) << " = " << init_expression(t, names.shape_consts.at(t.name)) << "\n";
  }
  py << "    return [";
  for (size_t i = 0; i < task.inputs.size(); ++i) py << (i ? ", " : "") << names.names.at(task.inputs[i].name);
  py << "]\n\n\ndef get_init_inputs():\n    return []\n";
  return py.str();
}

}  // namespace kforge
