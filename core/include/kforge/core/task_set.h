// A task set: the tasks an env server, a rollout worker or a batch evaluation
// samples from.
#pragma once

#include <filesystem>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge {

// Reads a task set: a .jsonl file (one task per line, e.g. the output of
// `kforge synth`), a single task file (.json/.yaml), or a directory holding
// task files and/or sub-directories with a task.json (the examples/ layout).
// Every task is checked as `task check` does (validate_task: every variant
// typed, within the limits of input_limits.h). InputError naming the file and
// line for a bad task or a duplicate id.
std::vector<TaskSpec> load_task_set(const std::filesystem::path& path);

}  // namespace kforge
