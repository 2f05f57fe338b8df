// Step observations (docs/architecture.md#environment): short, actionable text for the policy plus
// the same facts as JSON, built from what one step established.
//
// Observation::data of a step:
//   {"type": "step", "action", "turn", "turns_left", "status",
//    "error": {"kind", "message"}                      (invalid action etc.)
//    "solution": {"mode", "hash"},
//    "compile": {"ok", "rejected", "cache_hit", "ms", "diagnostics", "resources"},
//    "outcome", "summary",
//    "correctness": {"checks", "passed", "failures": [...], "worst": {...}},
//    "crash": {"reason", "output"},
//    "timing": {"candidate": {median_ms, p25_ms, p75_ms, ...}, "reference": {...},
//               "speedup_eager", "speedup_compile"},
//    "violations": [{"check", "detail"}], "hints": [...], "profile": {...},
//    "analysis": {"tool", "result"}, "episode": {"terminated", "truncated", "reason"}}
// Keys whose facts a step did not produce are absent.
#pragma once

#include <optional>
#include <string>

#include "kforge/core/document.h"
#include "kforge/core/measurement.h"
#include "kforge/core/step.h"
#include "kforge/env/compiler.h"
#include "kforge/env/eval.h"

namespace kforge::env {

// Why a step could not do what was asked. Every kind but kSystem is counted
// as a turn: the policy asked for something invalid and is told so.
enum class StepErrorKind {
  kNone,
  kInvalidAction,    // malformed tool call, unknown tool, mode not available, ...
  kNoSolution,       // no solution given and none earlier in the episode
  kEpisodeFinished,  // queued behind the step that ended the episode (not a turn)
  kSystem,           // the environment failed (not the candidate's fault; not a turn)
};
const std::string& step_error_kind_name(StepErrorKind kind);

// Everything one step established; the input of observation rendering.
struct StepRecord {
  std::string action;  // compile | verify | profile | submit | analyze | invalid | end
  int turn = 0;        // 0-based index of this step in the episode
  int max_turns = 0;
  StepErrorKind error = StepErrorKind::kNone;
  std::string error_message;
  std::string solution_mode;
  std::string solution_hash;
  std::optional<CompileResult> compile;
  std::optional<EvalReport> eval;
  Measurement measurement;
  std::string analysis_tool;
  json analysis = nullptr;  // the analysis tool's result
  bool terminated = false;
  bool truncated = false;
  std::string truncation_reason;  // "max_turns" | "time_budget" | an EnvPool::end_episodes reason
};

Observation step_observation(const StepRecord& record);

// Text appended to the truncating step's observation when the episode's last
// solution was scored as its submission (auto-submit), or when it was not.
std::string truncation_note(const StepRecord& final_eval, bool auto_submitted);

// Short one-line verdict of a measurement, e.g. "correct, 2.31x vs eager".
std::string verdict_line(const Measurement& m);

}  // namespace kforge::env
