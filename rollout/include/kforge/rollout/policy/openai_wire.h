// The OpenAI chat-completions schema as KernelForge speaks it: the request
// body built from a PolicyRequest, and the bounded reading of a server's
// reply into a PolicyReply. No I/O here (openai_policy.h does the HTTP), so
// the parser is fuzzed on its own (fuzz/openai_response).
//
// The server is outside input: it may be buggy, hostile or not an LLM server
// at all. Every reply is checked for size and nesting depth before it is
// parsed, every field is type-checked, and whatever is wrong becomes an error
// string, never an exception that escapes or a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/core/document.h"
#include "kforge/rollout/policy/policy.h"

namespace kforge::rollout {

// What a reply may contain. Defaults fit the largest honest reply we expect
// (a 32k-token completion with per-token logprobs and top-5 alternatives is
// ~10 MB of JSON) with room to spare.
struct ResponseLimits {
  size_t max_bytes = 32u << 20;
  // An honest reply nests 6 levels (choices/message/tool_calls/function);
  // logprobs with top_logprobs 7.
  int max_depth = 32;
  // A policy that calls more tools than this in one turn is not a policy we
  // can act on (the env runs one action per turn).
  size_t max_tool_calls = 64;
};

// The parts of a request that are not in PolicyRequest: which model, and the
// server-specific extras.
struct ChatRequestOptions {
  std::string model;
  // "auto" | "required" | "none"; sent only when the request has tools.
  std::string tool_choice = "auto";
  bool logprobs = false;
  int top_logprobs = 0;  // 0: not sent
  // vLLM >= 0.10.2: "return_token_ids": true puts the completion's token ids
  // in choices[0].token_ids.
  bool return_token_ids = false;
  // Merged into the body last, so it can add server-specific parameters
  // (top_k, repetition_penalty, chat_template_kwargs, ...) or override ours.
  json extra_body = json::object();
};

// {"model", "messages", "tools"?, "tool_choice"?, "temperature", "top_p",
//  "max_tokens", "seed"?, "stop"?, "n": 1, "logprobs"?, "top_logprobs"?,
//  "return_token_ids"?, ...extra_body}
json build_chat_request(const PolicyRequest& request, const ChatRequestOptions& options);

// A successful reply's contents, or why there is none.
struct ChatResponse {
  std::string error;  // empty when the reply was usable
  PolicyReply reply;  // content, tool_calls, logprobs, token_ids, finish_reason
  std::string model;  // the "model" the server reported
  // {"prompt_tokens", "completion_tokens", "total_tokens"} when reported.
  json usage = nullptr;
};

// Parses a 2xx body. Content may be null (tool calls only); tool calls are
// normalized to the OpenAI envelope ({"id", "type": "function", "function":
// {"name", "arguments": "<json text>"}}; object arguments are serialized, a
// missing id becomes "call_<index>"). Logprobs come from
// choices[0].logprobs.content[*].logprob; token ids from choices[0].token_ids
// (vLLM), the top-level "response_token_ids", or "token_id:<n>" tokens
// (vLLM's return_tokens_as_token_ids). An "error" object in a 2xx body is an
// error.
ChatResponse parse_chat_response(std::string_view body, const ResponseLimits& limits = {});

// The message of an error body ({"error": {"message", "type", "code"}},
// vLLM's {"object": "error", "message"}, or plain text), cut to `max_chars`,
// for error strings. Never throws.
std::string error_body_message(std::string_view body, size_t max_chars = 300);

// "" when `text` is one JSON value no deeper than `max_depth` levels of
// arrays/objects (counted without recursion), else why not. Runs before the
// real parser so that nothing deep reaches it.
std::string check_json_depth(std::string_view text, int max_depth);

}  // namespace kforge::rollout
