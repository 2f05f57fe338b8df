#include "kforge/core/action.h"

#include <array>

namespace kforge {
namespace {

const std::array<std::pair<ActionType, const char*>, 5> kTypes = {{{ActionType::kCompile, "compile"},
                                                                   {ActionType::kVerify, "verify"},
                                                                   {ActionType::kProfile, "profile"},
                                                                   {ActionType::kSubmit, "submit"},
                                                                   {ActionType::kAnalyze, "analyze"}}};

const char* const kArgumentsLabel = "arguments";

// "arguments:1:7: invalid JSON: ..." -> "line 1:7: invalid JSON: ...";
// "arguments: field /a: ..." -> "at /a: ...".
std::string without_label(const std::string& message, const std::string& label) {
  if (message.compare(0, label.size(), label) != 0) return message;
  std::string rest = message.substr(label.size());
  if (rest.compare(0, 2, ": ") == 0) {
    rest = rest.substr(2);
    if (rest.compare(0, 6, "field ") == 0) rest = "at " + rest.substr(6);
    return rest;
  }
  if (!rest.empty() && rest[0] == ':') return "line " + rest.substr(1);
  return rest;
}

ActionType type_from_name(const std::string& name) {
  for (const auto& [t, n] : kTypes) {
    if (name == n) return t;
  }
  return ActionType::kCompile;
}

// Reads the solution fields of a tool call's arguments (all optional).
std::optional<Solution> solution_from_args(ObjectReader& r, SolutionMode default_mode, const std::string& origin) {
  auto source = r.optional("source");
  auto mode = r.optional("mode");
  auto options = r.optional("options");
  auto launch = r.optional("launch");
  if (!source) {
    if (mode || options || launch) {
      (mode      ? *mode
       : options ? *options
                 : *launch)
          .fail_message("\"source\" is required when \"mode\", \"options\" or \"launch\" is given");
    }
    return std::nullopt;
  }
  Solution s;
  s.origin = origin;
  s.mode = mode ? parse_solution_mode(*mode) : default_mode;
  s.source = source->as_string();
  if (s.source.find_first_not_of(" \t\r\n") == std::string::npos) source->fail("non-empty source code");
  if (options) s.options = options->as_string_list();
  if (launch) {
    launch->as_object();
    s.launch = launch->value();
  }
  if (s.mode == SolutionMode::kNvrtc && s.launch.is_null()) {
    r.self().fail_message("mode \"nvrtc\" needs a \"launch\" plan");
  }
  return s;
}

}  // namespace

const std::string& action_type_name(ActionType type) {
  static const std::vector<std::string> kNames = {"compile", "verify", "profile", "submit", "analyze"};
  return kNames.at(static_cast<size_t>(type));
}

const std::vector<std::string>& action_type_names() {
  static const std::vector<std::string> kNames = {"compile", "verify", "profile", "submit", "analyze"};
  return kNames;
}

Action parse_action(const Document& doc) {
  ObjectReader r = doc.root_object();
  Action a;
  a.type = type_from_name(r.required("type").as_enum(action_type_names()));
  if (auto f = r.optional("solution")) {
    ObjectReader sr = f->as_object();
    Solution s;
    s.origin = doc.source;
    s.mode = SolutionMode::kCuda;
    if (auto m = sr.optional("mode")) s.mode = parse_solution_mode(*m);
    Field src = sr.required("source");
    s.source = src.as_string();
    if (s.source.find_first_not_of(" \t\r\n") == std::string::npos) src.fail("non-empty source code");
    if (auto o = sr.optional("options")) s.options = o->as_string_list();
    if (auto l = sr.optional("launch")) {
      l->as_object();
      s.launch = l->value();
    }
    sr.finish();
    a.solution = s;
  }
  if (auto f = r.optional("tool")) a.tool = f->as_string();
  if (auto f = r.optional("args")) {
    f->as_object();
    a.tool_args = f->value();
  }
  if (a.type == ActionType::kAnalyze && a.tool.empty()) {
    r.self().fail_message("an \"analyze\" action needs \"tool\" (the analysis tool's name)");
  }
  r.finish();
  return a;
}

Action parse_tool_call(const json& call, SolutionMode default_mode) {
  Document doc = Document::from_value(call, "<tool call>");
  ObjectReader r = doc.root_object();
  // Accept both {"name", "arguments"} and the OpenAI envelope
  // {"type": "function", "function": {"name", "arguments"}, "id"}.
  if (r.has("function")) {
    r.allow("id");
    r.allow("type");
    Field fn = r.required("function");
    r.finish();
    return parse_tool_call(fn.value(), default_mode);
  }
  const std::string name = r.required("name").as_string();
  json args = json::object();
  if (auto f = r.optional("arguments")) {
    if (f->value().is_string()) {
      const std::string& text = f->value().get_ref<const std::string&>();
      if (!text.empty()) {
        // The policy's text: read with the document limits (depth, size,
        // duplicate keys) like any other outside document.
        try {
          args = Document::from_json_text(text, kArgumentsLabel).root;
        } catch (const InputError& e) {
          f->fail_message("the arguments are not valid JSON: " + without_label(e.what(), kArgumentsLabel));
        }
      }
    } else {
      args = f->value();
    }
  }
  r.allow("id");
  r.finish();
  if (!args.is_object()) {
    throw InputError("<tool call>: field /arguments: expected a JSON object, got " + describe_value(args));
  }
  Document adoc = Document::from_value(args, "<tool call " + name + " arguments>");
  ObjectReader ar = adoc.root_object();
  Action a;
  bool is_solution_action = false;
  for (const auto& [t, n] : kTypes) {
    if (name == n && t != ActionType::kAnalyze) {
      a.type = t;
      is_solution_action = true;
    }
  }
  if (is_solution_action) {
    a.solution = solution_from_args(ar, default_mode, adoc.source);
    ar.finish();
    return a;
  }
  a.type = ActionType::kAnalyze;
  if (name == "analyze") {
    a.tool = ar.required("tool").as_string();
    auto s = solution_from_args(ar, default_mode, adoc.source);
    a.solution = s;
    if (auto f = ar.optional("args")) {
      f->as_object();
      a.tool_args = f->value();
    }
    ar.finish();
    return a;
  }
  // Any other name: an analysis tool called directly; the env checks the name.
  a.tool = name;
  a.tool_args = args;
  return a;
}

json to_json(const Action& action) {
  json j = {{"type", action_type_name(action.type)}};
  if (action.solution) j["solution"] = to_json(*action.solution);
  if (!action.tool.empty()) j["tool"] = action.tool;
  if (!action.tool_args.empty()) j["args"] = action.tool_args;
  return j;
}

}  // namespace kforge
