// Shared fixtures of the rollout tests: the task set in
// tests/rollout/data/tasks (small shapes) and the environment configs in
// tests/rollout/data (production checks).
#pragma once

#include <filesystem>
#include <string>

#include "kforge/core/task_set.h"
#include "kforge/env/env_config.h"

namespace kforge::rollout::testing {

inline std::filesystem::path data_dir() { return std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/rollout/data"; }

// The test task set: a directory of task files (load_task_set).
inline std::filesystem::path tasks_dir() { return data_dir() / "tasks"; }

// Tasks only the template tests judge, kept out of the rollout set (which
// bench_rollout draws from too, so that its figures stay comparable).
inline std::filesystem::path template_tasks_dir() { return data_dir() / "template_tasks"; }

// A task of the rollout set, else of the template tests' own.
inline TaskSpec task(const std::string& name) {
  const std::filesystem::path in_set = tasks_dir() / (name + ".json");
  return load_task(std::filesystem::exists(in_set) ? in_set : template_tasks_dir() / (name + ".json"));
}

// Production verification (5 seeds, every shape variant, determinism) with
// short timing phases; compiled candidates shared through the build tree's
// cache, as the other CPU suites do.
inline env::EnvConfig test_env_config() {
  env::EnvConfig c = env::load_env_config((data_dir() / "env.yaml").string());
  c.compile.cache_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/gym/compile-cache";
  return c;
}

}  // namespace kforge::rollout::testing
