// OpenAiPolicy against a real HTTP server on loopback (openai_server.py) that
// speaks the chat-completions schema and scripts failures: slow replies, 429
// with Retry-After, 5xx, dropped connections, malformed and huge bodies.
#include "kforge/rollout/policy/openai_policy.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <chrono>
#include <thread>

#include "openai_test_server.h"

namespace kforge::rollout {
namespace {

using testing::OpenAiTestServer;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

PolicyRequest request_with(const json& scenario, const std::string& episode = "ep") {
  PolicyRequest r;
  r.episode_id = episode;
  r.messages = json::array({{{"role", "system"}, {"content", "You write kernels."}},
                            {{"role", "user"}, {"content", "SCENARIO " + scenario.dump()}}});
  return r;
}

class OpenAiPolicyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new OpenAiTestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    server_->reset();
    unsetenv("OPENAI_API_KEY");
    unsetenv("KFORGE_TEST_KEY");
  }

  // Short waits: the tests shrink time, never the checks.
  OpenAiPolicyConfig config() const {
    OpenAiPolicyConfig c;
    c.base_url = server_->base_url();
    c.model = "test-model";
    c.connect_timeout_s = 5;
    c.timeout_s = 20;
    c.max_retries = 3;
    c.backoff_initial_s = 0.05;
    c.backoff_max_s = 0.2;
    return c;
  }
  static json requests_logged() { return server_->log()["requests"]; }
  static std::vector<double> arrival_times(const std::string& key) {
    std::vector<double> t;
    for (const auto& r : requests_logged()) {
      if (r["key"] == key) t.push_back(r["t"].get<double>());
    }
    return t;
  }

  static OpenAiTestServer* server_;
};

OpenAiTestServer* OpenAiPolicyTest::server_ = nullptr;

TEST_F(OpenAiPolicyTest, SendsMessagesToolsAndSamplingParameters) {
  setenv("KFORGE_TEST_KEY", "sk-test-123", 1);
  OpenAiPolicyConfig c = config();
  c.api_key_env = "KFORGE_TEST_KEY";
  c.request.extra_body = {{"top_k", 20}};
  c.headers["X-Route"] = "a";
  OpenAiPolicy policy(c);
  PolicyRequest r = request_with({{"do", "ok"}});
  r.tools =
      json::array({{{"type", "function"}, {"function", {{"name", "submit"}, {"parameters", {{"type", "object"}}}}}}});
  r.sampling.temperature = 0.7;
  r.sampling.top_p = 0.9;
  r.sampling.max_tokens = 321;
  r.sampling.seed = 42;
  r.sampling.stop = {"</kernel>"};
  const auto replies = policy.act({r});
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].error, "");
  EXPECT_EQ(replies[0].content, "hello");
  EXPECT_EQ(replies[0].finish_reason, "stop");
  EXPECT_EQ(replies[0].policy_version, "test-model") << "the server's model name when none is configured";
  EXPECT_EQ(replies[0].usage["completion_tokens"], 7);
  EXPECT_GT(replies[0].latency_ms, 0.0);

  const json logged = requests_logged();
  ASSERT_EQ(logged.size(), 1u);
  const json& body = logged[0]["body"];
  EXPECT_EQ(logged[0]["path"], "/v1/chat/completions");
  EXPECT_EQ(logged[0]["headers"]["authorization"], "Bearer sk-test-123");
  EXPECT_EQ(logged[0]["headers"]["x-route"], "a");
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["messages"], r.messages);
  EXPECT_EQ(body["tools"], r.tools);
  EXPECT_EQ(body["tool_choice"], "auto");
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(body["top_p"].get<double>(), 0.9);
  EXPECT_EQ(body["max_tokens"], 321);
  EXPECT_EQ(body["seed"], 42);
  EXPECT_EQ(body["stop"], json::array({"</kernel>"}));
  EXPECT_EQ(body["top_k"], 20);
  EXPECT_FALSE(body.contains("logprobs")) << "strict servers reject parameters nobody asked for";
}

TEST_F(OpenAiPolicyTest, NoKeyNoAuthorizationHeader) {
  OpenAiPolicy policy(config());
  ASSERT_EQ(policy.act({request_with({{"do", "ok"}})})[0].error, "");
  EXPECT_FALSE(requests_logged()[0]["headers"].contains("authorization"));
}

TEST_F(OpenAiPolicyTest, ANamedKeyVariableThatIsNotSetIsAConfigError) {
  OpenAiPolicyConfig c = config();
  c.api_key_env = "KFORGE_TEST_KEY";
  try {
    OpenAiPolicy policy(c);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(has(e.what(), "api_key_env")) << e.what();
    EXPECT_TRUE(has(e.what(), "KFORGE_TEST_KEY")) << e.what();
  }
}

TEST_F(OpenAiPolicyTest, ParsesToolCalls) {
  OpenAiPolicy policy(config());
  const json calls = json::array(
      {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "compile"}, {"arguments", "{\"source\": \"x\"}"}}}},
       {{"type", "function"}, {"function", {{"name", "submit"}, {"arguments", {{"source", "y"}}}}}}});
  const auto reply = policy.act({request_with({{"do", "tool_call"}, {"tool_calls", calls}})})[0];
  ASSERT_EQ(reply.error, "");
  EXPECT_EQ(reply.finish_reason, "tool_calls");
  EXPECT_EQ(reply.content, "");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  EXPECT_EQ(reply.tool_calls[0]["id"], "c1");
  EXPECT_EQ(reply.tool_calls[0]["function"]["name"], "compile");
  EXPECT_EQ(reply.tool_calls[0]["function"]["arguments"], "{\"source\": \"x\"}");
  // Object arguments are serialized and a missing id is given one.
  EXPECT_EQ(reply.tool_calls[1]["id"], "call_1");
  EXPECT_EQ(json::parse(reply.tool_calls[1]["function"]["arguments"].get<std::string>()), json({{"source", "y"}}));
}

TEST_F(OpenAiPolicyTest, LogprobsAndTokenIdsAreCarriedThrough) {
  OpenAiPolicyConfig c = config();
  c.request.logprobs = true;
  c.request.top_logprobs = 2;
  c.request.return_token_ids = true;
  OpenAiPolicy policy(c);
  const auto replies = policy.act(
      {request_with({{"do", "logprobs"}, {"token_ids", true}}),
       request_with({{"do", "logprobs"}, {"as_token_text", true}, {"ids", {7, 8}}, {"logprobs", {-0.25, -2.0}}})});
  ASSERT_EQ(replies[0].error, "");
  ASSERT_TRUE(replies[0].token_ids.has_value());
  EXPECT_EQ(*replies[0].token_ids, (std::vector<int64_t>{101, 102, 103}));
  ASSERT_TRUE(replies[0].logprobs.has_value());
  EXPECT_EQ(*replies[0].logprobs, (std::vector<double>{-0.5, -1.25, -0.125}));
  ASSERT_EQ(replies[1].error, "");
  ASSERT_TRUE(replies[1].token_ids.has_value()) << "token ids from vLLM's token_id:<n> tokens";
  EXPECT_EQ(*replies[1].token_ids, (std::vector<int64_t>{7, 8}));
  const json body = requests_logged()[0]["body"];
  EXPECT_EQ(body["logprobs"], true);
  EXPECT_EQ(body["top_logprobs"], 2);
  EXPECT_EQ(body["return_token_ids"], true);
}

TEST_F(OpenAiPolicyTest, RetriesServerErrorsWithBackoff) {
  OpenAiPolicyConfig c = config();
  c.backoff_initial_s = 0.2;
  c.backoff_max_s = 1.0;
  OpenAiPolicy policy(c);
  const auto reply = policy.act({request_with({{"do", "status"}, {"status", 500}, {"times", 2}, {"key", "r5"}})})[0];
  EXPECT_EQ(reply.error, "");
  EXPECT_EQ(reply.content, "hello");
  const auto t = arrival_times("r5");
  ASSERT_EQ(t.size(), 3u) << "two 500s, then the answer";
  // Backoff k waits between 50% and 100% of min(max, initial * 2^k).
  EXPECT_GE(t[1] - t[0], 0.1 - 0.01);
  EXPECT_GE(t[2] - t[1], 0.2 - 0.01);
}

TEST_F(OpenAiPolicyTest, Honours429RetryAfter) {
  OpenAiPolicy policy(config());
  const auto reply = policy.act(
      {request_with({{"do", "status"}, {"status", 429}, {"retry_after", 2}, {"times", 1}, {"key", "rl"}})})[0];
  EXPECT_EQ(reply.error, "");
  const auto t = arrival_times("rl");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_GE(t[1] - t[0], 2.0 - 0.05) << "waited less than the server's Retry-After";
}

TEST_F(OpenAiPolicyTest, ARetryAfterBeyondTheLimitFailsInsteadOfWaiting) {
  OpenAiPolicyConfig c = config();
  c.max_retry_after_s = 5;
  OpenAiPolicy policy(c);
  const auto reply =
      policy.act({request_with({{"do", "status"}, {"status", 503}, {"retry_after", 600}, {"key", "long"}})})[0];
  EXPECT_TRUE(has(reply.error, "HTTP 503")) << reply.error;
  EXPECT_TRUE(has(reply.error, "retry after 600 s")) << reply.error;
  EXPECT_TRUE(has(reply.error, "max_retry_after_s")) << reply.error;
  EXPECT_EQ(arrival_times("long").size(), 1u);
}

TEST_F(OpenAiPolicyTest, GivesUpAfterMaxRetriesWithTheServersMessage) {
  OpenAiPolicyConfig c = config();
  c.max_retries = 2;
  OpenAiPolicy policy(c);
  const auto reply = policy.act(
      {request_with({{"do", "status"}, {"status", 503}, {"message", "engine overloaded"}, {"key", "s"}})})[0];
  EXPECT_TRUE(has(reply.error, "HTTP 503: engine overloaded")) << reply.error;
  EXPECT_TRUE(has(reply.error, "gave up after 3 attempts")) << reply.error;
  EXPECT_EQ(arrival_times("s").size(), 3u);
}

TEST_F(OpenAiPolicyTest, ClientErrorsAreNotRetried) {
  OpenAiPolicy policy(config());
  const auto reply = policy.act({request_with({{"do", "status"},
                                               {"status", 400},
                                               {"message", "This model's maximum context length is 32768"},
                                               {"key", "b"}})})[0];
  EXPECT_TRUE(has(reply.error, "HTTP 400: This model's maximum context length is 32768")) << reply.error;
  EXPECT_EQ(arrival_times("b").size(), 1u);
}

TEST_F(OpenAiPolicyTest, VllmStyleErrorBodiesAreRead) {
  OpenAiPolicy policy(config());
  const auto reply =
      policy.act({request_with({{"do", "status"},
                                {"status", 404},
                                {"body", R"({"object": "error", "message": "model x does not exist"})"}})})[0];
  EXPECT_TRUE(has(reply.error, "HTTP 404: model x does not exist")) << reply.error;
}

TEST_F(OpenAiPolicyTest, DroppedConnectionsAreRetried) {
  OpenAiPolicy policy(config());
  const auto reply = policy.act({request_with({{"do", "drop"}, {"times", 1}, {"key", "d"}})})[0];
  EXPECT_EQ(reply.error, "");
  EXPECT_EQ(arrival_times("d").size(), 2u);
}

TEST_F(OpenAiPolicyTest, ASlowServerTimesOutAndIsAnError) {
  OpenAiPolicyConfig c = config();
  c.timeout_s = 0.5;
  c.max_retries = 1;
  OpenAiPolicy policy(c);
  const auto t0 = std::chrono::steady_clock::now();
  const auto reply = policy.act({request_with({{"do", "slow"}, {"seconds", 8}, {"key", "slow"}})})[0];
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(has(reply.error, "timeout")) << reply.error;
  EXPECT_TRUE(has(reply.error, "gave up after 2 attempts")) << reply.error;
  EXPECT_EQ(arrival_times("slow").size(), 2u);
  EXPECT_LT(elapsed, 8.0) << "the client waited for the slow reply instead of timing out";
}

TEST_F(OpenAiPolicyTest, RefusedConnectionIsAnErrorAfterRetries) {
  OpenAiPolicyConfig c = config();
  c.base_url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  c.max_retries = 1;
  OpenAiPolicy policy(c);
  const auto reply = policy.act({request_with({{"do", "ok"}})})[0];
  EXPECT_TRUE(has(reply.error, "onnect")) << reply.error;
  EXPECT_TRUE(has(reply.error, "gave up after 2 attempts")) << reply.error;
}

TEST_F(OpenAiPolicyTest, MalformedJsonIsAClearErrorAndNotRetried) {
  OpenAiPolicy policy(config());
  const auto reply = policy.act({request_with({{"do", "malformed"}, {"key", "m"}})})[0];
  EXPECT_TRUE(has(reply.error, "HTTP 200: reply is not valid JSON")) << reply.error;
  EXPECT_EQ(arrival_times("m").size(), 1u);
}

TEST_F(OpenAiPolicyTest, ReplyOutsideTheSchemaNamesTheField) {
  OpenAiPolicy policy(config());
  const auto replies = policy.act({
      request_with({{"do", "raw_json"}, {"json", {{"choices", json::array()}}}}),
      request_with({{"do", "raw_json"}, {"json", {{"choices", {{{"message", {{"content", 5}}}}}}}}}),
      request_with({{"do", "raw_json"},
                    {"json", {{"choices", {{{"message", {{"tool_calls", {{{"function", {{"name", 3}}}}}}}}}}}}}}),
  });
  EXPECT_TRUE(has(replies[0].error, "no choices")) << replies[0].error;
  EXPECT_TRUE(has(replies[1].error, "/choices/0/message/content: expected a string, got a number")) << replies[1].error;
  EXPECT_TRUE(has(replies[2].error, "/choices/0/message/tool_calls/0/function/name")) << replies[2].error;
}

TEST_F(OpenAiPolicyTest, HugeBodiesAreCutOffAtTheLimit) {
  OpenAiPolicyConfig c = config();
  c.limits.max_bytes = 1 << 20;
  OpenAiPolicy policy(c);
  const auto replies = policy.act({
      request_with({{"do", "huge"}, {"bytes", 64 << 20}, {"key", "h1"}}),
      request_with({{"do", "huge"}, {"bytes", 64 << 20}, {"announce", false}, {"key", "h2"}}),
  });
  for (const auto& r : replies) {
    EXPECT_TRUE(has(r.error, "reply larger than 1048576 bytes (max_response_bytes)")) << r.error;
  }
  EXPECT_EQ(arrival_times("h1").size(), 1u) << "not retried";
  EXPECT_EQ(arrival_times("h2").size(), 1u) << "not retried";
}

TEST_F(OpenAiPolicyTest, DeeplyNestedRepliesAreRefusedBeforeParsing) {
  OpenAiPolicy policy(config());
  const auto reply = policy.act({request_with({{"do", "deep"}, {"depth", 200000}})})[0];
  EXPECT_TRUE(has(reply.error, "nested deeper than 32 levels")) << reply.error;
}

TEST_F(OpenAiPolicyTest, ABatchRunsConcurrentlyWithinTheLimitAndKeepsOrder) {
  OpenAiPolicyConfig c = config();
  c.max_concurrency = 4;
  OpenAiPolicy policy(c);
  std::vector<PolicyRequest> batch;
  for (int i = 0; i < 12; ++i) {
    batch.push_back(
        request_with({{"do", "slow"}, {"seconds", 0.3}, {"content", "reply " + std::to_string(i)}, {"key", "conc"}}));
  }
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const auto replies = policy.act(batch);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = thread_cpu_seconds() - cpu0;
  // Requests waiting for a slot sleep until one frees; spinning on the poll
  // would burn a core for the whole batch.
  EXPECT_LT(cpu, 0.5 * wall) << "cpu " << cpu << " s over " << wall << " s";
  ASSERT_EQ(replies.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(replies[static_cast<size_t>(i)].content, "reply " + std::to_string(i));
  const int max_inflight = server_->log()["max_inflight"]["conc"].get<int>();
  EXPECT_LE(max_inflight, 4);
  EXPECT_GE(max_inflight, 2) << "the batch ran one request at a time";
}

TEST_F(OpenAiPolicyTest, ConcurrencyLimitHoldsAcrossThreads) {
  OpenAiPolicyConfig c = config();
  c.max_concurrency = 3;
  OpenAiPolicy policy(c);
  std::vector<std::thread> threads;
  std::vector<std::vector<PolicyReply>> results(3);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::vector<PolicyRequest> batch(4, request_with({{"do", "slow"}, {"seconds", 0.2}, {"key", "threads"}}));
      results[static_cast<size_t>(t)] = policy.act(batch);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& rs : results) {
    for (const auto& r : rs) EXPECT_EQ(r.error, "");
  }
  EXPECT_LE(server_->log()["max_inflight"]["threads"].get<int>(), 3);
  EXPECT_EQ(requests_logged().size(), 12u);
}

TEST_F(OpenAiPolicyTest, OneFailedRequestDoesNotSinkTheBatch) {
  OpenAiPolicyConfig c = config();
  c.max_retries = 0;
  OpenAiPolicy policy(c);
  const auto replies =
      policy.act({request_with({{"do", "ok"}, {"content", "first"}}), request_with({{"do", "status"}, {"status", 500}}),
                  request_with({{"do", "malformed"}}), request_with({{"do", "ok"}, {"content", "last"}})});
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[0].content, "first");
  EXPECT_TRUE(has(replies[1].error, "HTTP 500")) << replies[1].error;
  EXPECT_TRUE(has(replies[2].error, "not valid JSON")) << replies[2].error;
  EXPECT_EQ(replies[3].content, "last");
  EXPECT_EQ(replies[3].error, "");
}

TEST_F(OpenAiPolicyTest, ConfiguredPolicyVersionTagsReplies) {
  OpenAiPolicyConfig c = config();
  c.policy_version = "step-120";
  OpenAiPolicy policy(c);
  EXPECT_EQ(policy.act({request_with({{"do", "ok"}})})[0].policy_version, "step-120");
  EXPECT_EQ(policy.describe(), "openai " + server_->base_url() + " model=test-model");
}

TEST(OpenAiBackoffTest, ExponentialWithinBoundsAndJitter) {
  OpenAiPolicyConfig c;
  c.backoff_initial_s = 0.5;
  c.backoff_max_s = 4.0;
  EXPECT_DOUBLE_EQ(backoff_seconds(c, 0, 0.0), 0.25);
  EXPECT_DOUBLE_EQ(backoff_seconds(c, 0, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(backoff_seconds(c, 2, 1.0), 2.0);
  EXPECT_DOUBLE_EQ(backoff_seconds(c, 10, 1.0), 4.0) << "capped";
  EXPECT_DOUBLE_EQ(backoff_seconds(c, 1000, 0.5), 3.0) << "no overflow for absurd retry counts";
  EXPECT_TRUE(retryable_status(429));
  EXPECT_TRUE(retryable_status(503));
  EXPECT_TRUE(retryable_status(408));
  EXPECT_FALSE(retryable_status(400));
  EXPECT_FALSE(retryable_status(401));
  EXPECT_FALSE(retryable_status(404));
}

}  // namespace
}  // namespace kforge::rollout
