// What a rollout worker asks a policy, and what it gets back (docs/architecture.md#rollouts).
//
// Three policies implement this interface: a trainer-served policy over
// ZeroMQ (the trainer holds the model and answers batches), an
// OpenAI-compatible chat-completions endpoint over HTTP (vLLM, SGLang), and a
// built-in template policy (template kernels with mutations) that needs no
// model. Workers batch requests across the episodes they run, so a policy
// sees as many requests at once as there are episodes waiting for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge::rollout {

struct SamplingParams {
  double temperature = 1.0;
  double top_p = 1.0;
  int max_tokens = 4096;
  std::optional<uint64_t> seed;  // per request; absent: the policy's own
  std::vector<std::string> stop;
};

struct PolicyRequest {
  // Unique per episode; stable across its turns (a policy may keep a KV
  // cache keyed on it).
  std::string episode_id;
  int turn = 0;
  std::string task_id;
  // OpenAI chat messages so far: [{"role": "system"|"user"|"assistant"|"tool",
  // "content", "tool_calls"?, "tool_call_id"?}, ...].
  json messages = json::array();
  // OpenAI tool definitions (env::Toolset::definitions()).
  json tools = json::array();
  SamplingParams sampling;
  // The task itself (TaskSpec JSON) for policies that reason on the graph
  // rather than the text (the template policy); others ignore it.
  json task = nullptr;
};

struct PolicyReply {
  // The assistant message's text (may be empty when it only calls tools).
  std::string content;
  // OpenAI-style tool calls: [{"id", "type": "function", "function":
  // {"name", "arguments": "<json text>"}}]. Raw: the environment decodes them,
  // and a malformed one is the policy's error, shown to it as an observation.
  json tool_calls = json::array();
  // Carried into the trajectory untouched when the policy provides them.
  std::optional<std::vector<int64_t>> token_ids;
  std::optional<std::vector<double>> logprobs;
  // The weights that produced this reply (trainer step, checkpoint name).
  std::string policy_version;
  std::string finish_reason;  // "stop", "tool_calls", "length", ...
  // Set when the policy could not answer this request (timeout after retries,
  // a server error); the episode is then truncated, not scored as the
  // policy's failure.
  std::string error;
  double latency_ms = 0.0;
  // Token counts when the policy reports them: {"prompt_tokens",
  // "completion_tokens", "total_tokens"}; null otherwise.
  json usage = nullptr;
};

class Policy {
 public:
  virtual ~Policy() = default;
  // One reply per request, in request order. Never throws for a failed
  // request: its reply carries `error`. Thread-safe: workers may call it from
  // several threads.
  virtual std::vector<PolicyReply> act(const std::vector<PolicyRequest>& requests) = 0;
  // A short description for logs and trajectories ("zmq tcp://...", "openai
  // http://.../v1 model=...", "template mode=cpp explore_turns=2 seed=3").
  virtual std::string describe() const = 0;
};

json to_json(const SamplingParams& p);
json to_json(const PolicyRequest& r);
json to_json(const PolicyReply& r);

// The same objects read back (the policy protocol, trainer_bridge/POLICY.md,
// and trajectories). InputError naming the field for wrong types, unknown
// keys and out-of-range values; strings must be valid UTF-8.
SamplingParams sampling_params_from_field(const Field& field);
PolicyRequest policy_request_from_field(const Field& field);
PolicyReply policy_reply_from_field(const Field& field);
// A reply's `usage`: {"prompt_tokens", "completion_tokens", "total_tokens"},
// each an integer >= 0 or absent; other keys are errors.
json usage_from_field(const Field& field);

}  // namespace kforge::rollout
