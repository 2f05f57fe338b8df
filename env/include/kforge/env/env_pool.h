// EnvPool: many episodes of the kernel environment in flight at once
// (docs/architecture.md#environment), in the style of EnvPool's async API.
//
//   EnvPool pool(config, 32);
//   auto [obs, info] = pool.reset(3, task, seed);
//   pool.send({action}, {3});              // returns at once
//   for (auto& r : pool.recv(1)) ...       // {env_id, StepResult}
//
// Each env_id holds one episode at a time. send() resolves each action's
// solution and submits its compile to the CompileService at once, so compiles
// of all queued steps overlap with the (serialized, one device) evaluations
// of others. Steps of one episode run one after another, in send order, and
// their results come out of recv() in that order; results of different
// episodes interleave in completion order. Every step sent is returned by
// recv() exactly once.
//
// Errors: programming errors of the caller throw InputError and change
// nothing (an unknown env_id, a step for an env that was never reset or whose
// episode has finished, a reset while the env still has steps not received,
// mismatched argument lengths). What the policy got wrong is an observation,
// counted as a turn: a malformed tool call, an unknown tool, a mode the
// backend lacks, an action without a solution when the episode has none yet.
// A step queued behind the one that ended its episode returns an
// "episode_finished" error result (no turn, reward 0).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kforge/core/action.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/compile_service.h"
#include "kforge/env/env_config.h"
#include "kforge/env/executor.h"
#include "kforge/env/prompt.h"
#include "kforge/env/step_result.h"
#include "kforge/env/tools.h"

namespace kforge::reward {
class RewardFunction;
}

namespace kforge::env {

// What the reward needs measured, set on the eval options: the profile stage
// and an energy window where a term pays for what only they measure, and with
// eval.stop_when_decided the speedup's decision targets (sample_stats.h).
// EnvPool applies it to its config; a benchmark that builds requests by hand
// applies it to measure what an environment would.
void fit_eval_to_reward(const reward::RewardFunction& reward, EvalOptions* eval);

// Where an episode stood after one of its turns: what a fork restores so that
// new episodes continue from a recorded turn without replaying the turns
// before it (best-of-n from an intermediate state, tree search). Together with
// the task, the seed and the exemplars of the original reset, it is the whole
// state the environment keeps for an episode; the policy's side (the chat so
// far) is the caller's. Step infos carry it (StepInfo::budget, and the solution
// is the latest one an action supplied).
struct EpisodeResume {
  int turns_used = 0;           // turns counted so far (StepInfo::budget.turns_used)
  double time_used_s = 0.0;     // environment time charged (StepInfo::budget.time_used_s)
  int compile_errors = 0;       // compiles that failed so far (StepInfo::budget.compile_errors)
  double episode_return = 0.0;  // rewards paid so far (StepInfo::episode_return)
  // The episode's most recent solution, which actions without a source act on
  // and truncation auto-submits.
  std::optional<Solution> last_solution;
};

struct ResetOptions {
  // Earlier solutions shown in the prompt; their speedups feed contrastive
  // rewards (RewardContext::exemplar_speedups).
  std::vector<Exemplar> exemplars;
  // Continue a recorded episode after one of its turns instead of starting at
  // turn 0 (same task, seed and exemplars as the original). InputError when
  // nothing is left of the budget (turns_used >= max_turns, or the time budget
  // spent) or a field is out of range.
  std::optional<EpisodeResume> resume;
  // The task's reference check, when the caller already holds it
  // (Executor::check_task of this pool's executor, e.g. awaited without
  // blocking, as the env server does); left empty, reset asks for it and waits.
  std::shared_future<ReferenceReport> reference_check;
};

struct ResetResult {
  Observation observation;  // the complete prompt (prompt.h)
  // ResetInfo::resumed is set after a reset with ResetOptions::resume.
  ResetInfo info;
};

struct EnvStep {
  int env_id = -1;
  StepResult result;
};

// Services an EnvPool runs on. Left null, the pool creates its own from the
// config; shared ones let several pools (or a pool and a benchmark) use one
// compile cache and one device queue.
struct EnvServices {
  std::shared_ptr<CompileService> compiler;
  std::shared_ptr<Executor> executor;
};

// Why a caller ends an episode (EnvPool::end_episodes): the policy stopped
// calling tools, the trainer's context (response length) ran out, or the
// trainer's own turn limit was reached.
inline const std::vector<std::string> kEndReasons = {"policy_stopped", "context_length", "turn_limit"};

class EnvPool {
 public:
  EnvPool(EnvConfig config, int num_envs, EnvServices services = {});
  // Drops steps that have not started and waits for running ones.
  ~EnvPool();
  EnvPool(const EnvPool&) = delete;
  EnvPool& operator=(const EnvPool&) = delete;

  int size() const;
  const EnvConfig& config() const;
  const Toolset& tools() const;

  // Starts a new episode on `env_id`. InputError when the task does not
  // type-check, when its reference check on the judge finds it invalid
  // (Executor::check_task: NaN/Inf or a near-constant output, naming the
  // node; one reference run per distinct task, cached), and for the caller
  // errors listed above.
  ResetResult reset(int env_id, const TaskSpec& task, uint64_t seed = 0, const ResetOptions& options = {});

  // Queues one step per (action, env_id) pair and returns at once.
  void send(const std::vector<Action>& actions, const std::vector<int>& env_ids);
  // The same for raw tool calls from the policy (tools.h); malformed calls
  // become error observations.
  void send_tool_calls(const std::vector<json>& calls, const std::vector<int>& env_ids);

  // Ends each env's episode where it stands, by the environment's own
  // truncation rule (reward.on_truncation): its latest solution is evaluated
  // as its submission, or, with none, it pays a failed submission; the turns
  // left are paid as idle turns (their reward.step_terms), so ending early
  // pays exactly what running out of turns would. For
  // callers whose own limits cut an episode (a trainer's context length or
  // turn limit, a policy that stopped calling tools), so that stopping never
  // pays better than trying. Queued like a step, returned by recv(): not a
  // turn, `truncated`, info.truncation_reason = `reason` (one of
  // kEndReasons), info.action "end". Ending an episode that has finished is
  // the usual InputError.
  void end_episodes(const std::vector<int>& env_ids, const std::string& reason);

  // Waits until `min_count` results are ready (fewer if fewer steps are in
  // flight, or when `timeout` passes) and returns the ready ones, at most
  // `max_count`, in completion order.
  std::vector<EnvStep> recv(size_t min_count = 1, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                            size_t max_count = SIZE_MAX);

  // Steps sent and not yet returned by recv().
  size_t pending() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::env
