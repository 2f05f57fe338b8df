// The work of one step, independent of scheduling: EnvPool decides when a
// step runs; StepEngine decides what it does (compile, evaluate, analyze,
// score, observe). One episode's steps never run concurrently, so an
// EpisodeState is only touched by the thread running its current step.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/action.h"
#include "kforge/core/measurement.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/analysis.h"
#include "kforge/env/compile_service.h"
#include "kforge/env/env_config.h"
#include "kforge/env/executor.h"
#include "kforge/env/observation.h"
#include "kforge/env/step_info.h"
#include "kforge/env/step_result.h"
#include "kforge/reward/reward.h"

namespace kforge::env::internal {

using Clock = std::chrono::steady_clock;

struct EpisodeState {
  int env_id = -1;
  uint64_t episode = 0;
  uint64_t seed = 0;
  TaskSpec task;
  reward::RewardContext reward_context;
  int turns = 0;              // turns used so far
  double time_used_ms = 0.0;  // environment time charged to the episode
  int compile_errors = 0;
  bool terminated = false;
  bool truncated = false;
  double episode_return = 0.0;
  // The solution of the latest action that carried a usable one.
  std::optional<Solution> last_solution;
  std::string last_solution_hash;
};

// A step as sent: the action (or why it is invalid), the solution it acts on
// and its compile, started at send time.
struct StepJob {
  uint64_t seq = 0;
  std::optional<Action> action;
  json raw_call = nullptr;  // the tool call as received, for info
  StepErrorKind error = StepErrorKind::kNone;
  std::string error_message;
  std::optional<Solution> solution;
  std::shared_future<CompileResult> compile;  // valid when a compile was started
  Clock::time_point sent;
  // Set (one of kEndReasons): no action; the caller ends the episode here by
  // the environment's truncation rule (EnvPool::end_episodes).
  std::string end_reason;
};

// What one action established about one solution, phase by phase (compile,
// then evaluate or analyze), and the time each phase waited on a service.
// Both a policy's action and a truncated episode's auto-submit go through it.
struct Attempt {
  // Absent when the compile could not be done (a system error).
  std::optional<CompileResult> compile;
  std::optional<EvalReport> eval;  // judging actions whose candidate compiled
  std::string analysis_tool;       // analyze actions whose candidate compiled
  json analysis = nullptr;
  StepErrorKind error = StepErrorKind::kNone;  // kNone or kSystem
  std::string error_message;
  double compile_wait_ms = 0.0;
  double eval_wait_ms = 0.0;
  double analysis_ms = 0.0;
  double charged_ms = 0.0;  // what it costs the episode's time budget
  double waited_ms() const { return compile_wait_ms + eval_wait_ms + analysis_ms; }
};

// One step on its way through run()'s phases.
struct StepWork {
  StepRecord rec;         // what the observation is rendered from
  bool finished = false;  // the episode had ended before this step
  bool counts_turn = false;
  Attempt attempt;       // the action's own attempt
  double wait_ms = 0.0;  // waits on services, the final evaluation's included
  reward::RewardBreakdown paid;
  std::optional<reward::RewardBreakdown> step_reward;
  std::optional<FinalEvaluation> final_evaluation;
};

// run() reads as its phases: check the step may run, act on the solution
// (compile, then evaluate or analyze), measure, settle the turn (budgets,
// truncation and its final evaluation, the reward), and describe it (info).
class StepEngine {
 public:
  StepEngine(const EnvConfig& config, CompileService& compiler, Executor& executor,
             const reward::RewardFunction& reward, const AnalysisRegistry& analysis, CompileContext context);

  // Validates `action` against the toolset's verdict and the episode's last
  // solution (send-time view), fills the job and starts its compile.
  void prepare(StepJob& job, std::optional<Solution>& last_solution, const TaskSpec& task) const;
  StepResult run(EpisodeState& episode, StepJob& job) const;
  std::shared_future<CompileResult> start_compile(const Solution& solution, const TaskSpec& task) const;

 private:
  // The phases of run().
  StepWork check(const EpisodeState& ep, const StepJob& job) const;
  Attempt act(const EpisodeState& ep, const Action& action, const Solution& solution,
              const std::shared_future<CompileResult>& compile) const;
  void record(EpisodeState& ep, StepWork& work) const;
  StepResult settle(EpisodeState& ep, const StepJob& job, StepWork& work) const;
  // Settle for a step that ends the episode on the caller's word: no turn,
  // the truncation's final evaluation.
  StepResult end(EpisodeState& ep, const StepJob& job, StepWork& work) const;
  Observation final_evaluation(EpisodeState& ep, const StepJob& job, StepWork& work) const;
  StepInfo describe(const EpisodeState& ep, const StepJob& job, const StepWork& work, const StepResult& out,
                    Clock::time_point started) const;

  // The parts of act().
  void await_compile(const std::shared_future<CompileResult>& compile, Attempt& out) const;
  void judge(const EpisodeState& ep, ActionType type, Attempt& out) const;
  void analyze(const EpisodeState& ep, const Action& action, const Solution& solution, Attempt& out) const;

  Measurement measure(const std::string& action, const EpisodeState& ep, const CompileResult* compile,
                      const EvalReport* eval) const;
  EvalReport evaluate(const TaskSpec& task, uint64_t episode_seed, const Artifact& artifact, ActionType type,
                      double* wait_ms) const;

  const EnvConfig& config_;
  CompileService& compiler_;
  Executor& executor_;
  const reward::RewardFunction& reward_;
  const AnalysisRegistry& analysis_;
  CompileContext context_;
};

}  // namespace kforge::env::internal
