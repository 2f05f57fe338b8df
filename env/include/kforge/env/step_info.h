// StepInfo: everything a step established besides its observation, as the
// step engine (env/src/gym/step_engine.cpp) produces it and StepResult::info
// (step_result.h) carries it to the caller, typed. Its JSON form is written
// only where it leaves the process: the `info` of the env server's step reply
// (to Python trainers, whose kforge.StepInfo mirrors this struct), the
// `turns[].info.env` of every recorded trajectory (docs/rollout.md), which
// replay and forks read back. This struct is that schema's source of truth:
// C++ code reads its fields, never keys of `info`.
//
//   const StepInfo& info = result.info;
//   if (info.error && info.error->kind == StepErrorKind::kSystem) ...;
//   use(info.measurement.speedup_eager, info.timings.step_ms, info.budget.turns_used);
//
// to_json writes every field (the optional ones only when present) and
// step_info_from_json reads what to_json wrote back into an equal struct, so
// to_json(step_info_from_json(j)) == j for every info the engine writes. The
// reader is also the reader of recorded files (other machines, older
// builds): a missing key reads as its default, a key it does not know is
// ignored, and a key of the wrong type is an InputError naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/core/document.h"
#include "kforge/core/measurement.h"
#include "kforge/env/eval.h"
#include "kforge/env/observation.h"
#include "kforge/reward/reward.h"

namespace kforge::env {

// Why the step could not do what was asked (observation.h); JSON
// {"kind": step_error_kind_name, "message"}, or null when there is none.
struct StepError {
  StepErrorKind kind = StepErrorKind::kSystem;
  std::string message;
};

// Where the step's time went, in milliseconds.
struct StepTimings {
  double queue_ms = 0.0;              // from send to the start of the step
  double compile_ms = 0.0;            // as the compile service reported it
  double compile_wait_ms = 0.0;       // waiting on the compile
  double eval_ms = 0.0;               // waiting on the executor
  json eval_phases = json::object();  // the judge's own phases ("verify", "time", ...)
  double analysis_ms = 0.0;
  double step_ms = 0.0;     // the step's wall time
  double env_ms = 0.0;      // step_ms minus the waits on services: the environment's own time
  double charged_ms = 0.0;  // charged against the episode's time budget
};

// The episode's budgets after the step.
struct StepBudget {
  int turns_used = 0;
  int max_turns = 0;
  double time_used_s = 0.0;
  double time_budget_s = 0.0;
  int compile_errors = 0;
};

// A truncated episode's final evaluation: its most recent solution scored as
// if submitted (reward.on_truncation: auto_submit), or the value of a failed
// submission (`fail`, or no solution).
struct FinalEvaluation {
  bool auto_submitted = false;
  Measurement measurement;  // what the final reward was computed from
  // Present when the solution was evaluated anew (not reusing the step's own
  // evaluation): the evaluation's wall time and the judge's report, when the
  // judge ran.
  std::optional<double> eval_ms;
  std::optional<EvalReport> eval_report;
  // The environment could not do the evaluation: not scored (reward 0).
  std::optional<std::string> system_error;
};

struct StepInfo {
  int env_id = -1;
  uint64_t episode = 0;  // episode number on this env
  std::string task_id;
  uint64_t seed = 0;          // the reset seed
  int turn = 0;               // 0-based index of the step in the episode
  std::string action;         // compile | verify | profile | submit | analyze | invalid | end (EnvPool::end_episodes)
  bool counted_turn = false;  // system errors and steps after the end are not turns
  bool final = false;         // the episode ended with this step
  // What the step paid (its `total` is StepResult::reward) and the reward
  // function's full breakdown of the step's own measurement, paid or not
  // (absent, written {}, when the step was not a turn).
  reward::RewardBreakdown reward_components;
  std::optional<reward::RewardBreakdown> step_reward;
  Measurement measurement;
  StepTimings timings;
  bool cache_hit = false;
  std::string solution_hash;  // of the compiled artifact; "" when nothing compiled
  double episode_return = 0.0;
  StepBudget budget;
  std::optional<StepError> error;
  // The tool call as received when its JSON text is at most 4 KiB, else
  // `tool_call_preview` ({name, name_bytes, arguments, arguments_bytes} or
  // {text, text_bytes} or {type}); null when absent.
  json tool_call = nullptr;
  json tool_call_preview = nullptr;
  std::optional<EvalReport> eval_report;            // the judge's report, when it ran
  std::optional<FinalEvaluation> final_evaluation;  // truncated episodes
  std::string
      truncation_reason;  // max_turns | time_budget | an end_episodes reason when this step truncated; "" otherwise

  bool system_error() const { return error && error->kind == StepErrorKind::kSystem; }
  // The measurement the episode's verdict is about: a truncated episode's
  // final evaluation, else the step's own.
  const Measurement& scored_measurement() const {
    return final_evaluation ? final_evaluation->measurement : measurement;
  }
};

json to_json(const StepInfo& info);
json to_json(const StepTimings& timings);
json to_json(const FinalEvaluation& final_evaluation);
// InputError "<where>: field /<pointer>: ..." for a value of the wrong type.
StepInfo step_info_from_json(const json& j, const std::string& where = "<step info>");
// The same for a step info inside a larger document (a recorded turn's
// info.env), its errors naming the field's place in that document.
StepInfo step_info_from(const Field& f);

// What a step's verdict is called, wherever one is shown (kforge eval's
// report, eval-batch rows and their tally): "error: <kind>" when the step
// failed, else the scored measurement's outcome name ("correct", "wrong",
// ...), so a truncated episode is judged on its final evaluation.
std::string step_verdict(const StepInfo& info);

}  // namespace kforge::env
