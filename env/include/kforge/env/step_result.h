// What reset and step give back, typed: a step's StepInfo and a reset's
// ResetInfo are structs from the engine to the caller, and JSON only where
// bytes leave the process (the env server's reply, a trajectory file).
//
//   StepResult r = env.step(action);
//   r.reward, r.terminated, r.truncated, r.info.measurement.speedup_eager
//   json reply = to_json(r);  // {"observation", "reward", "terminated", "truncated", "info"}
//
// Why here and not in core: StepInfo is built from env and reward types
// (EvalReport, RewardBreakdown, StepErrorKind), and dependencies point
// cli -> rollout -> env -> reward -> core, so a result holding it cannot live
// in core. Core keeps the Observation (a recorded Turn holds one) and the
// recorded Turn/Trajectory, whose `info` stays JSON because core cannot name
// StepInfo; rollout/include/kforge/rollout/turn_info.h gives those typed
// readers and writers.
//
// to_json(StepResult) and to_json(ResetInfo) write the wire shape the server
// has always replied with (trainer_bridge/PROTOCOL.md): same keys, same
// values, so clients of earlier builds read them unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/core/document.h"
#include "kforge/core/step.h"
#include "kforge/env/step_info.h"

namespace kforge::env {

struct StepResult {
  Observation observation;
  double reward = 0.0;
  bool terminated = false;  // the episode ended by submit
  bool truncated = false;   // turn or time budget reached
  StepInfo info;            // what the step established (step_info.h); info.reward_components.total == reward
};

// The episode's state restored by a reset with ResetOptions::resume.
struct ResumedInfo {
  int turns_used = 0;
  double time_used_s = 0.0;
  int compile_errors = 0;
  double episode_return = 0.0;
  bool has_solution = false;
};

// What a reset established besides the prompt.
struct ResetInfo {
  int env_id = -1;
  uint64_t episode = 0;  // episode number on this env
  std::string task_id;
  uint64_t seed = 0;
  std::string backend;        // backend_name (env_config.h)
  std::string solution_mode;  // solution_mode_name: the default mode of solutions
  int max_turns = 0;          // the episode's budgets
  double time_budget_s = 0.0;
  json tools = json::array();   // the OpenAI tool definitions (tools.h)
  std::string reward_function;  // the reward function's name and where it came from
  std::string reward_source;
  std::optional<ResumedInfo> resumed;
  std::string reference_check_status;   // reference_status_name of the task's reference check
  std::string reference_check_problem;  // set when the check found a problem

  // The wire's `budgets` and `reward` objects, which the recorded trajectory
  // keeps too (info.env.budgets, info.env.reward).
  json budgets_json() const;
  json reward_json() const;
};

json to_json(const StepResult& result);
json to_json(const ResetInfo& info);

}  // namespace kforge::env
