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

json exemplar_json(const env::Exemplar& e) {
  return {{"speedup_eager", e.speedup_eager}, {"note", e.note}, {"solution", to_json(e.solution)}};
}

env::Exemplar exemplar_from_json(const json& j) {
  env::Exemplar e;
  e.speedup_eager = j.at("speedup_eager").get<double>();
  e.note = j.value("note", "");
  e.solution = parse_solution(Document::from_value(j.at("solution"), "<exemplar>"));
  return e;
}

// The speed evidence of the measurement a trajectory was scored on (its last
// turn's step info), for tie-aware group normalization; none when that turn
// has no readable step info or its measurement no interval.
std::optional<reward::SpeedEvidence> scored_speed_evidence(const Trajectory& t) {
  if (t.turns.empty()) return std::nullopt;
  const json& env_info = t.turns.back().info.value("env", json(nullptr));
  if (!env_info.is_object()) return std::nullopt;
  try {
    return reward::speed_evidence(env::step_info_from_json(env_info).scored_measurement());
  } catch (const InputError&) {
    return std::nullopt;
  }
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
    for (const auto& e : g.fork->parent.info.value("exemplars", json::array())) {
      g.exemplars.push_back(exemplar_from_json(e));
    }
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
  ep.traj.id =
      g.id + "-e" + std::to_string(spec.member) +
      (g.requeues[static_cast<size_t>(spec.member)] ? "r" + std::to_string(g.requeues[static_cast<size_t>(spec.member)])
                                                    : "");
  ep.traj.group_id = g.id;
  env::ResetOptions options;
  options.exemplars = g.exemplars;
  TaskSpec task;
  json prompt_messages;
  if (g.fork) {
    const Trajectory& parent = g.fork->parent;
    const int k = g.fork->turn;
    task = parse_task(Document::from_value(parent.info.at("task"), "<trajectory " + parent.id + " task>"));
    ep.env_seed = parent.info.at("seed").get<uint64_t>();
    ep.sampling_seed =
        splitmix64(ep.env_seed ^ splitmix64(static_cast<uint64_t>(spec.member) + 1) ^ std::hash<std::string>{}(g.id));
    const json& state = parent.turns[static_cast<size_t>(k)].info.at("state");
    env::EpisodeResume resume;
    resume.turns_used = state.at("turns_used").get<int>();
    resume.time_used_s = state.at("time_used_s").get<double>();
    resume.compile_errors = state.at("compile_errors").get<int>();
    resume.episode_return = state.at("episode_return").get<double>();
    ep.solution_turn = state.value("solution_turn", -1);
    if (ep.solution_turn >= 0) {
      const Action a = pool->tools().decode(parent.turns[static_cast<size_t>(ep.solution_turn)].action);
      resume.last_solution = a.solution;
    }
    options.resume = resume;
    ep.messages = parent.info.at("prompt").at("messages");
    for (int i = 0; i <= k; ++i) {
      for (const auto& m : parent.turns[static_cast<size_t>(i)].messages) ep.messages.push_back(m);
      ep.traj.turns.push_back(parent.turns[static_cast<size_t>(i)]);
    }
    ep.traj.policy_version_start = parent.policy_version_start;
    ep.traj.info["fork"] = {{"parent", parent.id}, {"parent_group", parent.group_id}, {"turn", k}};
  } else {
    task = tasks[g.task];
    ep.env_seed = splitmix64(config.seed ^ splitmix64(spec.group * 1024 + static_cast<uint64_t>(spec.member)) ^
                             static_cast<uint64_t>(g.requeues[static_cast<size_t>(spec.member)]) * 7919);
    ep.sampling_seed = ep.env_seed;
  }
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
  if (!g.fork) ep.messages = rr.observation.data.value("messages", json::array());
  prompt_messages = g.fork ? g.fork->parent.info.at("prompt").at("messages") : ep.messages;
  ep.tools = rr.observation.data.value("tools", json::array());
  ep.traj.task_id = task.id;
  json exemplars = json::array();
  for (const auto& e : g.exemplars) exemplars.push_back(exemplar_json(e));
  ep.traj.info["run_id"] = run_id;
  ep.traj.info["seed"] = ep.env_seed;
  ep.traj.info["sampling_seed"] = ep.sampling_seed;
  ep.traj.info["task"] = to_json(task);
  ep.traj.info["exemplars"] = exemplars;
  ep.traj.info["prompt"] = {{"messages", prompt_messages}, {"tools", ep.tools}};
  ep.traj.info["env"] = {{"backend", rr.info.value("backend", "")},
                         {"solution_mode", rr.info.value("solution_mode", "")},
                         {"budgets", rr.info.value("budgets", json::object())},
                         {"reward", rr.info.value("reward", json::object())}};
  ep.traj.info["policy"] = policy->describe();
  ++stats.episodes_started;
  slots[static_cast<size_t>(env_id)] = std::move(ep);
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
    if (!g.done[m]->info.contains("policy_error")) {
      members.push_back(m);
      totals.push_back(g.done[m]->total_reward);
      evidence.push_back({g.done[m]->total_reward, scored_speed_evidence(*g.done[m])});
    }
  }
  // The reward's own normalization sees each member's speed evidence, so
  // that `ties: statistical` can pool indistinguishable speedups.
  const std::vector<double> advantages =
      normalize_as_reward ? reward->normalize_group(evidence) : normalize(normalization, totals);
  json rewards = json::array();
  for (size_t m = 0; m < g.done.size(); ++m)
    rewards.push_back(g.done[m] ? json(g.done[m]->total_reward) : json(nullptr));
  int written = 0;
  for (size_t m = 0; m < g.done.size(); ++m) {
    if (!g.done[m]) continue;
    Trajectory& t = *g.done[m];
    json advantage = nullptr;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == m) advantage = advantages[i];
    }
    t.info["group"] = {{"id", g.id},
                       {"size", g.size},
                       {"index", m},
                       {"rewards", rewards},
                       {"advantage", advantage},
                       {"normalization", group_normalization_name(normalization)},
                       {"members_normalized", members.size()}};
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
  for (const char* key : {"task", "seed", "prompt"}) {
    if (!parent.info.contains(key)) {
      throw InputError(what + ": info." + key + " is missing (trajectories written by kforge rollout have it)");
    }
  }
  const json& state = parent.turns[static_cast<size_t>(turn)].info.value("state", json(nullptr));
  if (!state.is_object()) throw InputError(what + ": turn " + std::to_string(turn) + " has no info.state");
  const json& env_info = parent.turns[static_cast<size_t>(turn)].info.value("env", json::object());
  if (env::step_info_from_json(env_info, what + ": turn " + std::to_string(turn) + " info.env").final) {
    throw InputError(what + ": the episode ended at turn " + std::to_string(turn) + "; fork from an earlier turn");
  }
  impl_->forks.push_back({parent, turn});
  impl_->fork_sizes.push_back(n);
}

RolloutStats RolloutRunner::run() { return impl_->run(); }

}  // namespace kforge::rollout
