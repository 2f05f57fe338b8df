// The typed parts of a recorded trajectory's `info` objects: TurnInfo for
// `turns[i].info` and TrajectoryInfo for the trajectory's own `info`
// (schema: docs/rollout.md, "Trajectories").
//
//   TurnInfo t{step_result.info, policy_turn, state};   // the worker, in memory
//   turn.info = to_json(t);                             // once, when the trajectory is handed to its sinks
//   TurnInfo back = turn_info_from_json(turn.info, "trajectory x: turn 3 info");  // a recorded file (forks)
//
// Why here: core's Turn and Trajectory keep `info` as JSON because core cannot
// name env::StepInfo (dependencies point cli -> rollout -> env -> reward ->
// core), and the rollout workers are the writer of these objects, so their
// types live with the writer, at the top of rollout/ where the trajectory
// sinks are. The workers fill the structs and convert each trajectory to JSON
// once, when a group completes and the trajectory leaves for its sinks (the
// JSONL file, the stream); nothing in the worker reads its own JSON back.
//
// The readers are the readers of recorded files (files of other machines and
// earlier builds, every schema version from kOldestReadableTrajectorySchemaVersion):
// a missing key reads as absent or its default, a key they do not know is
// ignored, and a key of the wrong type is an InputError naming the field
// ("<where>: field /<pointer>: ..."). For everything the worker writes,
// to_json(x_from_json(j)) == j, so a forked episode's copied turns are written
// back byte for byte (tests/rollout/trajectory_info_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/prompt.h"
#include "kforge/env/step_info.h"

namespace kforge::rollout {

// turns[i].info.policy: what the policy said about its reply.
struct PolicyTurnInfo {
  std::string version;        // the policy version that answered
  std::string finish_reason;  // "stop", "tool_calls", "length", ...
  double latency_ms = 0.0;    // the policy's own latency, else its batch's
  // As the policy returned them (a trainer's token ids and per-token
  // logprobs); absent when it returned none. A logprob that is not finite is
  // written null (JSON has no NaN) and reads back as NaN.
  std::optional<std::vector<int64_t>> token_ids;
  std::optional<std::vector<double>> logprobs;
  std::optional<json> usage;  // token counts: {"prompt_tokens", "completion_tokens", ...}
};

// turns[i].info.state: where the episode stood after the turn, what a fork
// restores (env::EpisodeResume) without replaying the turns before it.
struct TurnState {
  int turns_used = 0;
  double time_used_s = 0.0;
  int compile_errors = 0;
  double episode_return = 0.0;
  int solution_turn = -1;  // the turn whose action carried the latest solution; -1 when none did
};

struct TurnInfo {
  // The environment's step info (env/step_info.h) with its tool_call removed
  // (the turn's `action` holds it). Absent only in files of writers that did
  // not record it.
  std::optional<env::StepInfo> env;
  std::optional<PolicyTurnInfo> policy;
  std::optional<TurnState> state;
};

// info.env: the environment the episode ran in, as its reset described it.
struct EpisodeEnvInfo {
  std::string backend;
  std::string solution_mode;
  json budgets = json::object();  // {"max_turns", "time_budget_s"}
  json reward = json::object();   // {"function", "source"}
};

// info.timings, in milliseconds.
struct EpisodeTimings {
  double reset_ms = 0.0;
  double episode_ms = 0.0;
  double policy_ms = 0.0;
  double env_step_ms = 0.0;
};

// info.group: the episode's group when it completed.
struct GroupInfo {
  std::string id;
  int size = 0;
  size_t index = 0;
  json rewards = json::array();     // every member's total reward, null for members that were not written
  std::optional<double> advantage;  // absent (null) for members left out of the normalization
  std::string normalization;
  size_t members_normalized = 0;
};

// info.fork: the recorded episode a forked one continues.
struct ForkInfo {
  std::string parent;
  std::string parent_group;
  int turn = 0;
};

struct TrajectoryInfo {
  std::string run_id;
  std::optional<uint64_t> seed;  // the reset seed; a fork needs it
  uint64_t sampling_seed = 0;
  json task = nullptr;  // the TaskSpec as JSON (to_json(TaskSpec)); task_spec() reads it
  std::vector<env::Exemplar> exemplars;
  // The prompt as the episode started: its messages and tool definitions.
  std::optional<json> prompt_messages;
  json prompt_tools = json::array();
  std::optional<EpisodeEnvInfo> env;
  std::string policy;         // Policy::describe()
  std::optional<json> usage;  // token counts summed over the turns, when the policy reported any
  std::optional<std::string> policy_error;
  std::optional<std::string> truncation_reason;
  std::optional<EpisodeTimings> timings;
  std::optional<GroupInfo> group;
  std::optional<ForkInfo> fork;

  // InputError naming `where` when the trajectory carries no task or one
  // that does not read as a TaskSpec.
  TaskSpec task_spec(const std::string& where) const;
};

json to_json(const PolicyTurnInfo& p);
json to_json(const TurnState& s);
json to_json(const TurnInfo& t);
json to_json(const TrajectoryInfo& t);
json to_json(const env::Exemplar& e);  // {"speedup_eager", "note", "solution"}

// `where` names the object in errors, e.g. "trajectory r-g0-e1: turn 3 info".
TurnInfo turn_info_from_json(const json& j, const std::string& where);
TrajectoryInfo trajectory_info_from_json(const json& j, const std::string& where);

}  // namespace kforge::rollout
