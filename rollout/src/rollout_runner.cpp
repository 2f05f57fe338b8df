#include "kforge/rollout/rollout_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "kforge/core/error.h"
#include "kforge/core/splitmix64.h"
#include "kforge/core/task_set.h"
#include "kforge/reward/reward.h"
#include "kforge/rollout/baseline_policy.h"
#include "kforge/rollout/openai_policy.h"
#include "kforge/rollout/zmq_policy.h"

namespace kforge::rollout {
namespace {

using Clock = std::chrono::steady_clock;

// At most this many re-queues of one group member dropped for staleness.
constexpr int kMaxStaleRequeues = 3;
// Earlier solutions kept per task for contrastive prompts.
constexpr size_t kExemplarPool = 16;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::optional<int64_t> as_integer(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k) {
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  }
  return std::stoll(s);
}

// How far `version` is behind `newest`: the difference of trainer steps when
// both are integers, else 1 when they differ.
int64_t lag(const std::string& version, const std::string& newest) {
  const auto v = as_integer(version), n = as_integer(newest);
  if (v && n) return std::max<int64_t>(0, *n - *v);
  return version == newest ? 0 : 1;
}

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
  return std::make_shared<BaselinePolicy>(config.baseline);
}

struct RolloutRunner::Impl {
  struct Fork {
    Trajectory parent;
    int turn = 0;
  };
  struct Group {
    std::string id;
    size_t task = 0;
    int size = 0;
    std::vector<env::Exemplar> exemplars;
    std::optional<Fork> fork;
    std::vector<std::optional<Trajectory>> done;
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
    Trajectory traj;
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
    json policy_meta;
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

  Impl(RolloutConfig c, std::shared_ptr<Policy> p, std::vector<TrajectorySink*> s, env::EnvServices services)
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

  void say(const std::string& line) const {
    if (log) log(line);
  }

  size_t draw_task() {
    if (next_draw % order.size() == 0 && config.shuffle) {
      // splitmix64(seed) first: seeds S and S+1 (two ranks of one job) must not
      // give shifted copies of one stream of shuffles.
      std::mt19937_64 rng(splitmix64(splitmix64(config.seed) + next_draw));
      std::shuffle(order.begin(), order.end(), rng);
    }
    return order[next_draw++ % order.size()];
  }

  bool plan_group() {
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

  std::vector<int> fork_sizes;

  bool all_done() const {
    if (static_cast<int>(groups.size()) < groups_planned) return false;
    if (!queue.empty()) return false;
    for (const auto& s : slots) {
      if (s) return false;
    }
    return true;
  }

  // --- starting episodes ---------------------------------------------------

  void start(const Spec& spec, int env_id) {
    Group& g = groups[spec.group];
    Episode ep;
    ep.spec = spec;
    ep.env_id = env_id;
    const auto reset_at = Clock::now();
    ep.traj.id = g.id + "-e" + std::to_string(spec.member) +
                 (g.requeues[static_cast<size_t>(spec.member)]
                      ? "r" + std::to_string(g.requeues[static_cast<size_t>(spec.member)])
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
    ep.reset_ms = std::chrono::duration<double, std::milli>(ep.started - reset_at).count();
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

  void abandon_group(size_t index) {
    Group& g = groups[index];
    queue.erase(std::remove_if(queue.begin(), queue.end(), [&](const Spec& s) { return s.group == index; }),
                queue.end());
    g.finished = g.size;
  }

  // --- the policy --------------------------------------------------------------

  PolicyRequest request_for(const Episode& ep) const {
    PolicyRequest r;
    r.episode_id = ep.traj.id;
    r.turn = static_cast<int>(ep.traj.turns.size());
    r.task_id = ep.traj.task_id;
    r.messages = ep.messages;
    r.tools = ep.tools;
    r.sampling = config.policy.sampling;
    if (!r.sampling.seed) r.sampling.seed = ep.sampling_seed;
    r.task = ep.traj.info.at("task");
    return r;
  }

  // A reply's token counts go to its turn (turns[i].info.policy.usage) and
  // add up over the episode in info.usage, so a trainer can budget tokens
  // per trajectory without summing turns.
  void add_usage(Episode& ep, const json& usage) {
    ep.policy_meta["usage"] = usage;
    json& total = ep.traj.info["usage"];
    if (!total.is_object()) total = json::object();
    for (auto it = usage.begin(); it != usage.end(); ++it) {
      if (!it.value().is_number_integer()) continue;
      total[it.key()] = total.value(it.key(), int64_t{0}) + it.value().get<int64_t>();
    }
  }

  void note_version(Episode& ep, const std::string& version) {
    if (!version.empty()) {
      const auto v = as_integer(version), n = as_integer(newest_version);
      if (newest_version.empty() || !(v && n) || *v > *n) newest_version = version;
    }
    if (!ep.have_version && ep.traj.policy_version_start.empty()) ep.traj.policy_version_start = version;
    ep.have_version = true;
    ep.traj.policy_version_end = version;
  }

  void on_reply(Episode& ep, PolicyReply reply, double batch_ms) {
    note_version(ep, reply.policy_version);
    ep.policy_ms = reply.latency_ms > 0 ? reply.latency_ms : batch_ms;
    ep.policy_total_ms += ep.policy_ms;
    ep.policy_meta = {
        {"version", reply.policy_version}, {"finish_reason", reply.finish_reason}, {"latency_ms", ep.policy_ms}};
    if (reply.token_ids) ep.policy_meta["token_ids"] = *reply.token_ids;
    if (reply.logprobs) ep.policy_meta["logprobs"] = *reply.logprobs;
    if (!reply.usage.is_null()) add_usage(ep, reply.usage);
    if (!reply.error.empty()) {
      ++stats.policy_errors;
      ep.traj.info["policy_error"] = reply.error;
      finish(ep, false, "policy_error");
      return;
    }
    ep.assistant = {{"role", "assistant"}, {"content", reply.content}};
    ep.extra_calls = json::array();
    const int turn = static_cast<int>(ep.traj.turns.size());
    if (reply.tool_calls.is_array() && !reply.tool_calls.empty()) {
      json calls = reply.tool_calls;
      for (size_t i = 0; i < calls.size(); ++i) {
        if (calls[i].is_object() && !calls[i].contains("id")) {
          calls[i]["id"] = "call_" + std::to_string(turn) + "_" + std::to_string(i);
        }
      }
      ep.assistant["tool_calls"] = calls;
      ep.call = calls[0];
      ep.call_id = calls[0].is_object() ? calls[0].value("id", std::string()) : "";
      for (size_t i = 1; i < calls.size(); ++i) ep.extra_calls.push_back(calls[i]);
    } else {
      // Text instead of a tool call: the environment decodes it (JSON text
      // of a call is accepted) or answers with an invalid-action observation.
      ep.call = reply.content;
      ep.call_id.clear();
    }
    ep.state = State::kEnv;
    pool->send_tool_calls({ep.call}, {ep.env_id});
  }

  // --- the environment -------------------------------------------------------------

  bool supplies_solution(const json& call, const json& info) const {
    const json& error = info.value("error", json(nullptr));
    if (error.is_object()) {
      const std::string kind = error.value("kind", "");
      if (kind == "invalid_action" || kind == "no_solution" || kind == "episode_finished") return false;
    }
    try {
      return pool->tools().decode(call).solution.has_value();
    } catch (const InputError&) {
      return false;
    }
  }

  void on_step(Episode& ep, StepResult result) {
    ++stats.steps;
    const json& info = result.info;
    const double step_ms = info.value("timings", json::object()).value("step_ms", 0.0);
    stats.env_step_ms += step_ms;
    ep.env_total_ms += step_ms;
    const int turn = static_cast<int>(ep.traj.turns.size());
    Turn t;
    t.messages = json::array({ep.assistant});
    if (ep.call_id.empty()) {
      t.messages.push_back({{"role", "user"}, {"content", result.observation.text}});
    } else {
      t.messages.push_back({{"role", "tool"}, {"tool_call_id", ep.call_id}, {"content", result.observation.text}});
    }
    for (const auto& extra : ep.extra_calls) {
      t.messages.push_back({{"role", "tool"},
                            {"tool_call_id", extra.is_object() ? extra.value("id", std::string()) : ""},
                            {"content", "Not run: one tool call is executed per turn; call it again next turn."}});
    }
    t.action = ep.call;
    t.observation = result.observation;
    t.reward = result.reward;
    t.reward_components = info.value("reward_components", json::object());
    t.timings = info.value("timings", json::object());
    t.timings["policy_ms"] = ep.policy_ms;
    if (supplies_solution(ep.call, info)) ep.solution_turn = turn;
    const json& budget = info.value("budget", json::object());
    json env_info = info;
    env_info.erase("tool_call");  // the turn's action
    t.info = {{"env", env_info},
              {"policy", ep.policy_meta},
              {"state",
               {{"turns_used", budget.value("turns_used", 0)},
                {"time_used_s", budget.value("time_used_s", 0.0)},
                {"compile_errors", budget.value("compile_errors", 0)},
                {"episode_return", info.value("episode_return", 0.0)},
                {"solution_turn", ep.solution_turn}}}};
    for (const auto& m : t.messages) ep.messages.push_back(m);
    ep.traj.turns.push_back(std::move(t));
    if (result.terminated || result.truncated) {
      finish(ep, result.terminated, result.truncated ? info.value("truncation_reason", "budget") : "");
      return;
    }
    ep.state = State::kNeedPolicy;
  }

  // --- finishing ------------------------------------------------------------

  void remember_exemplar(const Episode& ep) {
    if (ep.traj.turns.empty() || ep.solution_turn < 0) return;
    const json& env_info = ep.traj.turns.back().info.value("env", json::object());
    const json& fin = env_info.value("final_evaluation", json::object());
    const json& m = fin.contains("measurement") ? fin["measurement"] : env_info.value("measurement", json::object());
    if (m.value("outcome", "") != "correct" || !m.contains("speedup_eager") || !m["speedup_eager"].is_number()) return;
    // The scored solution is the episode's latest one (submit or auto-submit).
    env::Exemplar e;
    try {
      const Action a = pool->tools().decode(ep.traj.turns[static_cast<size_t>(ep.solution_turn)].action);
      if (!a.solution) return;
      e.solution = *a.solution;
    } catch (const InputError&) {
      return;
    }
    e.speedup_eager = m["speedup_eager"].get<double>();
    e.note = "trajectory " + ep.traj.id;
    auto& list = best[ep.traj.task_id];
    for (const auto& other : list) {
      if (other.solution.source == e.solution.source) return;
    }
    list.push_back(std::move(e));
    std::sort(list.begin(), list.end(),
              [](const env::Exemplar& a, const env::Exemplar& b) { return a.speedup_eager > b.speedup_eager; });
    if (list.size() > kExemplarPool) list.resize(kExemplarPool);
  }

  // Ends the episode in its slot; `ep` is gone afterwards.
  void finish(Episode& ep, bool terminated, const std::string& truncation_reason) {
    const Spec spec = ep.spec;
    Group& g = groups[spec.group];
    const size_t member = static_cast<size_t>(spec.member);
    ep.traj.terminated = terminated;
    ep.traj.truncated = !terminated;
    if (!terminated) ep.traj.info["truncation_reason"] = truncation_reason;
    double total = 0;
    for (const auto& t : ep.traj.turns) total += t.reward;
    ep.traj.total_reward = total;
    ep.traj.info["timings"] = {{"reset_ms", ep.reset_ms},
                               {"episode_ms", ms_since(ep.started)},
                               {"policy_ms", ep.policy_total_ms},
                               {"env_step_ms", ep.env_total_ms}};
    const int env_id = ep.env_id;
    const std::string start_version = ep.traj.policy_version_start;
    // Staleness: judged against the newest version seen when it finishes.
    if (config.max_policy_lag >= 0 && lag(start_version, newest_version) > config.max_policy_lag) {
      ++stats.stale_dropped;
      say("episode " + ep.traj.id + " dropped: started at policy version " + start_version + ", newest is " +
          newest_version);
      if (g.requeues[member] < kMaxStaleRequeues) {
        ++g.requeues[member];
        queue.push_front(spec);
      } else {
        ++stats.stale_abandoned;
        g.abandoned[member] = true;
        ++g.finished;
      }
      slots[static_cast<size_t>(env_id)].reset();
      maybe_complete(spec.group);
      return;
    }
    if (terminated) {
      ++stats.terminated;
    } else {
      ++stats.truncated;
    }
    remember_exemplar(ep);
    g.done[member] = std::move(ep.traj);
    ++g.finished;
    slots[static_cast<size_t>(env_id)].reset();
    maybe_complete(spec.group);
  }

  void maybe_complete(size_t index) {
    Group& g = groups[index];
    if (g.finished < g.size) return;
    std::vector<size_t> members;
    std::vector<double> totals;
    for (size_t m = 0; m < g.done.size(); ++m) {
      if (!g.done[m]) continue;
      if (!g.done[m]->info.contains("policy_error")) {
        members.push_back(m);
        totals.push_back(g.done[m]->total_reward);
      }
    }
    const std::vector<double> advantages =
        normalize_as_reward ? reward->normalize_group(totals) : normalize(normalization, totals);
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

  // --- the loop ----------------------------------------------------------------

  RolloutStats run() {
    const auto t0 = Clock::now();
    groups_planned = !forks.empty() ? static_cast<int>(forks.size())
                                    : (config.groups > 0 ? config.groups : static_cast<int>(tasks.size()));
    std::future<std::vector<PolicyReply>> in_flight;
    std::vector<int> asked;  // env ids of the batch in flight
    Clock::time_point asked_at;
    while (!all_done()) {
      // 1. Fill free env slots.
      for (int id = 0; id < config.concurrency; ++id) {
        if (slots[static_cast<size_t>(id)]) continue;
        if (queue.empty() && !plan_group()) break;
        if (queue.empty()) break;
        const Spec spec = queue.front();
        queue.pop_front();
        start(spec, id);
      }
      bool progressed = false;
      // 2. The policy's answers.
      if (in_flight.valid() && in_flight.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) {
        std::vector<PolicyReply> replies;
        const double batch_ms = ms_since(asked_at);
        stats.policy_ms += batch_ms;
        try {
          replies = in_flight.get();
        } catch (const std::exception& e) {
          replies.assign(asked.size(), PolicyReply{});
          for (auto& r : replies) r.error = std::string("the policy failed: ") + e.what();
        }
        if (replies.size() != asked.size()) {
          const std::string why = "the policy returned " + std::to_string(replies.size()) + " replies for " +
                                  std::to_string(asked.size()) + " requests";
          replies.assign(asked.size(), PolicyReply{});
          for (auto& r : replies) r.error = why;
        }
        for (size_t i = 0; i < asked.size(); ++i) {
          auto& slot = slots[static_cast<size_t>(asked[i])];
          if (slot) on_reply(*slot, std::move(replies[i]), batch_ms);
        }
        asked.clear();
        progressed = true;
      }
      // 3. Ask the policy for everyone waiting (one batch in flight at a time).
      if (!in_flight.valid()) {
        std::vector<PolicyRequest> batch;
        for (int id = 0; id < config.concurrency; ++id) {
          auto& slot = slots[static_cast<size_t>(id)];
          if (!slot || slot->state != State::kNeedPolicy) continue;
          if (config.wall_time_s > 0 && ms_since(slot->started) > config.wall_time_s * 1000.0) {
            finish(*slot, false, "wall_time");
            progressed = true;
            continue;
          }
          batch.push_back(request_for(*slot));
          slot->state = State::kPolicy;
          asked.push_back(id);
        }
        if (!batch.empty()) {
          ++stats.policy_batches;
          stats.policy_requests += static_cast<int64_t>(batch.size());
          asked_at = Clock::now();
          std::shared_ptr<Policy> p = policy;
          in_flight = std::async(std::launch::async, [p, b = std::move(batch)] { return p->act(b); });
          progressed = true;
        }
      }
      // 4. The environment's results.
      for (auto& step : pool->recv(0)) {
        auto& slot = slots[static_cast<size_t>(step.env_id)];
        if (slot) on_step(*slot, std::move(step.result));
        progressed = true;
      }
      if (progressed) continue;
      // Nothing to do: wait a little on whichever can move.
      if (pool->pending() > 0) {
        for (auto& step : pool->recv(1, std::chrono::milliseconds(in_flight.valid() ? 2 : 50))) {
          auto& slot = slots[static_cast<size_t>(step.env_id)];
          if (slot) on_step(*slot, std::move(step.result));
        }
      } else if (in_flight.valid()) {
        in_flight.wait_for(std::chrono::milliseconds(50));
      } else if (!all_done() && queue.empty() && !plan_group()) {
        // Nothing in flight, nothing queued, nothing left to plan.
        bool active = false;
        for (const auto& s : slots) active = active || s.has_value();
        if (!active) break;
      }
    }
    // Bounded: a receiver that went away must not hold the run forever; what
    // a stream sink could not deliver stays in its spool (its owner reports it).
    const auto flush_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.stream.flush_timeout_s * 1000));
    for (TrajectorySink* sink : sinks) stats.sinks_flushed = sink->flush(flush_timeout) && stats.sinks_flushed;
    stats.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    stats.mean_reward = stats.episodes_written ? reward_sum / stats.episodes_written : 0.0;
    return stats;
  }
};

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
  if (env_info.value("final", false)) {
    throw InputError(what + ": the episode ended at turn " + std::to_string(turn) + "; fork from an earlier turn");
  }
  impl_->forks.push_back({parent, turn});
  impl_->fork_sizes.push_back(n);
}

RolloutStats RolloutRunner::run() { return impl_->run(); }

}  // namespace kforge::rollout
