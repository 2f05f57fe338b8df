// OpenAiPolicy: a Policy served by an OpenAI-compatible chat-completions
// endpoint over HTTP (vLLM, SGLang, TGI, a hosted API), through libcurl.
//
//   OpenAiPolicyConfig c;
//   c.base_url = "http://127.0.0.1:8000/v1";
//   c.model = "Qwen/Qwen2.5-Coder-7B-Instruct";
//   OpenAiPolicy policy(c);
//   std::vector<PolicyReply> replies = policy.act(requests);  // one POST each, concurrently
//
// Each request is one POST {base_url}/chat/completions (openai_wire.h for the
// body and the reply). A batch runs concurrently on one curl multi handle, at
// most `max_concurrency` transfers at a time across all threads calling act().
// Failures are per request and never throw: connection errors, timeouts, 408,
// 429 and 5xx are retried with exponential backoff and jitter (429/503 wait at
// least what Retry-After says); other 4xx, malformed or oversized replies fail
// at once. A request that still fails has `error` set, and the worker
// truncates that episode without scoring it as the policy's failure.
// docs/policies.md describes the configuration.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/rollout/policy/openai_wire.h"
#include "kforge/rollout/policy/policy.h"

namespace kforge::rollout {

struct OpenAiPolicyConfig {
  // The API root; requests go to <base_url>/chat/completions. http or https.
  std::string base_url = "http://127.0.0.1:8000/v1";
  std::string model;  // required: the served model's name
  // Environment variable holding the API key, sent as "Authorization: Bearer
  // <key>". Unset in the config: OPENAI_API_KEY if it is set, else no header
  // (local vLLM/SGLang servers need none). Set in the config: the variable
  // must exist (a missing key is a configuration error, reported at start).
  std::optional<std::string> api_key_env;
  // The policy_version put on every reply; empty: the "model" the server
  // reports (a trainer that hot-swaps weights should set it per checkpoint).
  std::string policy_version;

  double connect_timeout_s = 10.0;
  // One attempt, from connect to the last byte of the reply. Generous: a long
  // completion on a busy server takes minutes.
  double timeout_s = 600.0;
  int max_retries = 4;  // attempts = 1 + max_retries
  // Backoff before retry k (0-based): min(max, initial * 2^k), then a uniform
  // random share between 50% and 100% of it, so that a batch that failed
  // together does not come back together.
  double backoff_initial_s = 0.5;
  double backoff_max_s = 30.0;
  // A Retry-After longer than this fails the request instead of waiting.
  double max_retry_after_s = 120.0;
  // Transfers in flight at once, across every act() call on this policy.
  int max_concurrency = 64;

  ChatRequestOptions request;  // model is copied from `model`
  ResponseLimits limits;
  // Extra request headers (e.g. a routing key for a gateway).
  std::map<std::string, std::string> headers;
};

// Reads the `policy` section of a rollout config:
//   {kind: openai, base_url, model, api_key_env, policy_version,
//    connect_timeout_s, timeout_s, max_retries, backoff_initial_s,
//    backoff_max_s, max_retry_after_s, max_concurrency, tool_choice,
//    logprobs, top_logprobs, return_token_ids, extra_body, headers,
//    max_response_bytes, max_response_depth, max_tool_calls}
// Every number is bounded; errors name the field. `kind`, when present, must
// be "openai". Keys in `handled_by_caller` (the rollout config's shared
// `sampling`, say) are left to the caller; any other key is an error.
OpenAiPolicyConfig parse_openai_policy_config(const Field& section,
                                              const std::vector<std::string>& handled_by_caller = {"sampling"});
json to_json(const OpenAiPolicyConfig& config);  // without the key itself

class OpenAiPolicy : public Policy {
 public:
  // InputError for a config that cannot work (no model, a bad URL, a named
  // API key variable that is not set).
  explicit OpenAiPolicy(OpenAiPolicyConfig config);
  ~OpenAiPolicy() override;
  OpenAiPolicy(const OpenAiPolicy&) = delete;
  OpenAiPolicy& operator=(const OpenAiPolicy&) = delete;

  std::vector<PolicyReply> act(const std::vector<PolicyRequest>& requests) override;
  std::string describe() const override;

  const OpenAiPolicyConfig& config() const { return config_; }

 private:
  struct Engine;
  OpenAiPolicyConfig config_;
  std::unique_ptr<Engine> engine_;
};

// The wait before retry `retry` (0-based) as documented on
// OpenAiPolicyConfig, with `unit` in [0, 1) the random draw. Exposed for tests.
double backoff_seconds(const OpenAiPolicyConfig& config, int retry, double unit);

// Whether an HTTP status is worth retrying: 408, 425, 429 and 5xx.
bool retryable_status(long status);

}  // namespace kforge::rollout
