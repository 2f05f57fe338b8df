// The first observation of an episode: a complete prompt (docs/architecture.md#environment).
//
// The user message holds, in order: the task as KernelBench-format PyTorch,
// the candidate ABI (kforge/kernel_abi.h verbatim plus this task's table of
// kernel inputs and outputs with shapes and dtypes, and the shape variants a
// solution must also handle), earlier solutions with their speedups when
// given (contrastive setups), the tools, the budgets, and the optimization
// guide ("skills").
#pragma once

#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/core/step.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"
#include "kforge/env/tools.h"

namespace kforge::env {

// An earlier solution of the task, shown to the policy with its measured
// speedup; contrastive rewards compare against the best of them.
struct Exemplar {
  Solution solution;
  double speedup_eager = 0.0;
  std::string note;  // optional, e.g. "policy v12, turn 3"
};

struct PromptInputs {
  const TaskSpec* task = nullptr;
  const EnvConfig* config = nullptr;
  const Toolset* tools = nullptr;
  std::string abi_header;  // text of kforge/kernel_abi.h
  std::string skills;      // markdown guide; empty: no guide section
  std::string system;      // system message; empty: the built-in one
  std::vector<Exemplar> exemplars;
};

struct Prompt {
  std::string system;
  std::string user;
  // [{"role": "system", "content"}, {"role": "user", "content"}]
  json messages = json::array();
  // The per-task ABI table: {"inputs": [{"index", "name", "shape", "dtype",
  // "kind": "input"|"param"}], "outputs": [{"index", "name", "shape", "dtype"}],
  // "shape_variants": [{"inputs": {name: shape}, "outputs": [shape...]}]}.
  json abi = json::object();
};

// InputError when the task does not type-check (infer_outputs).
Prompt build_prompt(const PromptInputs& in);

// The ABI table of a task (see Prompt::abi) and its markdown rendering.
json abi_table(const TaskSpec& task);
std::string render_abi_table(const json& table);

// The built-in system message for a backend.
std::string default_system_message(BackendKind backend);

// The first Observation: text is the user message; data holds "messages",
// "tools" (OpenAI definitions), "task", "abi" and "budgets".
Observation prompt_observation(const Prompt& prompt, const PromptInputs& in);

}  // namespace kforge::env
