// Recorded trajectories as replay reads them: JSON Lines files written by the
// rollout workers' JSONL sink or by the trajectory receiver (`kforge receive
// --out`), one trajectory (core/trajectory.h) per line.
//
// Trajectories are outside input here (files from another machine, another
// version, a crashed writer), so reading is defensive: each line is read on
// its own, a line that is not a trajectory is a problem reported with its file
// and line (the rest of the file is still read), keys this build does not know
// are ignored, and a schema version newer than this build's is refused by
// line, never misread. A trajectory wrapped in an envelope ({"trajectory":
// {...}, ...}) is unwrapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/env/step_info.h"

namespace kforge::rollout::replay {

struct RecordedTurn {
  int index = 0;  // position in the trajectory
  // The environment's turn counter for this step (observation "turn"); the
  // reward of a re-evaluated submit is computed at this turn.
  int env_turn = 0;
  // compile | verify | profile | submit | analyze | invalid; "" when unknown.
  std::string action;
  // The solution the step acted on: the action's own, or the episode's most
  // recent one when the action named none (`solution_inherited`).
  std::optional<Solution> solution;
  bool solution_inherited = false;
  // The environment's step info (turns[i].info.env, env/step_info.h) when
  // the trajectory recorded it and it reads as one; absent otherwise (older
  // writers, recorders that keep only the observation).
  std::optional<env::StepInfo> step;
  // What replay asks of every turn, from `step` when there is one, else from
  // the observation's data: an outcome name of core/measurement.h
  // ("correct", "wrong", "compile_error", ...) or "" when nothing was judged,
  // the speedup vs eager PyTorch when timed, the violated checks' names, and
  // the step error's kind (invalid_action | no_solution | system | ...; ""
  // for none).
  std::string outcome;
  std::optional<double> speedup;
  std::vector<std::string> violations;
  std::string error_kind;
  double reward = 0.0;
  json reward_components = json::object();
};

struct RecordedEpisode {
  std::string file;
  size_t line = 0;
  int schema_version = 0;
  std::string id;
  std::string group_id;
  std::string task_id;
  std::string policy_version;  // at the start ("" when untagged)
  std::string policy_version_end;
  bool terminated = false;
  bool truncated = false;
  std::string truncation_reason;  // max_turns | time_budget | policy_error | ...
  double total_reward = 0.0;
  std::optional<uint64_t> seed;           // the reset seed, when recorded
  json task = nullptr;                    // the TaskSpec JSON, when the trajectory carries it
  std::string policy_error;               // the policy could not answer (no penalty)
  std::vector<double> exemplar_speedups;  // contrastive prompts' exemplars
  // What the recorder says the environment was (info.env): "cpu"/"cuda" and
  // the reward function's name; "" when not recorded.
  std::string recorded_backend;
  std::string recorded_reward;
  std::vector<RecordedTurn> turns;
  // A truncated episode's final evaluation ({"auto_submitted", "verdict",
  // "measurement"}, from the last observation); null otherwise.
  json truncation_final = nullptr;

  // Derived from the turns (see derive() in the .cpp): how the episode ended.
  std::string final_outcome;            // outcome of the evaluation that ended it; "" if none
  std::optional<double> final_speedup;  // when that evaluation was timed
  bool success = false;                 // final outcome correct, no violation
  // Why it did not succeed: an outcome name, "violation:<check>",
  // "policy_error", "system_error", "no_solution" (nothing was ever
  // evaluated), "no_turns"; "" on success.
  std::string failure_cause;
  int turns_used = 0;  // turns that counted (system errors do not)
  // The turn whose solution the episode's verdict is about (the submit, or
  // the auto-submitted last solution of a truncated episode); -1 if none.
  int final_turn = -1;
};

struct ReadProblem {
  std::string file;
  size_t line = 0;  // 0: the file as a whole
  std::string message;
};

struct RecordedSet {
  std::vector<RecordedEpisode> episodes;
  std::vector<ReadProblem> problems;
  size_t files = 0;
  size_t lines = 0;  // non-blank lines seen
};

// Reads every file (a .jsonl file, or a directory: its *.jsonl files, sorted).
// Never throws for content; an unreadable or missing path is a problem.
RecordedSet read_trajectory_files(const std::vector<std::filesystem::path>& paths);

// One trajectory's JSON. InputError (naming the field) when it is not one.
RecordedEpisode episode_from_json(const json& trajectory, const std::string& file = "<trajectory>", size_t line = 0);

// The highest trajectory schema version this build reads.
int max_readable_schema_version();

}  // namespace kforge::rollout::replay
