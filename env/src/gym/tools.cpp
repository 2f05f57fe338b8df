#include "kforge/env/tools.h"

#include <algorithm>

namespace kforge::env {
namespace {

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> mode_names(const std::vector<SolutionMode>& modes) {
  std::vector<std::string> out;
  for (SolutionMode m : modes) out.push_back(solution_mode_name(m));
  return out;
}

json solution_properties(const std::vector<SolutionMode>& modes, SolutionMode default_mode) {
  json props = {{"source",
                 {{"type", "string"},
                  {"description",
                   "The complete source file of your solution: it must define extern \"C\" kf_forward as the ABI says. "
                   "Omit it to act on your most recent solution."}}},
                {"options",
                 {{"type", "array"},
                  {"items", {{"type", "string"}}},
                  {"description", "Extra compiler flags (checked against an allow-list). Usually not needed."}}}};
  // A single mode needs no choice; listing it would only invite mistakes.
  if (modes.size() > 1) {
    props["mode"] = {{"type", "string"},
                     {"enum", mode_names(modes)},
                     {"description", "How the source is built. Default: " + solution_mode_name(default_mode) + "."}};
  }
  if (std::find(modes.begin(), modes.end(), SolutionMode::kNvrtc) != modes.end()) {
    props["launch"] = {{"type", "object"},
                       {"description",
                        "Mode nvrtc only: how to launch your kernels, in order, e.g. {\"kernels\": [{\"name\": "
                        "\"scale<float, 4>\", \"grid\": [\"cdiv(numel(x), 256)\"], \"block\": [256], "
                        "\"shared_mem\": 0, \"args\": [\"x\", \"y\", \"i64(numel(x))\", \"f32(0.5)\"]}]}. "
                        "Expressions may use the task's tensor names."}};
  }
  return props;
}

json function_def(const std::string& name, const std::string& description, json properties,
                  std::vector<std::string> required = {}) {
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", description},
            {"parameters",
             {{"type", "object"},
              {"properties", std::move(properties)},
              {"required", required},
              {"additionalProperties", false}}}}}};
}

// The parse errors of core name pseudo-files such as "<tool call>"; the policy
// only needs what was wrong.
std::string policy_message(const std::string& what) {
  std::string msg = what;
  for (const std::string prefix : {"<tool call>: ", "<tool call "}) {
    if (msg.rfind(prefix, 0) == 0) {
      const auto pos = msg.find(">: ");
      msg = pos == std::string::npos ? msg : msg.substr(pos + 3);
      break;
    }
  }
  return msg;
}

}  // namespace

Toolset::Toolset(std::vector<SolutionMode> modes, SolutionMode default_mode, std::vector<AnalysisToolInfo> analysis)
    : modes_(std::move(modes)), default_mode_(default_mode), analysis_(std::move(analysis)) {
  const json props = solution_properties(modes_, default_mode_);
  definitions_ = json::array();
  definitions_.push_back(
      function_def("compile",
                   "Compile a solution without running it. Returns the compiler's errors, or for GPU code the "
                   "resource usage of each kernel (registers, shared memory, spills). The cheapest check.",
                   props));
  definitions_.push_back(function_def(
      "verify",
      "Compile and check correctness against the PyTorch reference on fresh random inputs for several seeds and "
      "every shape variant. On failure returns where and by how much the outputs differ.",
      props));
  definitions_.push_back(function_def(
      "profile",
      "Compile, verify, then time the solution against eager PyTorch: median time with its spread, speedup, and "
      "profiler hints. Does not end the episode.",
      props));
  definitions_.push_back(function_def(
      "submit",
      "Submit your final solution: evaluated like profile, and the episode ends. Your reward is computed from this "
      "evaluation (correctness first, then speedup).",
      props));
  // Analysis tools are offered under their own names with their own argument
  // schemas; a call acts on the most recent solution. The generic "analyze"
  // call ({"tool", "source", "args"}) is accepted too but not advertised, so
  // the policy sees one way to do each thing.
  for (const auto& t : analysis_) {
    definitions_.push_back(
        {{"type", "function"},
         {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
  }
}

std::vector<std::string> Toolset::names() const {
  std::vector<std::string> out;
  for (const auto& d : definitions_) out.push_back(d["function"]["name"].get<std::string>());
  return out;
}

Action Toolset::decode(const json& call) const {
  json value = call;
  // A trainer may hand over the model's raw text for the call.
  if (value.is_string()) {
    // Bounded like every document (depth, size, duplicate keys): the text
    // is the policy's.
    try {
      value = Document::from_json_text(value.get_ref<const std::string&>(), "tool call").root;
    } catch (const InputError& e) {
      std::string why = e.what();
      if (why.rfind("tool call", 0) == 0) why = why.substr(9);
      if (!why.empty() && why[0] == ':') why = why.substr(why[1] == ' ' ? 2 : 1);
      throw InputError("the tool call is not valid JSON (" + why + "); call one of the tools (" + join(names()) +
                       ") with JSON arguments");
    }
  }
  if (!value.is_object()) {
    throw InputError("a tool call must be a JSON object {\"name\": ..., \"arguments\": {...}}, got " +
                     describe_value(value));
  }
  Action action;
  try {
    action = parse_tool_call(value, default_mode_);
  } catch (const InputError& e) {
    throw InputError(policy_message(e.what()));
  }
  if (std::string why = check(action); !why.empty()) throw InputError(why);
  return action;
}

std::string Toolset::check(const Action& action) const {
  if (action.solution && std::find(modes_.begin(), modes_.end(), action.solution->mode) == modes_.end()) {
    return "mode \"" + solution_mode_name(action.solution->mode) + "\" is not available on this backend; use " +
           join(mode_names(modes_), " or ");
  }
  if (action.type != ActionType::kAnalyze) return "";
  for (const auto& t : analysis_) {
    if (t.name == action.tool) return "";
  }
  const std::string hint = closest_match(action.tool, names());
  std::string msg = "unknown tool \"" + action.tool + "\"";
  if (!hint.empty()) msg += " (did you mean \"" + hint + "\"?)";
  msg += "; the tools are " + join(names());
  return msg;
}

}  // namespace kforge::env
