#include "kforge/rollout/trajectory_info.h"

#include <limits>
#include <utility>

#include "kforge/core/error.h"
#include "kforge/core/solution.h"

namespace kforge::rollout {
namespace {

double number(const Field& f) {
  if (!f.value().is_number()) f.fail("a number");
  return f.value().get<double>();
}

int integer(const Field& f) {
  return static_cast<int>(f.as_int_in(std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

uint64_t unsigned_integer(const Field& f) {
  if (f.value().is_number_unsigned()) return f.value().get<uint64_t>();
  if (f.value().is_number_integer() && f.value().get<int64_t>() >= 0) return f.value().get<uint64_t>();
  f.fail("a non-negative integer");
}

json object_value(const Field& f) {
  f.as_object();
  return f.value();
}

json array_value(const Field& f) {
  f.as_array();
  return f.value();
}

PolicyTurnInfo policy_turn_from(const Field& f) {
  PolicyTurnInfo p;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("version")) p.version = v->as_string();
  if (auto v = r.optional("finish_reason")) p.finish_reason = v->as_string();
  if (auto v = r.optional("latency_ms")) p.latency_ms = number(*v);
  if (auto v = r.optional("token_ids")) {
    p.token_ids.emplace();
    for (const Field& id : v->as_array()) p.token_ids->push_back(id.as_int());
  }
  if (auto v = r.optional("logprobs")) {
    p.logprobs.emplace();
    for (const Field& lp : v->as_array()) {
      p.logprobs->push_back(lp.value().is_null() ? std::numeric_limits<double>::quiet_NaN() : number(lp));
    }
  }
  if (auto v = r.optional("usage")) p.usage = object_value(*v);
  return p;
}

TurnState turn_state_from(const Field& f) {
  TurnState s;
  ObjectReader r = f.as_object();
  s.turns_used = integer(r.required("turns_used"));
  s.time_used_s = number(r.required("time_used_s"));
  s.compile_errors = integer(r.required("compile_errors"));
  s.episode_return = number(r.required("episode_return"));
  if (auto v = r.optional("solution_turn")) s.solution_turn = integer(*v);
  return s;
}

env::Exemplar exemplar_from(const Field& f) {
  env::Exemplar e;
  ObjectReader r = f.as_object();
  e.speedup_eager = number(r.required("speedup_eager"));
  if (auto v = r.optional("note")) e.note = v->as_string();
  const Field solution = r.required("solution");
  solution.as_object();
  e.solution = parse_solution(Document::from_value(solution.value(), f.document().where(solution.pointer())));
  return e;
}

EpisodeEnvInfo env_info_from(const Field& f) {
  EpisodeEnvInfo e;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("backend")) e.backend = v->as_string();
  if (auto v = r.optional("solution_mode")) e.solution_mode = v->as_string();
  if (auto v = r.optional("budgets")) e.budgets = object_value(*v);
  if (auto v = r.optional("reward")) e.reward = object_value(*v);
  return e;
}

EpisodeTimings timings_from(const Field& f) {
  EpisodeTimings t;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("reset_ms")) t.reset_ms = number(*v);
  if (auto v = r.optional("episode_ms")) t.episode_ms = number(*v);
  if (auto v = r.optional("policy_ms")) t.policy_ms = number(*v);
  if (auto v = r.optional("env_step_ms")) t.env_step_ms = number(*v);
  return t;
}

GroupInfo group_from(const Field& f) {
  GroupInfo g;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("id")) g.id = v->as_string();
  if (auto v = r.optional("size")) g.size = integer(*v);
  if (auto v = r.optional("index")) g.index = unsigned_integer(*v);
  if (auto v = r.optional("rewards")) g.rewards = array_value(*v);
  if (auto v = r.optional("advantage")) g.advantage = number(*v);
  if (auto v = r.optional("normalization")) g.normalization = v->as_string();
  if (auto v = r.optional("members_normalized")) g.members_normalized = unsigned_integer(*v);
  return g;
}

ForkInfo fork_from(const Field& f) {
  ForkInfo k;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("parent")) k.parent = v->as_string();
  if (auto v = r.optional("parent_group")) k.parent_group = v->as_string();
  if (auto v = r.optional("turn")) k.turn = integer(*v);
  return k;
}

// info.prompt: {"messages", "tools"}.
void prompt_from(const Field& f, TrajectoryInfo& t) {
  ObjectReader r = f.as_object();
  if (auto v = r.optional("messages")) t.prompt_messages = array_value(*v);
  if (auto v = r.optional("tools")) t.prompt_tools = array_value(*v);
}

}  // namespace

TaskSpec TrajectoryInfo::task_spec(const std::string& where) const {
  if (!task.is_object())
    throw InputError(where + ": info.task is missing (trajectories written by kforge rollout have it)");
  return parse_task(Document::from_value(task, where + " info.task"));
}

json to_json(const PolicyTurnInfo& p) {
  json j = {{"version", p.version}, {"finish_reason", p.finish_reason}, {"latency_ms", p.latency_ms}};
  if (p.token_ids) j["token_ids"] = *p.token_ids;
  if (p.logprobs) j["logprobs"] = *p.logprobs;
  if (p.usage) j["usage"] = *p.usage;
  return j;
}

json to_json(const TurnState& s) {
  return {{"turns_used", s.turns_used},
          {"time_used_s", s.time_used_s},
          {"compile_errors", s.compile_errors},
          {"episode_return", s.episode_return},
          {"solution_turn", s.solution_turn}};
}

json to_json(const TurnInfo& t) {
  json j = json::object();
  if (t.env) j["env"] = env::to_json(*t.env);
  if (t.policy) j["policy"] = to_json(*t.policy);
  if (t.state) j["state"] = to_json(*t.state);
  return j;
}

json to_json(const env::Exemplar& e) {
  return {{"speedup_eager", e.speedup_eager}, {"note", e.note}, {"solution", to_json(e.solution)}};
}

json to_json(const TrajectoryInfo& t) {
  json exemplars = json::array();
  for (const auto& e : t.exemplars) exemplars.push_back(to_json(e));
  json j = {{"run_id", t.run_id},
            {"sampling_seed", t.sampling_seed},
            {"task", t.task},
            {"exemplars", exemplars},
            {"policy", t.policy}};
  if (t.seed) j["seed"] = *t.seed;
  if (t.prompt_messages) j["prompt"] = {{"messages", *t.prompt_messages}, {"tools", t.prompt_tools}};
  if (t.env) {
    j["env"] = {{"backend", t.env->backend},
                {"solution_mode", t.env->solution_mode},
                {"budgets", t.env->budgets},
                {"reward", t.env->reward}};
  }
  if (t.usage) j["usage"] = *t.usage;
  if (t.policy_error) j["policy_error"] = *t.policy_error;
  if (t.truncation_reason) j["truncation_reason"] = *t.truncation_reason;
  if (t.timings) {
    j["timings"] = {{"reset_ms", t.timings->reset_ms},
                    {"episode_ms", t.timings->episode_ms},
                    {"policy_ms", t.timings->policy_ms},
                    {"env_step_ms", t.timings->env_step_ms}};
  }
  if (t.group) {
    const GroupInfo& g = *t.group;
    j["group"] = {{"id", g.id},
                  {"size", g.size},
                  {"index", g.index},
                  {"rewards", g.rewards},
                  {"advantage", g.advantage ? json(*g.advantage) : json(nullptr)},
                  {"normalization", g.normalization},
                  {"members_normalized", g.members_normalized}};
  }
  if (t.fork) j["fork"] = {{"parent", t.fork->parent}, {"parent_group", t.fork->parent_group}, {"turn", t.fork->turn}};
  return j;
}

TurnInfo turn_info_from_json(const json& j, const std::string& where) {
  const Document doc = Document::from_value(j, where);
  ObjectReader r = doc.root_object();
  TurnInfo t;
  if (auto v = r.optional("env")) t.env = env::step_info_from(*v);
  if (auto v = r.optional("policy")) t.policy = policy_turn_from(*v);
  if (auto v = r.optional("state")) t.state = turn_state_from(*v);
  return t;
}

TrajectoryInfo trajectory_info_from_json(const json& j, const std::string& where) {
  const Document doc = Document::from_value(j, where);
  ObjectReader r = doc.root_object();
  TrajectoryInfo t;
  if (auto v = r.optional("run_id")) t.run_id = v->as_string();
  if (auto v = r.optional("seed")) t.seed = unsigned_integer(*v);
  if (auto v = r.optional("sampling_seed")) t.sampling_seed = unsigned_integer(*v);
  if (auto v = r.optional("task")) t.task = object_value(*v);
  if (auto v = r.optional("exemplars")) {
    for (const Field& e : v->as_array()) t.exemplars.push_back(exemplar_from(e));
  }
  if (auto v = r.optional("prompt")) prompt_from(*v, t);
  if (auto v = r.optional("env")) t.env = env_info_from(*v);
  if (auto v = r.optional("policy")) t.policy = v->as_string();
  if (auto v = r.optional("usage")) t.usage = object_value(*v);
  if (auto v = r.optional("policy_error")) t.policy_error = v->as_string();
  if (auto v = r.optional("truncation_reason")) t.truncation_reason = v->as_string();
  if (auto v = r.optional("timings")) t.timings = timings_from(*v);
  if (auto v = r.optional("group")) t.group = group_from(*v);
  if (auto v = r.optional("fork")) t.fork = fork_from(*v);
  return t;
}

}  // namespace kforge::rollout
