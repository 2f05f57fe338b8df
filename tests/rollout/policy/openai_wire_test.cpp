// The chat-completions schema without I/O: request bodies, the bounded reply
// parser, error bodies, and the policy's config section.
#include "kforge/rollout/policy/openai_wire.h"

#include <gtest/gtest.h>

#include "kforge/core/error.h"

#ifdef KFORGE_HAVE_CURL
#include "kforge/rollout/policy/openai_policy.h"
#endif

namespace kforge::rollout {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

json reply_json(json message, json extra = json::object()) {
  json choice = {{"index", 0}, {"message", std::move(message)}, {"finish_reason", "stop"}};
  for (auto& [k, v] : extra.items()) choice[k] = v;
  return {{"model", "m"}, {"choices", json::array({choice})}};
}

TEST(OpenAiWireTest, RequestBodyOmitsWhatWasNotAskedFor) {
  PolicyRequest r;
  r.messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  ChatRequestOptions o;
  o.model = "m";
  const json body = build_chat_request(r, o);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["n"], 1);
  for (const char* key : {"tools", "tool_choice", "seed", "stop", "logprobs", "top_logprobs", "return_token_ids"}) {
    EXPECT_FALSE(body.contains(key)) << key;
  }
}

TEST(OpenAiWireTest, ExtraBodyIsMergedLast) {
  PolicyRequest r;
  ChatRequestOptions o;
  o.model = "m";
  o.extra_body = {{"temperature", 0.0}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
  const json body = build_chat_request(r, o);
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.0);
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], false);
}

TEST(OpenAiWireTest, ParsesContentFinishReasonAndUsage) {
  json j = reply_json({{"role", "assistant"}, {"content", "ok"}});
  j["usage"] = {{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}};
  const ChatResponse r = parse_chat_response(j.dump());
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.reply.content, "ok");
  EXPECT_EQ(r.reply.finish_reason, "stop");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.usage["total_tokens"], 5);
  EXPECT_FALSE(r.reply.logprobs.has_value());
  EXPECT_FALSE(r.reply.token_ids.has_value());
}

TEST(OpenAiWireTest, NullContentWithToolCalls) {
  const json calls = json::array({{{"id", "a"}, {"function", {{"name", "submit"}, {"arguments", nullptr}}}}});
  const ChatResponse r = parse_chat_response(reply_json({{"content", nullptr}, {"tool_calls", calls}}).dump());
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.reply.content, "");
  ASSERT_EQ(r.reply.tool_calls.size(), 1u);
  EXPECT_EQ(r.reply.tool_calls[0]["type"], "function");
  EXPECT_EQ(r.reply.tool_calls[0]["function"]["arguments"], "{}");
}

TEST(OpenAiWireTest, ToolCallLimit) {
  json calls = json::array();
  for (int i = 0; i < 5; ++i) calls.push_back({{"function", {{"name", "compile"}, {"arguments", "{}"}}}});
  ResponseLimits limits;
  limits.max_tool_calls = 4;
  const ChatResponse r = parse_chat_response(reply_json({{"tool_calls", calls}}).dump(), limits);
  EXPECT_TRUE(has(r.error, "5 tool calls, more than the limit of 4")) << r.error;
}

TEST(OpenAiWireTest, TopLevelResponseTokenIds) {
  json j = reply_json({{"content", "x"}});
  j["response_token_ids"] = {5, 6};
  const ChatResponse r = parse_chat_response(j.dump());
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(*r.reply.token_ids, (std::vector<int64_t>{5, 6}));
}

TEST(OpenAiWireTest, MixedTokenTextGivesNoTokenIds) {
  const json lp = {{"content", {{{"token", "token_id:4"}, {"logprob", -1.0}}, {{"token", "hi"}, {"logprob", -2.0}}}}};
  const ChatResponse r = parse_chat_response(reply_json({{"content", "x"}}, {{"logprobs", lp}}).dump());
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.reply.logprobs->size(), 2u);
  EXPECT_FALSE(r.reply.token_ids.has_value()) << "ids for some tokens only would misalign with the logprobs";
}

TEST(OpenAiWireTest, SchemaErrorsNameTheField) {
  struct Case {
    std::string body;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"[]", "field /: expected an object, got an array"},
      {"{}", "field /choices: expected an array, got null"},
      {R"({"choices": [5]})", "field /choices/0: expected an object, got a number"},
      {R"({"choices": [{"message": {"content": "x"}, "finish_reason": 3}]})", "/choices/0/finish_reason"},
      {R"({"choices": [{"message": {"content": "x"}, "token_ids": [1, "a"]}]})", "/choices/0/token_ids/1"},
      {R"({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"logprob": "a"}]}}]})",
       "/choices/0/logprobs/content/0/logprob"},
      {R"({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"logprob": 3.5}]}}]})", "a number <= 0"},
      {R"({"choices": [{"message": {"content": "x"}}], "usage": {"total_tokens": -1}})", "/usage/total_tokens"},
      {R"({"choices": [{"message": {"tool_calls": [{"function": {"name": "a", "arguments": 5}}]}}]})",
       "/choices/0/message/tool_calls/0/function/arguments"},
      {R"({"error": {"message": "bad things"}})", "the server answered with an error: bad things"},
      {"", "not valid JSON"},
      {"{\"choices\": [", "not valid JSON"},
      {"{\"a\": \"\xff\"}", "not valid JSON"},
  };
  for (const auto& c : cases) {
    const ChatResponse r = parse_chat_response(c.body);
    EXPECT_TRUE(has(r.error, c.expected)) << c.body << " -> " << r.error;
    EXPECT_TRUE(r.reply.tool_calls.empty());
  }
}

// Found by fuzz/openai_response: the parser's message quoted the invalid byte,
// and the error string could not be serialized into a trajectory.
TEST(OpenAiWireTest, ParseErrorsNeverCarryRawBytes) {
  const ChatResponse r = parse_chat_response("{\"usage\": {\"completion_tokens\": 3\x9e}}");
  EXPECT_TRUE(has(r.error, "not valid JSON")) << r.error;
  EXPECT_NO_THROW(json(r.error).dump());
}

TEST(OpenAiWireTest, SizeAndDepthAreCheckedBeforeParsing) {
  ResponseLimits limits;
  limits.max_bytes = 100;
  EXPECT_TRUE(
      has(parse_chat_response(std::string(101, ' '), limits).error, "101 bytes is larger than the limit of 100"));
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_TRUE(has(parse_chat_response(deep).error, "nested deeper than 32 levels at byte 32"));
  // Brackets inside strings do not count.
  EXPECT_EQ(check_json_depth(R"({"a": "[[[[[[[[[[[[\"[[[["})", 2), "");
  EXPECT_NE(check_json_depth("[[[", 2), "");
}

TEST(OpenAiWireTest, ErrorBodyMessagesAreOneBoundedValidLine) {
  EXPECT_EQ(error_body_message(R"({"error": {"message": "line one\nline two"}})"), "line one line two");
  EXPECT_EQ(error_body_message(R"({"detail": "Not Found"})"), "Not Found");
  EXPECT_EQ(error_body_message(R"({"error": "plain"})"), "plain");
  EXPECT_EQ(error_body_message("<html>\x01\xff</html>"),
            "<html>?"
            "?</html>");
  const std::string cut = error_body_message(std::string(1000, 'a'), 10);
  EXPECT_EQ(cut, "aaaaaaaaaa...");
  // A multi-byte character at the cut is not split.
  const std::string utf8 = error_body_message(R"({"error": {"message": "abcdefghi\u00e9z"}})", 10);
  EXPECT_EQ(utf8, "abcdefghi...");
  EXPECT_NO_THROW(json(utf8).dump());
}

#ifdef KFORGE_HAVE_CURL
OpenAiPolicyConfig parse_config(const std::string& yaml) {
  const Document doc = Document::from_yaml_text(yaml, "rollout.yaml");
  return parse_openai_policy_config(Field(doc, doc.root, ""));
}

TEST(OpenAiConfigTest, ReadsEveryField) {
  const OpenAiPolicyConfig c = parse_config(R"(
kind: openai
base_url: http://gpu-node:8000/v1/
model: Qwen/Qwen2.5-Coder-7B-Instruct
api_key_env: MY_KEY
policy_version: step-3
connect_timeout_s: 2
timeout_s: 120
max_retries: 6
backoff_initial_s: 0.25
backoff_max_s: 8
max_retry_after_s: 30
max_concurrency: 128
tool_choice: required
logprobs: true
top_logprobs: 5
return_token_ids: true
extra_body: {top_k: 20}
headers: {X-Route: rl}
max_response_bytes: 1048576
max_response_depth: 40
max_tool_calls: 8
)");
  EXPECT_EQ(c.base_url, "http://gpu-node:8000/v1") << "trailing slash dropped";
  EXPECT_EQ(c.model, "Qwen/Qwen2.5-Coder-7B-Instruct");
  EXPECT_EQ(c.request.model, c.model);
  EXPECT_EQ(*c.api_key_env, "MY_KEY");
  EXPECT_EQ(c.max_retries, 6);
  EXPECT_EQ(c.max_concurrency, 128);
  EXPECT_EQ(c.request.tool_choice, "required");
  EXPECT_TRUE(c.request.return_token_ids);
  EXPECT_EQ(c.request.extra_body["top_k"], 20);
  EXPECT_EQ(c.headers.at("X-Route"), "rl");
  EXPECT_EQ(c.limits.max_bytes, 1048576u);
  EXPECT_EQ(c.limits.max_tool_calls, 8u);
  const json described = to_json(c);
  EXPECT_EQ(described["headers"], json::array({"X-Route"})) << "header values may be secrets";
}

TEST(OpenAiConfigTest, BadFieldsAreNamed) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"base_url: http://x/v1\n", "missing required key \"model\""},
      {"model: m\nbase_url: ftp://x\n", "field /base_url"},
      {"model: m\ntimeout_s: 0\n", "field /timeout_s: expected a number in (0, 86400]"},
      {"model: m\ntimeout_s: 1e13\n", "field /timeout_s"},
      {"model: m\nmax_retries: -1\n", "field /max_retries"},
      {"model: m\nmax_concurrency: 0\n", "field /max_concurrency"},
      {"model: m\nbackoff_initial_s: 5\nbackoff_max_s: 1\n", "field /backoff_max_s: must be >= backoff_initial_s"},
      {"model: m\ntool_choice: always\n", "field /tool_choice"},
      {"model: m\napi_key_env: 'has space'\n", "field /api_key_env"},
      {"model: m\nheaders: {'Bad Name': x}\n", "is not a valid HTTP header name"},
      {"model: m\nmax_response_bytes: 10\n", "field /max_response_bytes"},
      {"model: m\ntimeot_s: 3\n", "timeot_s"},
      {"kind: zmq\nmodel: m\n", "field /kind"},
  };
  for (const auto& c : cases) {
    try {
      parse_config(c.yaml);
      ADD_FAILURE() << "accepted: " << c.yaml;
    } catch (const InputError& e) {
      EXPECT_TRUE(has(e.what(), c.expected)) << c.yaml << " -> " << e.what();
      EXPECT_TRUE(has(e.what(), "rollout.yaml")) << e.what();
    }
  }
}
#endif

}  // namespace
}  // namespace kforge::rollout
