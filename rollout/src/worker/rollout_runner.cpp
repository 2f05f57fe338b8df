#include "kforge/rollout/worker/rollout_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/splitmix64.h"
#include "kforge/core/task_set.h"
#include "kforge/env/step_info.h"
#include "kforge/reward/reward.h"
#include "kforge/rollout/policy/openai_policy.h"
#include "kforge/rollout/policy/template_policy.h"
#include "kforge/rollout/policy/zmq_policy.h"
#include "worker/runner_impl.h"

namespace kforge::rollout {
namespace {

std::string random_run_id() {
  std::random_device rd;
  const uint64_t x = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                     static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 8; ++i) s += kHex[(splitmix64(x) >> (4 * i)) & 15];
  return s;
}

// The speed evidence of the measurement a trajectory was scored on (its last
// turn's step info), for tie-aware group normalization; none when that turn
// has no step info or its measurement no interval.
std::optional<reward::SpeedEvidence> scored_speed_evidence(const std::vector<TurnInfo>& turns) {
  if (turns.empty() || !turns.back().env) return std::nullopt;
  return reward::speed_evidence(turns.back().env->scored_measurement());
}

// An explicit `group_normalization` of the rollout config: sample standard
// deviation, eps 1e-6. (`auto` uses the reward function's settings instead.)
std::vector<double> normalize(GroupNormalization mode, const std::vector<double>& totals) {
  if (totals.empty()) return {};
  std::vector<double> out = totals;
  if (mode == GroupNormalization::kNone) return out;
  double mean = 0;
  for (double t : totals) mean += t;
  mean /= static_cast<double>(totals.size());
  double var = 0;
  for (double t : totals) var += (t - mean) * (t - mean);
  const double sd = totals.size() > 1 ? std::sqrt(var / static_cast<double>(totals.size() - 1)) : 0.0;
  for (double& t : out) {
    t -= mean;
    if (mode == GroupNormalization::kMeanStd) t = sd > 0 ? t / (sd + 1e-6) : 0.0;
  }
  return out;
}

}  // namespace

json RolloutStats::to_json() const {
  return {{"groups_completed", groups_completed},
          {"episodes_started", episodes_started},
          {"episodes_written", episodes_written},
          {"terminated", terminated},
          {"truncated", truncated},
          {"policy_errors", policy_errors},
          {"stale_dropped", stale_dropped},
          {"stale_abandoned", stale_abandoned},
          {"tasks_rejected", tasks_rejected},
          {"steps", steps},
          {"policy_batches", policy_batches},
          {"policy_requests", policy_requests},
          {"wall_s", wall_s},
          {"steps_per_s", wall_s > 0 ? static_cast<double>(steps) / wall_s : 0.0},
          {"policy_ms", policy_ms},
          {"env_step_ms", env_step_ms},
          {"mean_reward", mean_reward},
          {"sinks_flushed", sinks_flushed}};
}

std::shared_ptr<Policy> make_policy(const PolicyConfig& config) {
  if (config.kind == PolicyKind::kZmq) return std::make_shared<ZmqPolicy>(config.zmq);
  if (config.kind == PolicyKind::kOpenAi) {
#ifdef KFORGE_HAVE_CURL
    return std::make_shared<OpenAiPolicy>(config.openai);
#else
    throw InputError(
        "policy.kind: openai needs the HTTP policy, which this kforge was built without (libcurl's headers were not "
        "found: install libcurl4-openssl-dev and reconfigure)");
#endif
  }
  return std::make_shared<TemplatePolicy>(config.template_policy);
}

RolloutRunner::Impl::Impl(RolloutConfig c, std::shared_ptr<Policy> p, std::vector<TrajectorySink*> s,
                          env::EnvServices services)
    : config(std::move(c)), policy(std::move(p)), sinks(std::move(s)) {
  if (!policy) throw InputError("rollout: no policy given");
  env_config = env::load_env_config(config.env);
  if (config.max_turns) env_config.max_turns = *config.max_turns;
  if (config.time_budget_s) env_config.time_budget_s = *config.time_budget_s;
  reward = std::make_unique<reward::RewardFunction>(reward::RewardFunction::load(env_config.reward.function));
  normalization = config.group_normalization;
  if (normalization == GroupNormalization::kAuto) {
    const std::string mode =
        reward->describe().value("group_normalization", json::object()).value("mode", std::string("none"));
    normalization = mode == "mean_std" ? GroupNormalization::kMeanStd
                    : mode == "mean"   ? GroupNormalization::kMean
                                       : GroupNormalization::kNone;
    normalize_as_reward = true;
  }
  if (config.tasks.empty()) throw InputError(config.source + ": \"tasks\" names no task set");
  std::vector<TaskSpec> all = load_task_set(config.tasks);
  if (config.task_ids.empty()) {
    tasks = std::move(all);
  } else {
    for (const auto& id : config.task_ids) {
      auto it = std::find_if(all.begin(), all.end(), [&](const TaskSpec& t) { return t.id == id; });
      if (it == all.end()) {
        std::vector<std::string> ids;
        for (const auto& t : all) ids.push_back(t.id);
        const std::string hint = closest_match(id, ids);
        throw InputError(config.source + ": task_ids: \"" + id + "\" is not in " + config.tasks.string() +
                         (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
      }
      tasks.push_back(*it);
    }
  }
  if (tasks.empty()) throw InputError(config.source + ": the task set " + config.tasks.string() + " is empty");
  task_rejected.assign(tasks.size(), false);
  order.resize(tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  run_id = random_run_id();
  slots.resize(static_cast<size_t>(config.concurrency));
  pool = std::make_unique<env::EnvPool>(env_config, config.concurrency, std::move(services));
}

void RolloutRunner::Impl::say(const std::string& line) const {
  if (log) log(line);
}

size_t RolloutRunner::Impl::draw_task() {
  if (next_draw % order.size() == 0 && config.shuffle) {
    // splitmix64(seed) first: seeds S and S+1 (two ranks of one job) must not
    // give shifted copies of one stream of shuffles.
    std::mt19937_64 rng(splitmix64(splitmix64(config.seed) + next_draw));
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order[next_draw++ % order.size()];
}

bool RolloutRunner::Impl::plan_group() {
  if (static_cast<int>(groups.size()) >= groups_planned) return false;
  Group g;
  const size_t index = groups.size();
  g.id = run_id + "-g" + std::to_string(index);
  if (!forks.empty()) {
    g.fork = forks[index];
    const std::string task_id = g.fork->parent.task_id;
    g.size = fork_sizes[index];
    g.task = 0;
    g.exemplars = g.fork->parent_info.exemplars;
  } else {
    // Tasks the environment refused are not drawn again.
    size_t t = draw_task();
    for (size_t tries = 0; task_rejected[t] && tries < tasks.size(); ++tries) t = draw_task();
    if (task_rejected[t]) return false;
    g.task = t;
    g.size = config.group_size;
    if (config.exemplars > 0) {
      const auto& pool_of_task = best[tasks[t].id];
      for (size_t i = 0; i < pool_of_task.size() && static_cast<int>(i) < config.exemplars; ++i) {
        g.exemplars.push_back(pool_of_task[i]);
      }
    }
  }
  g.done.resize(static_cast<size_t>(g.size));
  g.abandoned.assign(static_cast<size_t>(g.size), false);
  g.requeues.assign(static_cast<size_t>(g.size), 0);
  groups.push_back(std::move(g));
  for (int m = 0; m < groups.back().size; ++m) queue.push_back({index, m});
  return true;
}

// --- starting episodes ---------------------------------------------------

void RolloutRunner::Impl::start(const Spec& spec, int env_id) {
  Group& g = groups[spec.group];
  Episode ep;
  ep.spec = spec;
  ep.env_id = env_id;
  const auto reset_at = Clock::now();
  const int requeues = g.requeues[static_cast<size_t>(spec.member)];
  ep.traj.id = g.id + "-e" + std::to_string(spec.member) + (requeues ? "r" + std::to_string(requeues) : "");
  ep.traj.group_id = g.id;
  TaskSpec task;
  env::ResetOptions options;
  if (g.fork) {
    options = continue_fork(*g.fork, spec, g.id, ep, task);
  } else {
    task = tasks[g.task];
    ep.env_seed = splitmix64(config.seed ^ splitmix64(spec.group * 1024 + static_cast<uint64_t>(spec.member)) ^
                             static_cast<uint64_t>(requeues) * 7919);
    ep.sampling_seed = ep.env_seed;
  }
  options.exemplars = g.exemplars;
  env::ResetResult rr;
  try {
    rr = pool->reset(env_id, task, ep.env_seed, options);
  } catch (const InputError& e) {
    if (g.fork) throw;
    // A task the environment refuses (it does not type-check): its group
    // is dropped, the run goes on.
    say("task " + task.id + " refused by the environment: " + e.what());
    ++stats.tasks_rejected;
    task_rejected[g.task] = true;
    abandon_group(spec.group);
    return;
  }
  ep.started = Clock::now();
  ep.reset_ms = elapsed_ms(reset_at, ep.started);
  describe_start(g, task, rr, ep);
  ++stats.episodes_started;
  slots[static_cast<size_t>(env_id)] = std::move(ep);
}

// A fork's episode: the parent's task and seed, a sampling seed of its own,
// the parent's turns up to the fork's, and the state after it to resume from.
env::ResetOptions RolloutRunner::Impl::continue_fork(const Fork& fork, const Spec& spec, const std::string& group_id,
                                                     Episode& ep, TaskSpec& task) const {
  const Trajectory& parent = fork.parent;
  const TrajectoryInfo& parent_info = fork.parent_info;
  const int k = fork.turn;
  task = parent_info.task_spec("trajectory " + parent.id);
  ep.env_seed = *parent_info.seed;
  ep.sampling_seed =
      splitmix64(ep.env_seed ^ splitmix64(static_cast<uint64_t>(spec.member) + 1) ^ std::hash<std::string>{}(group_id));
  const TurnState& state = *fork.parent_turns[static_cast<size_t>(k)].state;
  env::EpisodeResume resume;
  resume.turns_used = state.turns_used;
  resume.time_used_s = state.time_used_s;
  resume.compile_errors = state.compile_errors;
  resume.episode_return = state.episode_return;
  ep.solution_turn = state.solution_turn;
  if (ep.solution_turn >= 0) {
    resume.last_solution = pool->tools().decode(parent.turns[static_cast<size_t>(ep.solution_turn)].action).solution;
  }
  ep.messages = *parent_info.prompt_messages;
  for (int i = 0; i <= k; ++i) {
    for (const auto& m : parent.turns[static_cast<size_t>(i)].messages) ep.messages.push_back(m);
    ep.traj.turns.push_back(parent.turns[static_cast<size_t>(i)]);
    ep.turn_info.push_back(fork.parent_turns[static_cast<size_t>(i)]);
  }
  ep.traj.policy_version_start = parent.policy_version_start;
  ep.info.fork = ForkInfo{parent.id, parent.group_id, k};
  env::ResetOptions options;
  options.resume = resume;
  return options;
}

// What the trajectory records of the episode's start (TrajectoryInfo).
void RolloutRunner::Impl::describe_start(const Group& g, const TaskSpec& task, const env::ResetResult& reset,
                                         Episode& ep) const {
  if (!g.fork) ep.messages = reset.observation.data.value("messages", json::array());
  ep.tools = reset.observation.data.value("tools", json::array());
  ep.traj.task_id = task.id;
  TrajectoryInfo& info = ep.info;
  info.run_id = run_id;
  info.seed = ep.env_seed;
  info.sampling_seed = ep.sampling_seed;
  info.task = to_json(task);
  info.exemplars = g.exemplars;
  info.prompt_messages = g.fork ? *g.fork->parent_info.prompt_messages : ep.messages;
  info.prompt_tools = ep.tools;
  info.env =
      EpisodeEnvInfo{reset.info.backend, reset.info.solution_mode, reset.info.budgets_json(), reset.info.reward_json()};
  info.policy = policy->describe();
}

void RolloutRunner::Impl::abandon_group(size_t index) {
  Group& g = groups[index];
  queue.erase(std::remove_if(queue.begin(), queue.end(), [&](const Spec& s) { return s.group == index; }), queue.end());
  g.finished = g.size;
}

// --- completing groups ---------------------------------------------------

void RolloutRunner::Impl::maybe_complete(size_t index) {
  Group& g = groups[index];
  if (g.finished < g.size) return;
  std::vector<size_t> members;
  std::vector<double> totals;
  std::vector<reward::GroupMember> evidence;
  for (size_t m = 0; m < g.done.size(); ++m) {
    if (!g.done[m]) continue;
    if (!g.done[m]->info.policy_error) {
      members.push_back(m);
      totals.push_back(g.done[m]->traj.total_reward);
      evidence.push_back({g.done[m]->traj.total_reward, scored_speed_evidence(g.done[m]->turn_info)});
    }
  }
  // The reward's own normalization sees each member's speed evidence, so
  // that `ties: statistical` can pool indistinguishable speedups.
  const std::vector<double> advantages =
      normalize_as_reward ? reward->normalize_group(evidence) : normalize(normalization, totals);
  json rewards = json::array();
  for (size_t m = 0; m < g.done.size(); ++m)
    rewards.push_back(g.done[m] ? json(g.done[m]->traj.total_reward) : json(nullptr));
  int written = 0;
  for (size_t m = 0; m < g.done.size(); ++m) {
    if (!g.done[m]) continue;
    std::optional<double> advantage;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == m) advantage = advantages[i];
    }
    g.done[m]->info.group =
        GroupInfo{g.id, g.size, m, rewards, advantage, group_normalization_name(normalization), members.size()};
    const Trajectory t = std::move(*g.done[m]).written();
    for (TrajectorySink* sink : sinks) sink->write(t);
    reward_sum += t.total_reward;
    ++stats.episodes_written;
    ++written;
  }
  ++stats.groups_completed;
  say("group " + g.id + " (" + (g.fork ? "fork of " + g.fork->parent.id : tasks[g.task].id) +
      ") complete: " + std::to_string(written) + " trajectories");
  g.done.clear();
}

RolloutRunner::RolloutRunner(RolloutConfig config, std::shared_ptr<Policy> policy, std::vector<TrajectorySink*> sinks,
                             env::EnvServices services)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(policy), std::move(sinks), std::move(services))) {}

RolloutRunner::~RolloutRunner() = default;

void RolloutRunner::set_log(std::function<void(const std::string&)> log) { impl_->log = std::move(log); }

const env::EnvConfig& RolloutRunner::env_config() const { return impl_->env_config; }

void RolloutRunner::add_fork(const Trajectory& parent, int turn, int n) {
  const std::string what = "fork of trajectory " + parent.id;
  if (n < 1 || n > 1024) throw InputError(what + ": n must be in [1, 1024], got " + std::to_string(n));
  if (turn < 0 || turn >= static_cast<int>(parent.turns.size())) {
    throw InputError(what + ": turn " + std::to_string(turn) + " does not exist (it has " +
                     std::to_string(parent.turns.size()) + " turns, numbered from 0)");
  }
  // The reader of recorded files: the parent's info and every turn's, read
  // once here, with errors naming the field.
  TrajectoryInfo info = trajectory_info_from_json(parent.info, what + ": info");
  if (info.task.is_null() || !info.seed || !info.prompt_messages) {
    throw InputError(what +
                     ": info.task, info.seed and info.prompt are needed (trajectories written by kforge rollout "
                     "have them)");
  }
  std::vector<TurnInfo> turns;
  for (size_t i = 0; i < parent.turns.size(); ++i) {
    turns.push_back(turn_info_from_json(parent.turns[i].info, what + ": turn " + std::to_string(i) + " info"));
  }
  const TurnInfo& at = turns[static_cast<size_t>(turn)];
  if (!at.state) throw InputError(what + ": turn " + std::to_string(turn) + " has no info.state");
  if (at.state->solution_turn < -1 || at.state->solution_turn > turn) {
    throw InputError(what + ": turn " + std::to_string(turn) + " info.state.solution_turn is " +
                     std::to_string(at.state->solution_turn) + "; expected -1 (none) or a turn up to " +
                     std::to_string(turn));
  }
  if (at.env && at.env->final) {
    throw InputError(what + ": the episode ended at turn " + std::to_string(turn) + "; fork from an earlier turn");
  }
  impl_->forks.push_back({parent, std::move(info), std::move(turns), turn});
  impl_->fork_sizes.push_back(n);
}

RolloutStats RolloutRunner::run() { return impl_->run(); }

}  // namespace kforge::rollout
