#include "kforge/rollout/policy.h"

namespace kforge::rollout {

json to_json(const SamplingParams& p) {
  json j = {{"temperature", p.temperature}, {"top_p", p.top_p}, {"max_tokens", p.max_tokens}, {"stop", p.stop}};
  if (p.seed) j["seed"] = *p.seed;
  return j;
}

json to_json(const PolicyRequest& r) {
  return {{"episode_id", r.episode_id},
          {"turn", r.turn},
          {"task_id", r.task_id},
          {"messages", r.messages},
          {"tools", r.tools},
          {"sampling", to_json(r.sampling)},
          {"task", r.task}};
}

json to_json(const PolicyReply& r) {
  json j = {{"content", r.content},
            {"tool_calls", r.tool_calls},
            {"policy_version", r.policy_version},
            {"finish_reason", r.finish_reason},
            {"latency_ms", r.latency_ms}};
  if (r.token_ids) j["token_ids"] = *r.token_ids;
  if (r.logprobs) j["logprobs"] = *r.logprobs;
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.usage.is_null()) j["usage"] = r.usage;
  return j;
}

}  // namespace kforge::rollout
