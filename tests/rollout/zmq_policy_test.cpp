// The trainer-served policy's C++ side over real ZeroMQ sockets on loopback:
// ZmqPolicy against PolicyServer (serving the template policy), against servers
// that misbehave (garbage, wrong counts, silence), and PolicyServer against
// malformed requests. The Python PolicyServer is tested against the C++
// client in trainer_bridge/python/tests/test_policy_server.py.
#include "kforge/rollout/policy/zmq_policy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <zmq.hpp>

#include "kforge/core/msgpack.h"
#include "kforge/core/rpc.h"
#include "kforge/rollout/policy/policy_server.h"
#include "kforge/rollout/policy/template_policy.h"
#include "rollout_test_util.h"

namespace kforge::rollout {
namespace {

PolicyRequest request(const std::string& id, int turn = 0) {
  PolicyRequest r;
  r.episode_id = id;
  r.turn = turn;
  r.task = to_json(testing::task("softmax_scale"));
  r.task_id = "test/softmax_scale";
  r.sampling.seed = 5;
  r.messages = json::array({{{"role", "user"}, {"content", "make it fast"}}});
  return r;
}

// A PolicyServer on its own thread, stopped and joined at scope exit.
struct RunningServer {
  explicit RunningServer(Policy& policy, PolicyServerConfig config = {}) {
    config.bind = "tcp://127.0.0.1:0";
    config.log = [](const std::string&) {};
    server = std::make_unique<PolicyServer>(policy, config);
    thread = std::thread([this] { server->run(); });
  }
  ~RunningServer() {
    server->stop();
    thread.join();
  }
  std::unique_ptr<PolicyServer> server;
  std::thread thread;
};

// A ROUTER the test drives by hand: answers each message with `respond`.
struct RawServer {
  explicit RawServer(std::function<std::vector<std::string>(const rpc::Request&)> respond)
      : respond_(std::move(respond)) {
    socket.set(zmq::sockopt::linger, 0);
    socket.bind("tcp://127.0.0.1:0");
    endpoint = socket.get(zmq::sockopt::last_endpoint);
    thread = std::thread([this] {
      while (!stop) {
        zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 1, std::chrono::milliseconds(50));
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        zmq::message_t id, body;
        (void)socket.recv(id);
        (void)socket.recv(body);
        json rid;
        const rpc::Request req =
            rpc::decode_request(std::string_view(static_cast<const char*>(body.data()), body.size()), &rid);
        ++received;
        for (const std::string& reply : respond_(req)) {
          (void)socket.send(zmq::buffer(id.to_string()), zmq::send_flags::sndmore);
          (void)socket.send(zmq::buffer(reply));
        }
      }
    });
  }
  ~RawServer() {
    stop = true;
    thread.join();
  }
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
  std::string endpoint;
  std::atomic<bool> stop{false};
  std::atomic<int> received{0};
  std::function<std::vector<std::string>(const rpc::Request&)> respond_;
  std::thread thread;
};

TEST(ZmqPolicyTest, ActsThroughThePolicyServerInBatchesInOrder) {
  TemplatePolicy templates;
  PolicyServerConfig config;
  RunningServer running(templates, config);
  ZmqPolicyConfig zc;
  zc.endpoint = running.server->endpoint();
  zc.max_batch = 2;  // five requests: three messages in flight
  ZmqPolicy policy(zc);
  const json hello = policy.hello(std::chrono::seconds(10));
  EXPECT_EQ(hello["protocol"], 1);
  std::vector<PolicyRequest> requests;
  for (int i = 0; i < 5; ++i) requests.push_back(request("e" + std::to_string(i)));
  const std::vector<PolicyReply> replies = policy.act(requests);
  ASSERT_EQ(replies.size(), 5u);
  // In order: each matches what the template policy gives that request directly.
  const std::vector<PolicyReply> direct = templates.act(requests);
  for (size_t i = 0; i < replies.size(); ++i) {
    EXPECT_TRUE(replies[i].error.empty()) << replies[i].error;
    EXPECT_EQ(replies[i].tool_calls, direct[i].tool_calls) << i;
    EXPECT_EQ(replies[i].policy_version, "template");
  }
  EXPECT_EQ(running.server->batches_served(), 3u);
}

TEST(ZmqPolicyTest, TokensAndLogprobsArriveIntact) {
  RawServer raw([](const rpc::Request& r) {
    json replies = json::array();
    for (size_t i = 0; i < r.params["requests"].size(); ++i) {
      replies.push_back({{"content", "x"},
                         {"token_ids", {1, 2, 3}},
                         {"logprobs", {-0.5, -1.0, -2.0}},
                         {"usage", {{"prompt_tokens", 17}, {"completion_tokens", 3}}}});
    }
    return std::vector<std::string>{rpc::encode_result(r.id, {{"replies", replies}, {"policy_version", 12}})};
  });
  ZmqPolicyConfig zc;
  zc.endpoint = raw.endpoint;
  ZmqPolicy policy(zc);
  const PolicyReply reply = policy.act({request("e")})[0];
  ASSERT_TRUE(reply.error.empty()) << reply.error;
  EXPECT_EQ(*reply.token_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(*reply.logprobs, (std::vector<double>{-0.5, -1.0, -2.0}));
  EXPECT_EQ(reply.usage, json({{"prompt_tokens", 17}, {"completion_tokens", 3}}));
  EXPECT_EQ(reply.policy_version, "12") << "an integer version is its decimal text";
}

TEST(ZmqPolicyTest, TheWorkerSaysHelloAndKeepsToTheServersMaxBatch) {
  TemplatePolicy templates;
  PolicyServerConfig config;
  config.max_batch = 2;  // the server takes two requests per act, the worker would send 64
  RunningServer running(templates, config);
  ZmqPolicyConfig zc;
  zc.endpoint = running.server->endpoint();
  ZmqPolicy policy(zc);
  EXPECT_EQ(policy.hello_facts().max_batch, 0u) << "no hello yet";
  std::vector<PolicyRequest> requests;
  for (int i = 0; i < 5; ++i) requests.push_back(request("e" + std::to_string(i)));
  const std::vector<PolicyReply> replies = policy.act(requests);
  ASSERT_EQ(replies.size(), 5u);
  for (const auto& r : replies) EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(running.server->batches_served(), 3u) << "5 requests in messages of at most 2";
  const ZmqPolicy::HelloFacts facts = policy.hello_facts();
  EXPECT_EQ(facts.max_batch, 2u);
  EXPECT_EQ(facts.protocol, 1);
  EXPECT_EQ(facts.policy_version, "") << "the C++ server's hello says no version; its replies do";
  EXPECT_NE(facts.server.find("kforge policy-server"), std::string::npos) << facts.server;
  EXPECT_NE(policy.describe().find("max_batch 2"), std::string::npos) << policy.describe();
}

TEST(ZmqPolicyTest, AServerOfAnotherProtocolVersionGetsNoBatches) {
  RawServer raw([](const rpc::Request& r) {
    return std::vector<std::string>{rpc::encode_result(r.id, {{"protocol", 2}, {"max_batch", 8}})};
  });
  ZmqPolicyConfig zc;
  zc.endpoint = raw.endpoint;
  zc.timeout_s = 5;
  ZmqPolicy policy(zc);
  const std::vector<PolicyReply> replies = policy.act({request("a")});
  EXPECT_NE(replies[0].error.find("speaks policy protocol 2"), std::string::npos) << replies[0].error;
  EXPECT_EQ(raw.received.load(), 1) << "only the hello";
}

TEST(ZmqPolicyTest, MisbehavingServersGiveErrorRepliesNotCrashes) {
  struct Case {
    const char* name;
    std::function<std::vector<std::string>(const rpc::Request&)> respond;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"wrong count",
       [](const rpc::Request& r) {
         return std::vector<std::string>{rpc::encode_result(r.id, {{"replies", json::array()}})};
       },
       "0 replies for 2 requests"},
      {"error reply",
       [](const rpc::Request& r) {
         return std::vector<std::string>{rpc::encode_error(r.id, rpc::ErrorCode::kInternal, "GPU on fire")};
       },
       "GPU on fire"},
      {"bad field",
       [](const rpc::Request& r) {
         json replies = json::array({{{"content", 5}}, {{"content", "ok"}}});
         return std::vector<std::string>{rpc::encode_result(r.id, {{"replies", replies}})};
       },
       "/replies/0/content"},
      {"unknown key",
       [](const rpc::Request& r) {
         json replies = json::array({{{"contnet", "a"}}, {{"content", "b"}}});
         return std::vector<std::string>{rpc::encode_result(r.id, {{"replies", replies}})};
       },
       "contnet"},
      {"usage with a negative count",
       [](const rpc::Request& r) {
         json replies = json::array({{{"content", "a"}, {"usage", {{"total_tokens", -1}}}}, {{"content", "b"}}});
         return std::vector<std::string>{rpc::encode_result(r.id, {{"replies", replies}})};
       },
       "/replies/0/usage/total_tokens"},
      {"usage with an unknown key",
       [](const rpc::Request& r) {
         json replies = json::array({{{"content", "a"}, {"usage", {{"cached_tokens", 1}}}}, {{"content", "b"}}});
         return std::vector<std::string>{rpc::encode_result(r.id, {{"replies", replies}})};
       },
       "cached_tokens"},
      {"garbage, then the real reply",
       [](const rpc::Request& r) {
         json replies = json::array({{{"content", "a"}}, {{"content", "b"}}});
         return std::vector<std::string>{std::string("\xc1\xc1\xc1"), msgpack::encode(json::array({1, 2})),
                                         rpc::encode_result(r.id, {{"replies", replies}})};
       },
       ""},
  };
  for (const Case& c : cases) {
    RawServer raw(c.respond);
    ZmqPolicyConfig zc;
    zc.endpoint = raw.endpoint;
    zc.timeout_s = 5;
    ZmqPolicy policy(zc);
    const std::vector<PolicyReply> replies = policy.act({request("a"), request("b")});
    ASSERT_EQ(replies.size(), 2u) << c.name;
    for (const auto& r : replies) {
      if (std::string(c.expect).empty()) {
        EXPECT_TRUE(r.error.empty()) << c.name << ": " << r.error;
      } else {
        EXPECT_NE(r.error.find(c.expect), std::string::npos) << c.name << ": " << r.error;
      }
    }
  }
}

TEST(ZmqPolicyTest, ASilentServerTimesOutAfterRetries) {
  RawServer raw([](const rpc::Request&) { return std::vector<std::string>{}; });
  ZmqPolicyConfig zc;
  zc.endpoint = raw.endpoint;
  zc.timeout_s = 0.3;
  zc.retries = 2;
  ZmqPolicy policy(zc);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<PolicyReply> replies = policy.act({request("a")});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(replies[0].error.find("did not answer"), std::string::npos) << replies[0].error;
  EXPECT_NE(replies[0].error.find("3 attempts"), std::string::npos) << replies[0].error;
  EXPECT_EQ(raw.received.load(), 4) << "a hello, then one send and two resends";
  EXPECT_GE(s, 1.15);
}

TEST(ZmqPolicyTest, NoServerAtAllIsATimeoutNotAHang) {
  ZmqPolicyConfig zc;
  zc.endpoint = "tcp://127.0.0.1:1";  // nothing listens there
  zc.timeout_s = 0.2;
  zc.retries = 0;
  ZmqPolicy policy(zc);
  EXPECT_NE(policy.act({request("a")})[0].error.find("did not answer"), std::string::npos);
  EXPECT_THROW(policy.hello(std::chrono::milliseconds(200)), SystemError);
}

TEST(ZmqPolicyTest, BadConfigIsAnInputError) {
  ZmqPolicyConfig zc;
  zc.endpoint = "not an endpoint";
  EXPECT_THROW(ZmqPolicy{zc}, InputError);
  zc.endpoint = "tcp://127.0.0.1:5556";
  zc.max_batch = 0;
  EXPECT_THROW(ZmqPolicy{zc}, InputError);
}

// PolicyServer against hostile clients: every malformed request gets an
// error naming its field; the server keeps serving.
TEST(PolicyServerTest, MalformedRequestsGetErrorsNamingTheField) {
  TemplatePolicy templates;
  RunningServer running(templates);
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(running.server->endpoint());
  auto ask = [&](const std::string& bytes) {
    (void)dealer.send(zmq::buffer(bytes));
    zmq::pollitem_t items[] = {{dealer.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::seconds(10));
    zmq::message_t m;
    EXPECT_TRUE(dealer.recv(m, zmq::recv_flags::dontwait));
    return rpc::decode_reply(std::string_view(static_cast<const char*>(m.data()), m.size()));
  };
  rpc::Reply r = ask("\xc1 definitely not msgpack");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.id.is_null());
  r = ask(rpc::encode_request(1, "act", {{"requests", json::array({{{"episode_id", 3}}})}}));
  EXPECT_EQ(r.code, "bad_request");
  EXPECT_EQ(r.field, "/params/requests/0/episode_id") << r.message;
  r = ask(rpc::encode_request(2, "act",
                              {{"requests", json::array({{{"episode_id", "e"}, {"sampling", {{"top_p", 3}}}}})}}));
  EXPECT_EQ(r.field, "/params/requests/0/sampling/top_p") << r.message;
  r = ask(rpc::encode_request(3, "generate", json::object()));
  EXPECT_EQ(r.code, "unknown_method");
  // Nested 200 levels deep: refused by the bounded decoder, not a stack overflow.
  json deep = json::array();
  for (int i = 0; i < 200; ++i) deep = json::array({deep});
  r = ask(rpc::encode_request(4, "act", {{"requests", deep}}));
  EXPECT_EQ(r.code, "bad_request");
  // Still serving.
  r = ask(rpc::encode_request(5, "act", {{"requests", json::array({to_json(request("e"))})}}));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.result["replies"].size(), 1u);
}

}  // namespace
}  // namespace kforge::rollout
