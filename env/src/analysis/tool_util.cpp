#include "tool_util.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace kforge::env::internal {

std::string format_bytes(int64_t bytes) {
  if (bytes < 10 * 1024) return std::to_string(bytes) + " B";
  char buf[64];
  if (bytes < 10ll * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  }
  return buf;
}

std::string format_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", fraction * 100.0);
  std::string s = buf;
  // "50.0%" reads as more precise than the model behind it is.
  if (s.size() > 3 && s.compare(s.size() - 3, 3, ".0%") == 0) s = s.substr(0, s.size() - 3) + "%";
  return s;
}

std::string format_fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

Document args_document(const std::string& tool, const json& args) {
  return Document::from_value(args.is_null() ? json::object() : args, tool + " arguments");
}

Dims read_dims(const Field& field, int64_t max_each, int64_t max_product) {
  Dims d = {1, 1, 1};
  if (field.value().is_array()) {
    const auto items = field.as_array();
    if (items.empty() || items.size() > 3) field.fail("an integer or an array of 1 to 3 positive integers [x, y, z]");
    for (size_t i = 0; i < items.size(); ++i) d[i] = items[i].as_int_in(1, max_each);
  } else {
    if (!field.value().is_number()) field.fail("an integer or an array of 1 to 3 positive integers [x, y, z]");
    d[0] = field.as_int_in(1, max_each);
  }
  if (dims_product(d) > max_product) {
    field.fail_message("the product " + std::to_string(dims_product(d)) + " exceeds " + std::to_string(max_product));
  }
  return d;
}

int64_t dims_product(const Dims& d) { return d[0] * d[1] * d[2]; }

json dims_to_json(const Dims& d) { return json::array({d[0], d[1], d[2]}); }

std::string dims_to_string(const Dims& d) {
  if (d[1] == 1 && d[2] == 1) return std::to_string(d[0]);
  if (d[2] == 1) return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ")";
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ")";
}

std::optional<int64_t> literal_int(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
    return std::nullopt;
  }
  if (value.is_string()) {
    const std::string s = trim(value.get<std::string>());
    if (s.empty() || s.size() > 18) return std::nullopt;
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    return std::stoll(s);
  }
  return std::nullopt;
}

std::optional<Dims> literal_dims(const json& value) {
  Dims d = {1, 1, 1};
  if (value.is_array()) {
    if (value.empty() || value.size() > 3) return std::nullopt;
    for (size_t i = 0; i < value.size(); ++i) {
      auto v = literal_int(value[i]);
      if (!v || *v < 1) return std::nullopt;
      d[i] = *v;
    }
    return d;
  }
  auto v = literal_int(value);
  if (!v || *v < 1) return std::nullopt;
  d[0] = *v;
  return d;
}

namespace {

PlanLaunch read_plan_kernel(const json& k) {
  PlanLaunch p;
  if (!k.is_object()) return p;
  for (const char* key : {"name", "kernel"}) {
    if (k.contains(key) && k.at(key).is_string()) {
      p.name = k.at(key).get<std::string>();
      break;
    }
  }
  if (k.contains("lowered_name") && k.at("lowered_name").is_string()) p.lowered_name = k.at("lowered_name");
  if (k.contains("block")) {
    p.block = literal_dims(k.at("block"));
    p.block_text = k.at("block").dump();
  }
  if (k.contains("grid")) p.grid = literal_dims(k.at("grid"));
  p.shared_bytes = 0;
  for (const char* key : {"shared_mem", "shared_bytes", "dynamic_shared_bytes"}) {
    if (k.contains(key)) {
      p.shared_bytes = literal_int(k.at(key));
      p.shared_text = k.at(key).dump();
      break;
    }
  }
  return p;
}

}  // namespace

std::vector<PlanLaunch> plan_launches(const AnalysisInput& input) {
  const json* plan = nullptr;
  if (input.artifact && input.artifact->launch.is_object()) {
    plan = &input.artifact->launch;
  } else if (input.solution && input.solution->launch.is_object()) {
    plan = &input.solution->launch;
  }
  std::vector<PlanLaunch> out;
  if (!plan) return out;
  if (plan->contains("kernels") && plan->at("kernels").is_array()) {
    for (const auto& k : plan->at("kernels")) out.push_back(read_plan_kernel(k));
  } else {
    out.push_back(read_plan_kernel(*plan));
  }
  return out;
}

const PlanLaunch* find_plan_launch(const std::vector<PlanLaunch>& plan, const std::string& mangled, bool sole_kernel) {
  for (const auto& p : plan) {
    if (!p.lowered_name.empty() && p.lowered_name == mangled) return &p;
  }
  const std::string d = demangle(mangled);
  for (const auto& p : plan) {
    if (p.name.empty()) continue;
    if (p.name == mangled || p.name == d || starts_with(d, p.name + "(") || starts_with(d, "void " + p.name + "(")) {
      return &p;
    }
  }
  if (sole_kernel && plan.size() == 1) return &plan[0];
  return nullptr;
}

const Artifact& require_artifact(const AnalysisInput& input) {
  if (!input.artifact || input.artifact->path.empty()) {
    throw InputError("there is no compiled solution to analyse yet: compile one first");
  }
  std::error_code ec;
  if (!std::filesystem::exists(input.artifact->path, ec)) {
    throw SystemError("the compiled artifact " + input.artifact->path.string() + " no longer exists");
  }
  return *input.artifact;
}

std::string display_name(const std::string& mangled, size_t max_chars) {
  std::string d = demangle(mangled);
  if (d.size() > max_chars) d = d.substr(0, max_chars - 3) + "...";
  return d;
}

json kernel_parameter_schema() {
  return {{"type", "string"},
          {"description",
           "Only kernels whose name (mangled or demangled) contains this text. Default: every kernel in the "
           "binary."}};
}

bool task_is_matmul_like(const TaskSpec* task) {
  if (!task) return false;
  for (const auto& node : task->nodes) {
    const std::string& op = node.op;
    if (op == "matmul" || op == "mm" || op == "bmm" || op == "addmm" || op == "baddbmm" || op == "linear" ||
        op == "einsum" || op == "matmul_t" || starts_with(op, "conv")) {
      return true;
    }
  }
  return false;
}

bool task_uses_float64(const TaskSpec* task) {
  if (!task) return false;
  for (const auto& t : task->kernel_inputs()) {
    if (t.dtype == DType::kFloat64) return true;
  }
  return false;
}

}  // namespace kforge::env::internal
