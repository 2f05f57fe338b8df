// The environment's actions as OpenAI-style tool definitions (docs/architecture.md#environment),
// and the decoding of a policy's tool calls into Actions.
//
// An LLM's malformed call is not an exception for the caller: decode() throws
// InputError with a message written for the policy, and the environment turns
// it into an error observation (see env_pool.h).
#pragma once

#include <string>
#include <vector>

#include "kforge/core/action.h"
#include "kforge/core/document.h"
#include "kforge/core/solution.h"

namespace kforge::env {

// An analysis tool as offered to the policy (from the AnalysisRegistry,
// analysis.h): a function of its own name whose call acts on the episode's
// most recent solution.
struct AnalysisToolInfo {
  std::string name;
  std::string description;
  // JSON schema of the tool's own arguments ({"type": "object", ...}).
  json parameters = {{"type", "object"}, {"properties", json::object()}};
};

class Toolset {
 public:
  // `modes`: the solution modes the backend compiles (the first is not
  // special; `default_mode` is what a call without "mode" means).
  Toolset(std::vector<SolutionMode> modes, SolutionMode default_mode, std::vector<AnalysisToolInfo> analysis = {});

  // [{"type": "function", "function": {"name", "description", "parameters"}}]:
  // what a trainer passes to its chat template.
  const json& definitions() const { return definitions_; }
  // compile, verify, profile, submit, then the analysis tools.
  std::vector<std::string> names() const;
  const std::vector<SolutionMode>& modes() const { return modes_; }
  SolutionMode default_mode() const { return default_mode_; }
  const std::vector<AnalysisToolInfo>& analysis_tools() const { return analysis_; }

  // A tool call ({"name", "arguments"} or the OpenAI envelope) -> Action.
  // InputError, phrased for the policy, when the call is malformed or names
  // something this toolset does not offer.
  Action decode(const json& call) const;
  // "" when `action` is something this toolset offers, else why not (for the
  // policy): an unavailable mode, an unknown analysis tool.
  std::string check(const Action& action) const;

 private:
  std::vector<SolutionMode> modes_;
  SolutionMode default_mode_;
  std::vector<AnalysisToolInfo> analysis_;
  json definitions_;
};

}  // namespace kforge::env
