#include "kforge/env/cuda/launch_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kforge/core/input_limits.h"

namespace kforge::env {
namespace {

constexpr size_t kMaxKernels = limits::kMaxPlanKernels;
constexpr size_t kMaxArgs = limits::kMaxPlanArgs;
constexpr const char* kAxes[3] = {"x", "y", "z"};

struct ArgTypeInfo {
  LaunchArgType type;
  std::string name;
};

const std::vector<ArgTypeInfo>& arg_types() {
  static const std::vector<ArgTypeInfo> kTypes = {{LaunchArgType::kTensor, "tensor"}, {LaunchArgType::kI32, "i32"},
                                                  {LaunchArgType::kI64, "i64"},       {LaunchArgType::kU32, "u32"},
                                                  {LaunchArgType::kU64, "u64"},       {LaunchArgType::kF32, "f32"},
                                                  {LaunchArgType::kF64, "f64"}};
  return kTypes;
}

bool is_float_type(LaunchArgType t) { return t == LaunchArgType::kF32 || t == LaunchArgType::kF64; }

std::string syntax_message(const std::string& text, const LaunchSyntaxError& e, size_t column_offset) {
  const size_t column = e.column() + column_offset;
  return "at column " + std::to_string(column) + ": " + e.what() + "\n    " + text + "\n    " +
         std::string(column > 0 ? column - 1 : 0, ' ') + "^";
}

LaunchExpr parse_int_expr(const Field& f, const std::vector<std::string>& names) {
  if (f.value().is_number()) {
    if (!f.value().is_number_integer()) f.fail("an integer or an integer expression such as \"cdiv(numel(x), 256)\"");
    return LaunchExpr::constant(f.as_int());
  }
  if (!f.value().is_string()) f.fail("an integer or an expression string such as \"cdiv(numel(x), 256)\"");
  const std::string text = f.as_string();
  try {
    return LaunchExpr::parse(text, LaunchExpr::Kind::kInt, names);
  } catch (const LaunchSyntaxError& e) {
    f.fail_message(syntax_message(text, e, 0));
  }
}

// A dimension fixed at compile time is checked right away, so an impossible
// launch is a compile error rather than a failed verification.
void check_constant(const Field& f, const LaunchExpr& e, int64_t lo, int64_t hi, const std::string& what) {
  if (!e.is_constant()) return;
  int64_t v = 0;
  try {
    v = e.eval_int({});
  } catch (const LaunchError& err) {
    f.fail_message(err.what());
  }
  if (v < lo || v > hi) {
    f.fail_message(what + " is " + std::to_string(v) + "; it must be in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  }
}

std::array<LaunchExpr, 3> parse_dims(const Field& f, const std::vector<std::string>& names, bool is_block) {
  const LaunchLimits limits;
  std::vector<Field> items;
  if (f.value().is_array()) {
    items = f.as_array();
    if (items.empty() || items.size() > 3) f.fail("1 to 3 expressions (x, y, z)");
  } else {
    items.push_back(f);
  }
  std::array<LaunchExpr, 3> dims = {LaunchExpr::constant(1), LaunchExpr::constant(1), LaunchExpr::constant(1)};
  for (size_t i = 0; i < items.size(); ++i) {
    dims[i] = parse_int_expr(items[i], names);
    const int64_t hi = is_block ? limits.max_block[i] : limits.max_grid[i];
    check_constant(items[i], dims[i], 1, hi, std::string(is_block ? "block." : "grid.") + kAxes[i]);
  }
  if (is_block && std::all_of(dims.begin(), dims.end(), [](const LaunchExpr& e) { return e.is_constant(); })) {
    const int64_t threads = dims[0].eval_int({}) * dims[1].eval_int({}) * dims[2].eval_int({});
    if (threads > limits.max_threads_per_block) {
      f.fail_message("the block has " + std::to_string(threads) + " threads; at most " +
                     std::to_string(limits.max_threads_per_block) + " are allowed");
    }
  }
  return dims;
}

LaunchArg parse_arg(const Field& f, const std::vector<std::string>& names) {
  if (f.value().is_number()) {
    const std::string v = f.value().dump();
    f.fail("a typed scalar such as \"i32(" + v + ")\" or \"f32(" + v + ")\" (a bare number has no C type), or a " +
           "tensor name");
  }
  const std::string text = f.as_string();
  LaunchArg arg;
  if (std::find(names.begin(), names.end(), text) != names.end()) {
    arg.type = LaunchArgType::kTensor;
    arg.tensor = text;
    return arg;
  }
  const size_t open = text.find('(');
  const std::string head = text.substr(0, open);
  auto type = std::find_if(arg_types().begin(), arg_types().end(),
                           [&](const ArgTypeInfo& t) { return t.name == head && t.type != LaunchArgType::kTensor; });
  if (open == std::string::npos || type == arg_types().end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    const std::string hint = closest_match(text, names);
    f.fail_message("\"" + text + "\" is neither a tensor of the task" +
                   (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                   " nor a typed scalar i32(...), i64(...), u32(...), u64(...), f32(...), f64(...); tensors: " +
                   (known.empty() ? "(none)" : known));
  }
  if (text.back() != ')') {
    f.fail_message("at column " + std::to_string(text.size()) + ": a typed scalar must end with ')': \"" + text + "\"");
  }
  arg.type = type->type;
  const std::string inner = text.substr(open + 1, text.size() - open - 2);
  try {
    arg.value =
        LaunchExpr::parse(inner, is_float_type(arg.type) ? LaunchExpr::Kind::kFloat : LaunchExpr::Kind::kInt, names);
  } catch (const LaunchSyntaxError& e) {
    f.fail_message(syntax_message(text, e, open + 1));
  }
  return arg;
}

// Characters of C++ names, template arguments and literals; anything else
// (quotes, braces, ';') has no place in a name expression.
void check_kernel_name(const Field& f, const std::string& name) {
  if (name.empty()) f.fail("a kernel name such as \"my_kernel\" or \"scale<float, 4>\"");
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_' || name[0] == ':')) {
    f.fail_message("kernel name \"" + name + "\" must start with a letter, '_' or '::'");
  }
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_:<>, *&()+-.", c) != nullptr)) {
      f.fail_message("kernel name \"" + name + "\" contains '" + std::string(1, c) +
                     "'; use a C++ name or template instantiation such as \"scale<float, 4>\"");
    }
  }
}

KernelLaunchSpec parse_kernel(const Field& f, const std::vector<std::string>& names) {
  ObjectReader r = f.as_object();
  KernelLaunchSpec k;
  Field name = r.required("name");
  k.name = name.as_string();
  check_kernel_name(name, k.name);
  if (auto lowered = r.optional("lowered_name")) k.lowered_name = lowered->as_string();
  k.grid = parse_dims(r.required("grid"), names, false);
  k.block = parse_dims(r.required("block"), names, true);
  if (auto smem = r.optional("shared_mem")) {
    k.shared_mem = parse_int_expr(*smem, names);
    check_constant(*smem, k.shared_mem, 0, LaunchLimits().max_shared_mem_bytes, "shared_mem");
  }
  if (auto args = r.optional("args")) {
    auto items = args->as_array();
    if (items.size() > kMaxArgs) args->fail_message("at most " + std::to_string(kMaxArgs) + " arguments");
    for (const Field& a : items) k.args.push_back(parse_arg(a, names));
  }
  r.finish();
  return k;
}

void check_range(int64_t v, int64_t lo, int64_t hi, const std::string& what) {
  if (v < lo || v > hi) {
    throw LaunchError(what + " is " + std::to_string(v) + "; it must be in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
}

template <typename T>
void append_value(KernelLaunch& launch, LaunchArgType type, T value) {
  launch.append(type, "", &value, sizeof(T));
}

void pack_scalar(KernelLaunch& launch, const LaunchArg& arg, const ShapeMap& shapes, const std::string& what) {
  switch (arg.type) {
    case LaunchArgType::kTensor:
      break;
    case LaunchArgType::kI32: {
      const int64_t v = arg.value.eval_int(shapes);
      check_range(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), what);
      append_value(launch, arg.type, static_cast<int32_t>(v));
      break;
    }
    case LaunchArgType::kI64:
      append_value(launch, arg.type, arg.value.eval_int(shapes));
      break;
    case LaunchArgType::kU32: {
      const int64_t v = arg.value.eval_int(shapes);
      check_range(v, 0, std::numeric_limits<uint32_t>::max(), what);
      append_value(launch, arg.type, static_cast<uint32_t>(v));
      break;
    }
    case LaunchArgType::kU64: {
      const int64_t v = arg.value.eval_int(shapes);
      check_range(v, 0, std::numeric_limits<int64_t>::max(), what);
      append_value(launch, arg.type, static_cast<uint64_t>(v));
      break;
    }
    case LaunchArgType::kF32: {
      const double v = arg.value.eval_float(shapes);
      if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
        throw LaunchError(what + " = " + std::to_string(v) + " does not fit in a float");
      }
      append_value(launch, arg.type, static_cast<float>(v));
      break;
    }
    case LaunchArgType::kF64:
      append_value(launch, arg.type, arg.value.eval_float(shapes));
      break;
  }
}

}  // namespace

const std::string& launch_arg_type_name(LaunchArgType type) {
  for (const auto& t : arg_types()) {
    if (t.type == type) return t.name;
  }
  return arg_types()[0].name;
}

std::vector<std::string> launch_tensor_names(const TaskSpec& task) {
  std::vector<std::string> names;
  for (const auto& t : task.inputs) names.push_back(t.name);
  for (const auto& t : task.params) names.push_back(t.name);
  for (const auto& o : task.outputs) names.push_back(o);
  return names;
}

LaunchPlan parse_launch_plan(const Field& launch, const std::vector<std::string>& tensor_names) {
  ObjectReader r = launch.as_object();
  LaunchPlan plan;
  if (!r.has("kernels")) {
    plan.kernels.push_back(parse_kernel(launch, tensor_names));
    return plan;
  }
  Field kernels = r.required("kernels");
  auto items = kernels.as_array();
  if (items.empty()) kernels.fail("a non-empty list of kernels");
  if (items.size() > kMaxKernels) kernels.fail_message("at most " + std::to_string(kMaxKernels) + " kernels");
  for (const Field& k : items) plan.kernels.push_back(parse_kernel(k, tensor_names));
  r.finish();
  return plan;
}

LaunchPlan parse_launch_plan(const json& launch, const std::vector<std::string>& tensor_names,
                             const std::string& source, const std::string& pointer_prefix) {
  // Wrapping the plan at its place in the enclosing document keeps the JSON
  // paths of errors the ones the author sees ("/launch/kernels/0/...").
  json root = launch;
  std::vector<std::string> keys;
  for (size_t start = 1; start <= pointer_prefix.size();) {
    const size_t slash = pointer_prefix.find('/', start);
    const size_t end = slash == std::string::npos ? pointer_prefix.size() : slash;
    if (end > start) keys.push_back(pointer_prefix.substr(start, end - start));
    start = end + 1;
  }
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) root = json{{*it, std::move(root)}};
  const Document doc = Document::from_value(std::move(root), source);
  const json* value = &doc.root;
  std::string pointer;
  for (const auto& key : keys) {
    value = &(*value)[key];
    pointer = json_pointer_append(pointer, key);
  }
  return parse_launch_plan(Field(doc, *value, pointer), tensor_names);
}

json to_json(const LaunchPlan& plan) {
  json kernels = json::array();
  for (const auto& k : plan.kernels) {
    json j = {{"name", k.name}};
    if (!k.lowered_name.empty()) j["lowered_name"] = k.lowered_name;
    for (const char* key : {"grid", "block"}) {
      const auto& dims = std::string(key) == "grid" ? k.grid : k.block;
      j[key] = {dims[0].to_string(), dims[1].to_string(), dims[2].to_string()};
    }
    j["shared_mem"] = k.shared_mem.to_string();
    json args = json::array();
    for (const auto& a : k.args) {
      args.push_back(a.type == LaunchArgType::kTensor ? a.tensor
                                                      : launch_arg_type_name(a.type) + "(" + a.value.to_string() + ")");
    }
    j["args"] = std::move(args);
    kernels.push_back(std::move(j));
  }
  return {{"kernels", std::move(kernels)}};
}

void KernelLaunch::append(LaunchArgType type, const std::string& tensor, const void* value, size_t size) {
  const size_t offset = (size_ + size - 1) / size * size;
  size_ = offset + size;
  storage_.resize((size_ + 7) / 8, 0);
  std::memcpy(reinterpret_cast<unsigned char*>(storage_.data()) + offset, value, size);
  slots_.push_back({type, tensor, offset, size});
}

void KernelLaunch::bind_tensors(const std::map<std::string, void*>& pointers) {
  for (const auto& slot : slots_) {
    if (slot.type != LaunchArgType::kTensor) continue;
    auto it = pointers.find(slot.tensor);
    if (it == pointers.end()) throw LaunchError("kernel " + name + ": no pointer for tensor '" + slot.tensor + "'");
    std::memcpy(reinterpret_cast<unsigned char*>(storage_.data()) + slot.offset, &it->second, sizeof(void*));
  }
}

std::vector<void*> KernelLaunch::kernel_params() {
  std::vector<void*> params;
  params.reserve(slots_.size());
  for (const auto& slot : slots_) params.push_back(reinterpret_cast<unsigned char*>(storage_.data()) + slot.offset);
  return params;
}

std::vector<KernelLaunch> evaluate_launch_plan(const LaunchPlan& plan, const ShapeMap& shapes,
                                               const LaunchLimits& limits) {
  std::vector<KernelLaunch> launches;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const KernelLaunchSpec& spec = plan.kernels[i];
    const std::string where = "kernels[" + std::to_string(i) + "] (" + spec.name + "): ";
    std::string field;
    try {
      KernelLaunch launch;
      launch.name = spec.name;
      launch.lowered_name = spec.lowered_name;
      int64_t threads = 1;
      for (size_t d = 0; d < 3; ++d) {
        field = std::string("grid.") + kAxes[d] + " = " + spec.grid[d].to_string();
        const int64_t g = spec.grid[d].eval_int(shapes);
        check_range(g, 1, limits.max_grid[d], field);
        launch.grid[d] = static_cast<uint32_t>(g);
        field = std::string("block.") + kAxes[d] + " = " + spec.block[d].to_string();
        const int64_t b = spec.block[d].eval_int(shapes);
        check_range(b, 1, limits.max_block[d], field);
        launch.block[d] = static_cast<uint32_t>(b);
        threads *= b;
      }
      field = "block";
      check_range(threads, 1, limits.max_threads_per_block, "threads per block (x*y*z)");
      field = "shared_mem = " + spec.shared_mem.to_string();
      const int64_t smem = spec.shared_mem.eval_int(shapes);
      check_range(smem, 0, limits.max_shared_mem_bytes, field);
      launch.shared_mem_bytes = static_cast<uint32_t>(smem);
      for (size_t a = 0; a < spec.args.size(); ++a) {
        const LaunchArg& arg = spec.args[a];
        if (arg.type == LaunchArgType::kTensor) {
          field = "args[" + std::to_string(a) + "] = " + arg.tensor;
          if (shapes.find(arg.tensor) == shapes.end()) throw LaunchError("no shape was given for this tensor");
          const void* null = nullptr;
          launch.append(arg.type, arg.tensor, &null, sizeof(null));
        } else {
          field =
              "args[" + std::to_string(a) + "] = " + launch_arg_type_name(arg.type) + "(" + arg.value.to_string() + ")";
          pack_scalar(launch, arg, shapes, "the value");
        }
      }
      if (launch.arg_buffer_size() > limits.max_arg_bytes) {
        field = "args";
        throw LaunchError(std::to_string(launch.arg_buffer_size()) + " bytes of arguments exceed the limit of " +
                          std::to_string(limits.max_arg_bytes));
      }
      launches.push_back(std::move(launch));
    } catch (const LaunchError& e) {
      // check_range messages already start with the field; others get it here.
      const std::string msg = e.what();
      const bool names_field = msg.rfind(field, 0) == 0;
      throw LaunchError(where + (names_field ? msg : field + ": " + msg));
    }
  }
  return launches;
}

}  // namespace kforge::env
