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
#include "kforge/core/step.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/analysis.h"
#include "kforge/env/compile_service.h"
#include "kforge/env/env_config.h"
#include "kforge/env/executor.h"
#include "kforge/env/observation.h"
#include "kforge/reward/reward.h"

namespace kforge::env::internal {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b);

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
};

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
