#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "kforge/env/analysis.h"
#include "text_util.h"

namespace kforge::env {
namespace {

using internal::join;

// The environment's own actions share the policy's function namespace.
const std::vector<std::string>& reserved_names() {
  static const std::vector<std::string> kNames = {"compile", "verify", "profile", "submit", "analyze"};
  return kNames;
}

bool valid_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || !std::islower(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string mode_list(const std::vector<SolutionMode>& modes) {
  std::vector<std::string> names;
  names.reserve(modes.size());
  for (SolutionMode m : modes) names.push_back(solution_mode_name(m));
  return join(names);
}

// Cuts `text` at a line boundary to at most `max_chars`.
std::string cut_lines(const std::string& text, size_t max_chars) {
  static const std::string kMarker = "\n... (cut; every value is in the facts)";
  if (text.size() <= max_chars) return text;
  if (max_chars <= kMarker.size()) return text.substr(0, max_chars);
  const size_t budget = max_chars - kMarker.size();
  size_t end = text.rfind('\n', budget);
  if (end == std::string::npos || end == 0) end = budget;
  return text.substr(0, end) + kMarker;
}

void render(AnalysisResult& r, size_t max_chars) {
  if (!r.ok) {
    r.text = r.tool + ": " + r.error;
    if (r.text.size() > max_chars) r.text = r.text.substr(0, max_chars);
    return;
  }
  std::string hints;
  if (!r.hints.empty()) hints = "\nHints:\n- " + join(r.hints, "\n- ");
  const size_t body_budget = hints.size() + 200 < max_chars ? max_chars - hints.size() : max_chars / 2;
  std::string body = cut_lines(r.text, body_budget);
  r.text = cut_lines(body + hints, max_chars);
}

void add_builtin_tools(AnalysisRegistry& registry) {
  registry.add(make_resource_usage_tool());
  registry.add(make_sass_mix_tool());
  registry.add(make_occupancy_tool());
}

}  // namespace

std::optional<SolutionMode> AnalysisInput::mode() const {
  if (solution) return solution->mode;
  if (artifact) return artifact->mode;
  return std::nullopt;
}

json to_json(const AnalysisResult& r) {
  json j = {{"tool", r.tool}, {"ok", r.ok}, {"facts", r.facts}, {"hints", r.hints}, {"text", r.text}};
  if (!r.ok) j["error"] = r.error;
  return j;
}

AnalysisResult analysis_result_from_json(const json& j) {
  const Document doc = Document::from_value(j, "analysis result");
  ObjectReader rd = doc.root_object();
  AnalysisResult r;
  r.tool = rd.required("tool").as_string();
  r.ok = rd.required("ok").as_bool();
  if (auto f = rd.optional("facts")) {
    f->as_object();
    r.facts = f->value();
  }
  if (auto f = rd.optional("hints")) r.hints = f->as_string_list();
  if (auto f = rd.optional("text")) r.text = f->as_string();
  if (auto f = rd.optional("error")) r.error = f->as_string();
  rd.finish();
  return r;
}

bool AnalysisTool::applies_to(SolutionMode mode) const {
  const auto m = modes();
  return std::find(m.begin(), m.end(), mode) != m.end();
}

json AnalysisTool::definition() const {
  return {{"type", "function"},
          {"function", {{"name", name()}, {"description", description()}, {"parameters", parameters()}}}};
}

AnalysisRegistry& AnalysisRegistry::global() {
  // Never destroyed: plugins may register from static initializers of other
  // translation units, and tools may still run during static destruction.
  static AnalysisRegistry* registry = [] {
    auto* r = new AnalysisRegistry();
    add_builtin_tools(*r);
    return r;
  }();
  return *registry;
}

std::unique_ptr<AnalysisRegistry> AnalysisRegistry::with_builtin_tools() {
  auto r = std::make_unique<AnalysisRegistry>();
  add_builtin_tools(*r);
  return r;
}

void AnalysisRegistry::add(std::shared_ptr<const AnalysisTool> tool) {
  if (!tool) throw std::invalid_argument("AnalysisRegistry::add: null tool");
  const std::string name = tool->name();
  if (!valid_tool_name(name)) {
    throw std::invalid_argument("analysis tool name \"" + name +
                                "\" must be 1-64 characters of lower-case letters, digits and '_', starting "
                                "with a letter");
  }
  const auto& reserved = reserved_names();
  if (std::find(reserved.begin(), reserved.end(), name) != reserved.end()) {
    throw std::invalid_argument("analysis tool name \"" + name + "\" is reserved for the environment's own action");
  }
  const json params = tool->parameters();
  if (!params.is_object() || params.value("type", "") != "object" || !params.contains("properties") ||
      !params["properties"].is_object()) {
    throw std::invalid_argument("analysis tool \"" + name +
                                "\": parameters() must be a JSON schema {\"type\": \"object\", \"properties\": {...}}");
  }
  if (tool->modes().empty()) throw std::invalid_argument("analysis tool \"" + name + "\" applies to no mode");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!tools_.emplace(name, std::move(tool)).second) {
    throw std::invalid_argument("analysis tool \"" + name + "\" is already registered");
  }
}

bool AnalysisRegistry::contains(const std::string& name) const { return find(name) != nullptr; }

std::shared_ptr<const AnalysisTool> AnalysisRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second;
}

std::vector<std::string> AnalysisRegistry::names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, tool] : tools_) out.push_back(name);
  return out;
}

json AnalysisRegistry::definitions(std::optional<SolutionMode> mode) const {
  std::vector<std::shared_ptr<const AnalysisTool>> tools;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, tool] : tools_) tools.push_back(tool);
  }
  json out = json::array();
  for (const auto& t : tools) {
    if (!mode || t->applies_to(*mode)) out.push_back(t->definition());
  }
  return out;
}

AnalysisResult AnalysisRegistry::run(const std::string& name, const AnalysisInput& input) const {
  AnalysisResult result;
  result.tool = name;
  auto fail = [&](const std::string& error) {
    result.ok = false;
    result.error = error;
    result.facts = json::object();
    result.hints.clear();
    render(result, input.config.max_text_chars);
    return result;
  };
  const auto tool = find(name);
  if (!tool) {
    const auto available = names();
    const std::string guess = closest_match(name, available);
    return fail("unknown analysis tool \"" + name + "\"" + (guess.empty() ? "" : " (did you mean \"" + guess + "\"?)") +
                "; available tools: " + (available.empty() ? "none" : join(available)));
  }
  try {
    tool->validate_args(input.args);
  } catch (const InputError& e) {
    return fail(std::string("bad arguments: ") + e.what());
  }
  const auto mode = input.mode();
  if (mode && !tool->applies_to(*mode)) {
    return fail("does not apply to " + solution_mode_name(*mode) +
                " solutions (it applies to: " + mode_list(tool->modes()) + ")");
  }
  try {
    result = tool->run(input);
  } catch (const InputError& e) {
    return fail(e.what());
  } catch (const SystemError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  }
  result.tool = name;
  if (!result.ok && result.error.empty()) result.error = "the tool reported failure without a reason";
  if (!result.ok) return fail(result.error);
  render(result, input.config.max_text_chars);
  return result;
}

}  // namespace kforge::env
