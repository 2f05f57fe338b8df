// Trajectory files from real episodes for the replay tests: tool calls
// played through kforge::env::Env on the CPU backend (real compiles, real
// judge and runner), recorded the way a rollout worker records them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env.h"

namespace kforge::rollout::testing {

inline std::filesystem::path source_dir() { return KFORGE_SOURCE_DIR; }
inline std::filesystem::path rollout_data() { return source_dir() / "tests/rollout/replay/data"; }
inline std::filesystem::path gym_data() { return source_dir() / "tests/gym/data"; }

// The tests/gym fast config (same checks, short timing phases, 4 turns) with
// the compile cache the other suites share.
env::EnvConfig fast_config();

// {"name", "arguments": "<json text>"}.
json tool_call(const std::string& name, const json& arguments);
// {"source": <file's text>} for a tool call's arguments.
json source_args(const std::filesystem::path& file);

struct EpisodeTags {
  std::string id;
  std::string group_id;
  std::string policy_version;
  bool with_env_info = true;  // each turn's info.env = the step's info
  bool carry_task = false;    // info.task = the task
};

// Plays `calls` (stopping when the episode ends) and returns the trajectory
// JSON (core/trajectory.h plus, with `with_env_info`, turn info as the
// rollout recorder writes it).
json record_episode(env::Env& env, const TaskSpec& task, uint64_t seed, const std::vector<json>& calls,
                    const EpisodeTags& tags);

// The shared file of recorded episodes (recorded once per build of the test
// binary, under a lock so parallel test processes share it):
//   ep-a  affine_relu6_small, v1: compile naive, verify (no source), submit fast   -> correct
//   ep-b  affine_relu6_small, v1: submit wrong                                     -> wrong
//   ep-c  affine_relu6_small, v2: verify naive x4, truncated, auto-submitted       -> correct
//   ep-d  scale_bias_relu_timed (task carried), v2: malformed call, submit correct -> correct
//   ep-e  affine_relu6_small, v2: the policy failed before the first turn          -> policy_error
std::filesystem::path recorded_episodes_file();

}  // namespace kforge::rollout::testing
