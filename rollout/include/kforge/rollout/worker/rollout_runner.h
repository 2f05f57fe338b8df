// Rollout workers (docs/architecture.md#rollouts): episodes of the environment driven by a
// policy, recorded as trajectories and handed to sinks group by group.
//
//   RolloutConfig config = load_rollout_config("configs/rollout.yaml");
//   auto policy = make_policy(config.policy);
//   JsonlTrajectorySink sink("trajectories.jsonl");
//   RolloutRunner runner(config, policy, {&sink});
//   RolloutStats stats = runner.run();
//
// How a run goes:
//   * Tasks are drawn from the task set (in order, or shuffled with the
//     seed); each draw is a group of `group_size` episodes of that task, each
//     with its own seed (so its own verification inputs, eval.h) and, with
//     `exemplars`, the same contrastive prompt: the best earlier correct
//     solutions of the task with their measured speedups (CUDA-L1).
//   * Up to `concurrency` episodes are in flight on one EnvPool. All episodes
//     waiting for the policy are asked in one batch while the environment
//     keeps compiling and judging the others.
//   * A reply's first tool call is the turn's action (OpenAI tool calls map
//     onto the env's tools); a reply without one is sent as text and comes
//     back as an invalid-action observation (a turn used). Episodes end by
//     submit, by the environment's budgets (turns, environment time: then
//     truncated and auto-submitted), by `wall_time_s`, or when the policy
//     could not answer (PolicyReply::error): truncated, `policy_error`, and
//     left out of the group's normalization — never scored as the policy's
//     failure.
//   * Staleness: the policy versions that replies carry are compared as
//     integers when they are (trainer steps), else as "changed or not"; an
//     episode that started more than `max_policy_lag` versions behind the
//     newest seen when it finishes is dropped and its slot re-queued (at most
//     3 times; then the group completes without it).
//   * When every episode of a group is in, group-relative rewards are
//     computed (the reward function's group normalization, e.g. the
//     contrastive preset's mean_std, or the config's override) and the
//     group's trajectories go to every sink.
//
// Forking: add_fork(parent, turn, n) starts a group of n episodes that
// continue `parent` after its turn `turn` (0-based) without replaying it:
// the environment is reset with EpisodeResume (task, seed, exemplars, turns
// and time used, compile errors, return so far, the latest solution), the
// chat is the parent's up to that turn, and the new trajectories begin with
// the parent's turns 0..turn. Best-of-n from an intermediate state and tree
// search are forks of forks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/core/trajectory.h"
#include "kforge/core/trajectory_sink.h"
#include "kforge/env/env_pool.h"
#include "kforge/rollout/policy/policy.h"
#include "kforge/rollout/worker/rollout_config.h"

namespace kforge::rollout {

struct RolloutStats {
  int groups_completed = 0;
  int episodes_started = 0;
  int episodes_written = 0;
  int terminated = 0;     // ended by submit
  int truncated = 0;      // by a budget, the wall clock or a policy error
  int policy_errors = 0;  // episodes ended because the policy could not answer
  int stale_dropped = 0;  // episodes dropped for staleness (re-queued)
  int stale_abandoned = 0;
  int tasks_rejected = 0;  // tasks the environment refused at reset
  int64_t steps = 0;
  int64_t policy_batches = 0;
  int64_t policy_requests = 0;
  double wall_s = 0.0;
  double policy_ms = 0.0;    // summed over batches (time the policy took to answer)
  double env_step_ms = 0.0;  // summed over steps (info.timings.step_ms)
  double mean_reward = 0.0;  // over written trajectories
  // Every sink held everything at the end (the stream: acknowledged within
  // stream.flush_timeout_s).
  bool sinks_flushed = true;
  json to_json() const;
};

// The policy a config names (in process for the template policy, a ZmqPolicy for a
// trainer-served one).
std::shared_ptr<Policy> make_policy(const PolicyConfig& config);

class RolloutRunner {
 public:
  // Loads the environment config (with the rollout config's budget
  // overrides) and the task set, builds the pool. InputError for bad
  // configs, an empty task set or unknown task ids.
  RolloutRunner(RolloutConfig config, std::shared_ptr<Policy> policy, std::vector<TrajectorySink*> sinks,
                env::EnvServices services = {});
  ~RolloutRunner();
  RolloutRunner(const RolloutRunner&) = delete;
  RolloutRunner& operator=(const RolloutRunner&) = delete;

  // A group of `n` episodes continuing `parent` after its turn `turn`.
  // InputError when the trajectory lacks what a fork needs (its task, seed,
  // prompt and per-turn state: trajectories written by this runner have
  // them) or when the episode ended at that turn.
  void add_fork(const Trajectory& parent, int turn, int n);

  // Runs the configured groups (or, when forks were added, only the forks)
  // to completion. SystemError when the environment or a sink fails.
  RolloutStats run();

  // One line per event worth a log (groups completed, drops), if set.
  void set_log(std::function<void(const std::string&)> log);

  const env::EnvConfig& env_config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::rollout
