// The rollout runner's state and the parts of its work (rollout_runner.h
// says how a run goes), defined by concern:
//   rollout_runner.cpp         configuration, planning groups and starting
//                              episodes (forks too), completing groups (rewards
//                              and their normalization)
//   runner/episode_loop.cpp    the loop: asking the policy in batches, turning
//                              replies into tool calls, recording the
//                              environment's steps as turns
//   runner/episode_end.cpp     ending episodes: staleness, exemplars for
//                              contrastive prompts
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/trajectory.h"
#include "kforge/core/trajectory_sink.h"
#include "kforge/env/env_pool.h"
#include "kforge/env/step_info.h"
#include "kforge/reward/reward.h"
#include "kforge/rollout/policy/policy.h"
#include "kforge/rollout/trajectory_info.h"
#include "kforge/rollout/worker/rollout_config.h"
#include "kforge/rollout/worker/rollout_runner.h"

namespace kforge::rollout {

struct RolloutRunner::Impl {
  using Clock = std::chrono::steady_clock;

  // A recorded episode to continue after one of its turns: the trajectory as
  // read from its file, its info parts read once by the readers of recorded
  // files (trajectory_info.h) when the fork is added.
  struct Fork {
    Trajectory parent;
    TrajectoryInfo parent_info;
    std::vector<TurnInfo> parent_turns;
    int turn = 0;
  };
  // A finished episode: its trajectory with the info parts typed beside it
  // (traj.info and traj.turns[i].info stay empty), until its group completes
  // and written() makes the one JSON form its sinks get.
  struct Record {
    Trajectory traj;
    TrajectoryInfo info;
    std::vector<TurnInfo> turn_info;  // one per turn
    Trajectory written() &&;
  };
  struct Group {
    std::string id;
    size_t task = 0;
    int size = 0;
    std::vector<env::Exemplar> exemplars;
    std::optional<Fork> fork;
    std::vector<std::optional<Record>> done;
    std::vector<bool> abandoned;
    std::vector<int> requeues;
    int finished = 0;  // members done or abandoned
  };
  struct Spec {
    size_t group = 0;
    int member = 0;
  };
  enum class State { kNeedPolicy, kPolicy, kEnv };
  struct Episode {
    Spec spec;
    int env_id = -1;
    uint64_t env_seed = 0;
    uint64_t sampling_seed = 0;
    json messages = json::array();
    json tools = json::array();
    Trajectory traj;                  // its turns' info and its own stay empty: see `info`
    TrajectoryInfo info;              // traj.info, typed
    std::vector<TurnInfo> turn_info;  // traj.turns[i].info, typed
    State state = State::kNeedPolicy;
    // When the first observation was ready: the episode's wall clock
    // (wall_time_s) starts there, so a slow reset (the task's reference check
    // on a busy judge) cannot end an episode before its first turn.
    Clock::time_point started;
    double reset_ms = 0.0;
    // The turn in flight.
    json assistant;
    json call;
    std::string call_id;
    json extra_calls = json::array();
    PolicyTurnInfo policy_meta;
    double policy_ms = 0.0;
    bool have_version = false;
    int solution_turn = -1;
    double policy_total_ms = 0.0, env_total_ms = 0.0;
  };

  RolloutConfig config;
  env::EnvConfig env_config;
  std::shared_ptr<Policy> policy;
  std::vector<TrajectorySink*> sinks;
  std::unique_ptr<env::EnvPool> pool;
  std::unique_ptr<reward::RewardFunction> reward;
  GroupNormalization normalization = GroupNormalization::kNone;
  // group_normalization: auto takes the reward function's own settings whole
  // (mode, std kind, eps): RewardFunction::normalize_group computes them.
  bool normalize_as_reward = false;
  std::vector<TaskSpec> tasks;
  std::vector<bool> task_rejected;
  std::string run_id;
  std::function<void(const std::string&)> log;

  std::vector<Group> groups;
  std::vector<Fork> forks;
  std::deque<Spec> queue;
  std::vector<size_t> order;  // task draw order
  size_t next_draw = 0;
  int groups_planned = 0;
  std::vector<std::optional<Episode>> slots;
  std::map<std::string, std::vector<env::Exemplar>> best;  // task id -> correct solutions, best first
  std::string newest_version;
  RolloutStats stats;
  double reward_sum = 0.0;
  std::vector<int> fork_sizes;  // n of each fork, by index in `forks`

  // rollout_runner.cpp
  Impl(RolloutConfig c, std::shared_ptr<Policy> p, std::vector<TrajectorySink*> s, env::EnvServices services);
  void say(const std::string& line) const;
  size_t draw_task();
  bool plan_group();
  void start(const Spec& spec, int env_id);
  // The parts of start(): a fork's episode continues its parent after the
  // fork's turn, a fresh one starts at turn 0; both then describe themselves.
  env::ResetOptions continue_fork(const Fork& fork, const Spec& spec, const std::string& group_id, Episode& ep,
                                  TaskSpec& task) const;
  void describe_start(const Group& g, const TaskSpec& task, const env::ResetResult& reset, Episode& ep) const;
  void abandon_group(size_t index);
  void maybe_complete(size_t index);

  // runner/episode_loop.cpp
  // The one policy batch in flight: whom it asked, and since when.
  struct PolicyBatch {
    std::future<std::vector<PolicyReply>> replies;
    std::vector<int> asked;  // env ids
    Clock::time_point asked_at;
  };
  RolloutStats run();
  // The phases of one pass of run(); each returns whether it moved anything.
  bool fill_free_slots();
  bool take_policy_replies(PolicyBatch& batch);
  bool ask_policy(PolicyBatch& batch);
  bool take_env_steps(std::chrono::milliseconds wait);
  bool all_done() const;
  PolicyRequest request_for(const Episode& ep) const;
  static void add_usage(Episode& ep, const json& usage);
  void note_version(Episode& ep, const std::string& version);
  void on_reply(Episode& ep, PolicyReply reply, double batch_ms);
  bool supplies_solution(const json& call, const env::StepInfo& info) const;
  void on_step(Episode& ep, env::StepResult result);
  // The parts of on_step(): the turn's chat messages, and its info.
  json turn_messages(const Episode& ep, const Observation& observation) const;

  // runner/episode_end.cpp
  void remember_exemplar(const Episode& ep);
  void finish(Episode& ep, bool terminated, const std::string& truncation_reason);
  // A policy version as a trainer step, when it is an integer.
  static std::optional<int64_t> as_integer(const std::string& s);
  // How far `version` is behind `newest`: the difference of trainer steps
  // when both are integers, else 1 when they differ.
  static int64_t lag(const std::string& version, const std::string& newest);
};

}  // namespace kforge::rollout
