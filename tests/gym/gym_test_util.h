// Shared fixtures of the environment tests: the test task and candidates in
// tests/gym/data, and the fast test config (small timing budgets, same checks).
#pragma once

#include <filesystem>
#include <string>

#include "kforge/core/action.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"
#include "kforge/env/step_info.h"

namespace kforge::env::testing {

inline std::filesystem::path data_dir() { return std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/gym/data"; }

inline TaskSpec test_task() { return load_task(data_dir() / "scale_bias_relu.json"); }
// The same task at 1024 x 256: a correct candidate's time there stays
// measurable when other processes load the machine (at 64 x 32 it is near the
// null call's noise and can come out as 0, i.e. no speedup), so tests that
// assert a speedup or a positive reward use it.
inline TaskSpec timed_test_task() { return load_task(data_dir() / "scale_bias_relu_timed.json"); }

inline Solution candidate(const std::string& name) {
  return load_solution(data_dir() / (name + ".cpp"), SolutionMode::kCpp);
}

// Compiled candidates are shared by every test process through one cache
// directory in the build tree: each test runs as its own process.
inline EnvConfig fast_config() {
  EnvConfig c = load_env_config((data_dir() / "fast.yaml").string());
  c.compile.cache_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/gym/compile-cache";
  return c;
}

// The step error's kind name, "" when the step had none.
inline std::string error_kind(const StepInfo& info) { return info.error ? step_error_kind_name(info.error->kind) : ""; }

inline Action make_action(ActionType type, const std::string& candidate_name = "") {
  Action a;
  a.type = type;
  if (!candidate_name.empty()) a.solution = candidate(candidate_name);
  return a;
}

}  // namespace kforge::env::testing
