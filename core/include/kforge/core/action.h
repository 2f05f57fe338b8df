// What the policy asks the environment to do in one step (docs/architecture.md#environment).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"

namespace kforge {

enum class ActionType {
  kCompile,  // build only: diagnostics and resource usage
  kVerify,   // build + correctness on every seed and shape variant
  kProfile,  // build + verify + timing against the reference, hints
  kSubmit,   // like profile, and ends the episode (terminated)
  kAnalyze,  // run an analysis tool on the last (or given) solution
};

const std::string& action_type_name(ActionType type);
const std::vector<std::string>& action_type_names();

struct Action {
  ActionType type = ActionType::kCompile;
  // Absent: act on the most recent solution of the episode.
  std::optional<Solution> solution;
  std::string tool;  // kAnalyze: the analysis tool's name
  json tool_args = json::object();
};

// {"type": "profile", "solution": {...}, "tool": "...", "args": {...}}
Action parse_action(const Document& doc);
// An OpenAI-style tool call: {"name": "profile", "arguments": "<json>" | {...}}.
// The arguments of compile/verify/profile/submit are a solution
// ({"source", "mode", "options", "launch"}, all optional: no source means the
// last solution); any other name is an analysis tool called with `arguments`.
Action parse_tool_call(const json& call, SolutionMode default_mode);
json to_json(const Action& action);

}  // namespace kforge
