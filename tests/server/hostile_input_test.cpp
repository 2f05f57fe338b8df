// Hostile-input probes of the server (docs/threat-model.md#outside-input): a real server on loopback (CPU backend, real
// judge and runner processes) gets hostile tool calls, tasks and configs.
// Each is answered with the exact error or observation, and the server keeps
// serving honest clients.
#include <gtest/gtest.h>

#include <set>

#include "kforge/core/input_limits.h"
#include "server_test_util.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using testing::gym_data;
using testing::RunningServer;
using testing::test_server_config;
using testing::WireClient;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

json test_task() { return testing::read_json(gym_data() / "scale_bias_relu.json"); }

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

json nested_value(int depth) {
  json v = 1;
  for (int i = 0; i < depth; ++i) v = json::array({v});
  return v;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = std::make_unique<RunningServer>(test_server_config()); }

  // A fresh client with a reset env; returns the env id.
  int reset_env(WireClient& client) {
    const int env_id = client.ok("make")["env_id"];
    client.ok("reset", {{"env_id", env_id}, {"task", test_task()}});
    return env_id;
  }

  // The server still answers an honest client, and runs a real step for it.
  void expect_serving() {
    WireClient honest(server_->endpoint());
    EXPECT_EQ(honest.ok("hello")["protocol_version"], 1);
    const int env_id = reset_env(honest);
    const json step =
        honest.ok("step", {{"env_id", env_id}, {"tool_call", {{"name", "compile"}, {"arguments", json::object()}}}});
    EXPECT_TRUE(step.contains("observation"));
    honest.ok("close", {{"env_id", env_id}});
  }

  std::unique_ptr<RunningServer> server_;
};

TEST_F(HostileInputTest, DeepToolCallArgumentsAreAnInvalidActionAndTheServerServesOn) {
  WireClient client(server_->endpoint());
  const int env_id = reset_env(client);
  const json step = client.ok(
      "step", {{"env_id", env_id}, {"tool_call", {{"name", "compile"}, {"arguments", nested_arrays(200000)}}}});
  EXPECT_EQ(step["observation"]["data"]["error"]["kind"], "invalid_action");
  EXPECT_TRUE(has(step["observation"]["text"], "nested deeper than 64 levels")) << step["observation"]["text"];
  EXPECT_EQ(step["info"]["counted_turn"], true);
  // The raw text of a call, as deep.
  const json raw = client.ok("step", {{"env_id", env_id}, {"tool_call", nested_arrays(200000)}});
  EXPECT_EQ(raw["observation"]["data"]["error"]["kind"], "invalid_action");
  expect_serving();
}

TEST_F(HostileInputTest, ToolCallArgumentsWithARepeatedKeyAreAnInvalidAction) {
  WireClient client(server_->endpoint());
  const int env_id = reset_env(client);
  const json step = client.ok(
      "step",
      {{"env_id", env_id}, {"tool_call", {{"name", "compile"}, {"arguments", R"({"source": "a", "source": "b"})"}}}});
  EXPECT_EQ(step["observation"]["data"]["error"]["kind"], "invalid_action");
  EXPECT_TRUE(has(step["observation"]["text"], "duplicate key \"source\"")) << step["observation"]["text"];
}

TEST_F(HostileInputTest, ATaskWithADeepIdOrDeepAttrsIsAnInvalidTask) {
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  json deep_id = test_task();
  deep_id["id"] = nested_value(100);  // within MessagePack's 128 levels, beyond a document's 64
  protocol::Reply id = client.call("reset", {{"env_id", env_id}, {"task", deep_id}});
  EXPECT_EQ(id.code, "invalid_task");
  EXPECT_EQ(id.field, "/params/task");
  EXPECT_TRUE(has(id.message, "nested deeper than 64 levels (limits::kMaxDocumentDepth)")) << id.message;

  json deep_attrs = test_task();
  deep_attrs["nodes"][0]["attrs"] = {{"x", nested_value(100)}};
  protocol::Reply attrs = client.call("reset", {{"env_id", env_id}, {"task", deep_attrs}});
  EXPECT_EQ(attrs.code, "invalid_task");
  EXPECT_TRUE(has(attrs.message, "nested deeper than 64 levels")) << attrs.message;
  expect_serving();
}

TEST_F(HostileInputTest, TasksBeyondTheShapeLimitsAreInvalidTasksNamingNodeOrVariant) {
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  const json base = test_task();
  const std::string x = base["inputs"][0]["name"];

  json rank9 = base;
  rank9["nodes"].push_back({{"op", "reshape"},
                            {"in", {base["outputs"][0]}},
                            {"out", "r9"},
                            {"attrs", {{"shape", {1, 1, 1, 1, 1, 1, 1, -1, 1}}}}});
  rank9["outputs"] = {"r9"};
  protocol::Reply r = client.call("reset", {{"env_id", env_id}, {"task", rank9}});
  EXPECT_EQ(r.code, "invalid_task");
  EXPECT_TRUE(has(r.message, "(reshape): output \"r9\": rank 9 is more than the 8 dimensions")) << r.message;

  json huge_variant = base;
  huge_variant["shape_variants"] = {{{x, {1 << 20, 1 << 20}}}};
  r = client.call("reset", {{"env_id", env_id}, {"task", huge_variant}});
  EXPECT_EQ(r.code, "invalid_task");
  EXPECT_EQ(r.field, "/params/task/shape_variants/0/" + x) << r.message;
  EXPECT_TRUE(has(r.message, "has 1099511627776 elements; a tensor may have at most 2147483647")) << r.message;

  json overflow = base;
  overflow["nodes"].push_back({{"op", "repeat"},
                               {"in", {base["outputs"][0]}},
                               {"out", "rep"},
                               {"attrs", {{"repeats", {2147483648, 2147483648, 2147483648}}}}});
  overflow["outputs"] = {"rep"};
  r = client.call("reset", {{"env_id", env_id}, {"task", overflow}});
  EXPECT_EQ(r.code, "invalid_task");
  EXPECT_TRUE(has(r.message, "(repeat): output \"rep\"")) << r.message;
  EXPECT_TRUE(has(r.message, "has more than 2^63 elements")) << r.message;
  EXPECT_FALSE(has(r.message, ", -")) << r.message;

  json many = base;
  many["shape_variants"] = json::array();
  for (int i = 0; i < 20000; ++i) many["shape_variants"].push_back({{x, base["inputs"][0]["shape"]}});
  r = client.call("reset", {{"env_id", env_id}, {"task", many}});
  EXPECT_EQ(r.code, "invalid_task");
  EXPECT_EQ(r.field, "/params/task/shape_variants");
  EXPECT_TRUE(has(r.message, "20000 shape variants; a task has at most 64 (limits::kMaxShapeVariants)")) << r.message;

  // The env is still usable.
  EXPECT_EQ(client.ok("reset", {{"env_id", env_id}, {"task", base}})["info"]["env_id"], env_id);
}

TEST_F(HostileInputTest, RepeatedKeysOnTheWireAreABadRequest) {
  WireClient client(server_->endpoint());
  // {"v": 1, "id": 5, "method": "hello", "method": "make"}
  std::string bytes = "\x84\xa1v\x01\xa2id\x05\xa6method\xa5hello\xa6method\xa4make";
  client.send_raw(bytes);
  const protocol::Reply r = client.next();
  EXPECT_EQ(r.code, "bad_request");
  EXPECT_TRUE(has(r.message, "a map repeats the key \"method\"")) << r.message;
  expect_serving();
}

TEST_F(HostileInputTest, AHugeUnknownTaskIdGetsNoSuggestionAndAShortMessage) {
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  const protocol::Reply r = client.call("reset", {{"env_id", env_id}, {"task_id", std::string(4 << 20, 't')}});
  EXPECT_EQ(r.code, "unknown_task");
  EXPECT_LT(r.message.size(), 1000u);
  EXPECT_FALSE(has(r.message, "did you mean"));
}

// A request the server refuses after reading it (here: ping with an unknown
// 1 MiB key) costs its client 50 times what it cost the server before the
// client's next request is read.
std::string big_bad_ping(uint64_t id, size_t bytes = 1 << 20) {
  return protocol::encode_request(id, "ping", {{"pad", std::string(bytes, 'p')}});
}

TEST_F(HostileInputTest, AClientSendingBadRequestsWaitsWhileOthersAreServed) {
  WireClient flood(server_->endpoint());
  constexpr int kBad = 40;
  for (int i = 0; i < kBad; ++i) flood.send_raw(big_bad_ping(static_cast<uint64_t>(i + 1)));
  EXPECT_EQ(flood.next().code, "bad_request");  // read: its penalty has begun
  WireClient honest(server_->endpoint());
  EXPECT_TRUE(honest.ok("ping").contains("uptime_s"));
  // Each refusal added its penalty: the flood is far from answered when the
  // honest ping was.
  EXPECT_LT(flood.arrived(), static_cast<size_t>(kBad / 2));
  // Nothing is lost: every request gets its refusal, in order.
  for (int i = 1; i < kBad; ++i) {
    const protocol::Reply r = flood.next();
    EXPECT_EQ(r.code, "bad_request");
    EXPECT_EQ(r.id, json(i + 1));
  }
  expect_serving();
}

TEST_F(HostileInputTest, LargeRequestsAreDecodedAsideAndKeepTheirOrder) {
  WireClient client(server_->endpoint());
  // Large (decoded on the decoder thread) and small (on the socket thread)
  // in turn: the replies come in the order of the requests.
  client.send_raw(big_bad_ping(1, 200 << 10));
  client.send_raw(protocol::encode_request(2, "ping", json::object()));
  client.send_raw(big_bad_ping(3, 100 << 10));
  client.send_raw(protocol::encode_request(4, "ping", json::object()));
  for (uint64_t id = 1; id <= 4; ++id) {
    const protocol::Reply r = client.next();
    EXPECT_EQ(r.id, json(id));
    EXPECT_EQ(r.ok, id % 2 == 0) << r.code << ": " << r.message;
  }
  expect_serving();
}

TEST(ServerQueueTest, RequestsBeyondAClientsQueueAreRefusedUnreadAndTheRestAnswered) {
  ServerConfig config = test_server_config(2);
  config.max_inflight_per_client = 4;  // its queue holds 8
  RunningServer server(config);
  WireClient client(server.server().endpoint());
  // The refusal's penalty holds the pings in the client's queue.
  client.send_raw(big_bad_ping(1000, 2 << 20));
  constexpr int kPings = 20;
  for (int i = 0; i < kPings; ++i) client.send("ping");
  int ok = 0;
  int dropped = 0;
  std::set<json> answered;
  for (int i = 0; i < kPings + 1; ++i) {
    const protocol::Reply r = client.next();
    // Refused unread, but with its id (peeked at): the client knows which.
    EXPECT_TRUE(answered.insert(r.id).second) << "answered twice: " << r.id;
    if (r.ok) {
      ++ok;
    } else if (r.code == "too_many_requests") {
      ++dropped;
      EXPECT_TRUE(has(r.message, "wait for their replies")) << r.message;
    } else {
      EXPECT_EQ(r.id, json(1000));
      EXPECT_EQ(r.code, "bad_request");
    }
  }
  // The queue holds 8; the large request may still be one of them when the
  // pings arrive (it leaves the queue when its turn comes).
  EXPECT_GE(ok, 7);
  EXPECT_GE(dropped, 1);
  EXPECT_EQ(ok + dropped, kPings);
  for (int id = 1; id <= kPings; ++id) EXPECT_EQ(answered.count(json(id)), 1u) << id;
  // The client is served again once its queue has room.
  EXPECT_TRUE(client.ok("ping").contains("uptime_s"));
}

TEST(ServerConfigBoundsTest, ACpuDeviceOtherThanZeroFailsAtStart) {
  ServerConfig config = test_server_config();
  config.env.device = 1;
  std::string msg;
  try {
    Server server(std::move(config));
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(has(msg, "field /device: the cpu backend has one device, 0; got 1")) << msg;
}

TEST(ServerConfigBoundsTest, DurationsBeyondTheLimitAreRefused) {
  ServerConfig config = test_server_config();
  config.drain_timeout_s = 1e300;
  std::string msg;
  try {
    Server server(std::move(config));
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(has(msg, "serve: drain_timeout_s must be in [0, 86400] seconds")) << msg;
}

}  // namespace
}  // namespace kforge::env
