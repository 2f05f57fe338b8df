// The rollout loop (runner_impl.h): fill free env slots, collect the
// policy's batch, ask the policy for everyone waiting, collect the
// environment's steps; each reply becomes a tool call, each step a turn.
#include <chrono>
#include <future>

#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "runner_impl.h"

namespace kforge::rollout {

RolloutStats RolloutRunner::Impl::run() {
  const auto t0 = Clock::now();
  groups_planned = !forks.empty() ? static_cast<int>(forks.size())
                                  : (config.groups > 0 ? config.groups : static_cast<int>(tasks.size()));
  PolicyBatch batch;
  while (!all_done()) {
    fill_free_slots();
    bool progressed = take_policy_replies(batch);
    progressed = ask_policy(batch) || progressed;
    progressed = take_env_steps(std::chrono::milliseconds(0)) || progressed;
    if (progressed) continue;
    // Nothing to do: wait a little on whichever can move.
    if (pool->pending() > 0) {
      take_env_steps(std::chrono::milliseconds(batch.replies.valid() ? 2 : 50));
    } else if (batch.replies.valid()) {
      batch.replies.wait_for(std::chrono::milliseconds(50));
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

// 1. Free env slots get the next planned episodes.
bool RolloutRunner::Impl::fill_free_slots() {
  bool started = false;
  for (int id = 0; id < config.concurrency; ++id) {
    if (slots[static_cast<size_t>(id)]) continue;
    if (queue.empty() && !plan_group()) break;
    if (queue.empty()) break;
    const Spec spec = queue.front();
    queue.pop_front();
    start(spec, id);
    started = true;
  }
  return started;
}

// 2. The policy's answers, once its batch is done; a failed batch or one of
// the wrong size is an error reply for each episode it asked for.
bool RolloutRunner::Impl::take_policy_replies(PolicyBatch& batch) {
  if (!batch.replies.valid() || batch.replies.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    return false;
  }
  std::vector<PolicyReply> replies;
  const double batch_ms = ms_since(batch.asked_at);
  stats.policy_ms += batch_ms;
  try {
    replies = batch.replies.get();
  } catch (const std::exception& e) {
    replies.assign(batch.asked.size(), PolicyReply{});
    for (auto& r : replies) r.error = std::string("the policy failed: ") + e.what();
  }
  if (replies.size() != batch.asked.size()) {
    const std::string why = "the policy returned " + std::to_string(replies.size()) + " replies for " +
                            std::to_string(batch.asked.size()) + " requests";
    replies.assign(batch.asked.size(), PolicyReply{});
    for (auto& r : replies) r.error = why;
  }
  for (size_t i = 0; i < batch.asked.size(); ++i) {
    auto& slot = slots[static_cast<size_t>(batch.asked[i])];
    if (slot) on_reply(*slot, std::move(replies[i]), batch_ms);
  }
  batch.asked.clear();
  return true;
}

// 3. Ask the policy for everyone waiting (one batch in flight at a time);
// an episode past its wall time ends instead.
bool RolloutRunner::Impl::ask_policy(PolicyBatch& batch) {
  if (batch.replies.valid()) return false;
  bool progressed = false;
  std::vector<PolicyRequest> requests;
  for (int id = 0; id < config.concurrency; ++id) {
    auto& slot = slots[static_cast<size_t>(id)];
    if (!slot || slot->state != State::kNeedPolicy) continue;
    if (config.wall_time_s > 0 && ms_since(slot->started) > config.wall_time_s * 1000.0) {
      finish(*slot, false, "wall_time");
      progressed = true;
      continue;
    }
    requests.push_back(request_for(*slot));
    slot->state = State::kPolicy;
    batch.asked.push_back(id);
  }
  if (requests.empty()) return progressed;
  ++stats.policy_batches;
  stats.policy_requests += static_cast<int64_t>(requests.size());
  batch.asked_at = Clock::now();
  std::shared_ptr<Policy> p = policy;
  batch.replies = std::async(std::launch::async, [p, b = std::move(requests)] { return p->act(b); });
  return true;
}

// 4. The environment's results, waiting up to `wait` for the first.
bool RolloutRunner::Impl::take_env_steps(std::chrono::milliseconds wait) {
  bool progressed = false;
  for (auto& step : wait.count() > 0 ? pool->recv(1, wait) : pool->recv(0)) {
    auto& slot = slots[static_cast<size_t>(step.env_id)];
    if (slot) on_step(*slot, std::move(step.result));
    progressed = true;
  }
  return progressed;
}

bool RolloutRunner::Impl::all_done() const {
  if (static_cast<int>(groups.size()) < groups_planned) return false;
  if (!queue.empty()) return false;
  for (const auto& s : slots) {
    if (s) return false;
  }
  return true;
}

// --- the policy --------------------------------------------------------------

PolicyRequest RolloutRunner::Impl::request_for(const Episode& ep) const {
  PolicyRequest r;
  r.episode_id = ep.traj.id;
  r.turn = static_cast<int>(ep.traj.turns.size());
  r.task_id = ep.traj.task_id;
  r.messages = ep.messages;
  r.tools = ep.tools;
  r.sampling = config.policy.sampling;
  if (!r.sampling.seed) r.sampling.seed = ep.sampling_seed;
  r.task = ep.info.task;
  return r;
}

// A reply's token counts go to its turn (turns[i].info.policy.usage) and
// add up over the episode in info.usage, so a trainer can budget tokens
// per trajectory without summing turns.
void RolloutRunner::Impl::add_usage(Episode& ep, const json& usage) {
  ep.policy_meta.usage = usage;
  if (!ep.info.usage) ep.info.usage = json::object();
  json& total = *ep.info.usage;
  for (auto it = usage.begin(); it != usage.end(); ++it) {
    if (!it.value().is_number_integer()) continue;
    total[it.key()] = total.value(it.key(), int64_t{0}) + it.value().get<int64_t>();
  }
}

void RolloutRunner::Impl::note_version(Episode& ep, const std::string& version) {
  if (!version.empty()) {
    const auto v = as_integer(version), n = as_integer(newest_version);
    if (newest_version.empty() || !(v && n) || *v > *n) newest_version = version;
  }
  if (!ep.have_version && ep.traj.policy_version_start.empty()) ep.traj.policy_version_start = version;
  ep.have_version = true;
  ep.traj.policy_version_end = version;
}

void RolloutRunner::Impl::on_reply(Episode& ep, PolicyReply reply, double batch_ms) {
  note_version(ep, reply.policy_version);
  ep.policy_ms = reply.latency_ms > 0 ? reply.latency_ms : batch_ms;
  ep.policy_total_ms += ep.policy_ms;
  ep.policy_meta = PolicyTurnInfo{};
  ep.policy_meta.version = reply.policy_version;
  ep.policy_meta.finish_reason = reply.finish_reason;
  ep.policy_meta.latency_ms = ep.policy_ms;
  ep.policy_meta.token_ids = std::move(reply.token_ids);
  ep.policy_meta.logprobs = std::move(reply.logprobs);
  if (!reply.usage.is_null()) add_usage(ep, reply.usage);
  if (!reply.error.empty()) {
    ++stats.policy_errors;
    ep.info.policy_error = reply.error;
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

// --- the environment ---------------------------------------------------------

bool RolloutRunner::Impl::supplies_solution(const json& call, const env::StepInfo& info) const {
  if (info.error && info.error->kind != env::StepErrorKind::kSystem) return false;
  try {
    return pool->tools().decode(call).solution.has_value();
  } catch (const InputError&) {
    return false;
  }
}

json RolloutRunner::Impl::turn_messages(const Episode& ep, const Observation& observation) const {
  json messages = json::array({ep.assistant});
  if (ep.call_id.empty()) {
    messages.push_back({{"role", "user"}, {"content", observation.text}});
  } else {
    messages.push_back({{"role", "tool"}, {"tool_call_id", ep.call_id}, {"content", observation.text}});
  }
  for (const auto& extra : ep.extra_calls) {
    messages.push_back({{"role", "tool"},
                        {"tool_call_id", extra.is_object() ? extra.value("id", std::string()) : ""},
                        {"content", "Not run: one tool call is executed per turn; call it again next turn."}});
  }
  return messages;
}

void RolloutRunner::Impl::on_step(Episode& ep, env::StepResult result) {
  ++stats.steps;
  env::StepInfo& info = result.info;
  stats.env_step_ms += info.timings.step_ms;
  ep.env_total_ms += info.timings.step_ms;
  const int turn = static_cast<int>(ep.traj.turns.size());
  Turn t;
  t.messages = turn_messages(ep, result.observation);
  t.action = ep.call;
  t.observation = std::move(result.observation);
  t.reward = result.reward;
  t.reward_components = info.reward_components.to_json();
  t.timings = env::to_json(info.timings);
  t.timings["policy_ms"] = ep.policy_ms;
  if (supplies_solution(ep.call, info)) ep.solution_turn = turn;
  info.tool_call = nullptr;  // the turn's action
  TurnInfo ti;
  ti.policy = ep.policy_meta;
  ti.state = TurnState{info.budget.turns_used, info.budget.time_used_s, info.budget.compile_errors, info.episode_return,
                       ep.solution_turn};
  const std::string truncation = info.truncation_reason.empty() ? "budget" : info.truncation_reason;
  ti.env = std::move(info);
  for (const auto& m : t.messages) ep.messages.push_back(m);
  ep.traj.turns.push_back(std::move(t));
  ep.turn_info.push_back(std::move(ti));
  if (result.terminated || result.truncated) {
    finish(ep, result.terminated, result.truncated ? truncation : "");
    return;
  }
  ep.state = State::kNeedPolicy;
}

}  // namespace kforge::rollout
