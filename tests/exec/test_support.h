// Helpers for the execution tests: candidates compiled with the system g++
// (cached by content under the build tree, so each test process compiles a
// source at most once), small tasks, quick evaluation options, and process
// and descriptor accounting for the leak checks.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/task_spec.h"
#include "kforge/env/compiler.h"
#include "kforge/env/eval.h"

namespace kforge::testing {

// Builds `source` (C++ with kforge/kernel_abi.h on the include path) into a
// shared object; `flags` are extra g++ flags. Fails the current test (and
// throws) if g++ fails.
std::filesystem::path compile_candidate(const std::string& source, const std::vector<std::string>& flags = {});
env::Artifact artifact_for(const std::filesystem::path& so);

TaskSpec task_from_json(const std::string& json_text);
// out = relu(x * y + z) over float32 vectors of `n`, optionally with shape variants.
TaskSpec elementwise_chain_task(int64_t n, const std::vector<int64_t>& variant_sizes = {});

// Verification and timing budgets small enough for tests; the checks are the
// production ones.
env::EvalOptions quick_options();

int open_fd_count();                           // of this process
std::vector<pid_t> children_of(pid_t parent);  // direct children, from /proc/*/stat
// Processes whose command line mentions `needle` (e.g. a private scratch dir).
std::vector<pid_t> processes_mentioning(const std::string& needle);

}  // namespace kforge::testing
