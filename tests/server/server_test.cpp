// The env server in-process on a free loopback port, driven through a real
// DEALER socket: real compiles and real judge/runner processes (CPU backend).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>

#include "server_test_util.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using testing::gym_data;
using testing::RunningServer;
using testing::server_data;
using testing::source_of;
using testing::test_server_config;
using testing::tool_call;
using testing::WireClient;

json test_task() { return testing::read_json(gym_data() / "scale_bias_relu.json"); }
// The same computation at a size where a call takes a fraction of a
// millisecond: tests that expect a speed reward use it, because timing a
// kernel of a few microseconds is dominated by the harness's own overhead.
json medium_task() { return testing::read_json(server_data() / "medium_task.json"); }

json call_with_source(const std::string& tool, const std::filesystem::path& file) {
  return tool_call(tool, {{"source", source_of(file)}});
}

class ServerTest : public ::testing::Test {
 protected:
  // Fresh per test: each test is its own process under ctest anyway.
  void start(ServerConfig config = test_server_config()) {
    server_ = std::make_unique<RunningServer>(std::move(config));
  }
  std::unique_ptr<RunningServer> server_;
};

TEST_F(ServerTest, HelloDescribesTheServer) {
  start();
  WireClient client(server_->endpoint());
  const json hello = client.ok("hello", {{"client", "server_test"}});
  EXPECT_EQ(hello["protocol_version"], 1);
  EXPECT_EQ(hello["server"], "kforge");
  EXPECT_EQ(hello["backend"], "cpu");
  EXPECT_TRUE(hello["device"].contains("name"));
  std::set<std::string> tools;
  for (const auto& t : hello["tools"]) tools.insert(t["function"]["name"].get<std::string>());
  for (const char* name : {"compile", "verify", "profile", "submit"}) EXPECT_TRUE(tools.count(name)) << name;
  EXPECT_EQ(hello["reward"]["paid_on"], "submit");
  EXPECT_EQ(hello["limits"]["num_envs"], 4);
  EXPECT_EQ(hello["envs"]["free"], 4);
  EXPECT_EQ(hello["episode"]["max_turns"], 4);
  EXPECT_NE(server_->endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  EXPECT_EQ(server_->endpoint().find(":0"), std::string::npos) << server_->endpoint();
}

TEST_F(ServerTest, CorrectCandidateEpisodeEndsWithPositiveRewardOnSubmit) {
  start();
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  const json reset = client.ok("reset", {{"env_id", env_id}, {"task", medium_task()}, {"seed", 7}});
  EXPECT_NE(reset["observation"]["text"].get<std::string>().find("kf_forward"), std::string::npos);
  EXPECT_EQ(reset["observation"]["data"]["messages"].size(), 2u);
  EXPECT_EQ(reset["info"]["seed"], 7);
  EXPECT_EQ(reset["info"]["task_id"], "test/scale_bias_relu_medium");

  const json compiled =
      client.ok("step", {{"env_id", env_id}, {"tool_call", call_with_source("compile", gym_data() / "correct.cpp")}});
  EXPECT_FALSE(compiled["terminated"].get<bool>());
  EXPECT_FALSE(compiled["truncated"].get<bool>());
  EXPECT_TRUE(compiled["info"]["measurement"]["compiled"].get<bool>()) << compiled["observation"]["text"];

  // No source: acts on the episode's last solution.
  const json verified = client.ok("step", {{"env_id", env_id}, {"tool_call", tool_call("verify")}});
  EXPECT_EQ(verified["info"]["measurement"]["outcome"], "correct") << verified["observation"]["text"];

  const json submitted = client.ok("step", {{"env_id", env_id}, {"tool_call", tool_call("submit")}});
  EXPECT_TRUE(submitted["terminated"].get<bool>());
  EXPECT_GT(submitted["reward"].get<double>(), 0.0) << submitted["observation"]["text"];
  EXPECT_EQ(submitted["info"]["reward_components"]["total"], submitted["reward"]);
  EXPECT_NE(submitted["observation"]["text"].get<std::string>().find("The episode is over"), std::string::npos);

  protocol::Reply after = client.call("step", {{"env_id", env_id}, {"tool_call", tool_call("submit")}});
  EXPECT_FALSE(after.ok);
  EXPECT_EQ(after.code, "episode_finished");

  // A typed action on a new episode, as a trainer's own code would send it.
  client.ok("reset", {{"env_id", env_id}, {"task", medium_task()}});
  const json typed = client.ok(
      "step", {{"env_id", env_id},
               {"action", {{"type", "submit"}, {"solution", {{"source", source_of(gym_data() / "correct.cpp")}}}}}});
  EXPECT_TRUE(typed["terminated"].get<bool>());
  EXPECT_GT(typed["reward"].get<double>(), 0.0) << typed["observation"]["text"];
}

TEST_F(ServerTest, WrongCandidateGetsFailureTextAndNegativeReward) {
  start();
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", env_id}, {"task", test_task()}});
  const json r =
      client.ok("step", {{"env_id", env_id}, {"tool_call", call_with_source("submit", gym_data() / "wrong.cpp")}});
  EXPECT_TRUE(r["terminated"].get<bool>());
  EXPECT_LT(r["reward"].get<double>(), 0.0);
  EXPECT_EQ(r["info"]["measurement"]["outcome"], "wrong");
  EXPECT_NE(r["observation"]["text"].get<std::string>().find("wrong"), std::string::npos) << r["observation"]["text"];
}

TEST_F(ServerTest, PolicyMistakesAreObservationsTrainerMistakesAreErrors) {
  start();
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", env_id}, {"task", test_task()}});

  // A tool call the policy got wrong: an observation, and a turn.
  const json bad_call =
      client.ok("step", {{"env_id", env_id}, {"tool_call", {{"name", "benchmark"}, {"arguments", "{"}}}});
  EXPECT_EQ(bad_call["observation"]["data"]["error"]["kind"], "invalid_action");
  EXPECT_NE(bad_call["observation"]["text"].get<std::string>().find("Invalid tool call"), std::string::npos);

  // A typed action the trainer got wrong: an error naming the field.
  protocol::Reply bad_action = client.call("step", {{"env_id", env_id}, {"action", {{"type", "sumbit"}}}});
  EXPECT_FALSE(bad_action.ok);
  EXPECT_EQ(bad_action.code, "invalid_action");
  EXPECT_EQ(bad_action.field, "/params/action/type");

  protocol::Reply file = client.call(
      "step", {{"env_id", env_id}, {"action", {{"type", "submit"}, {"solution", {{"source_file", "/etc/passwd"}}}}}});
  EXPECT_EQ(file.code, "invalid_action");
  EXPECT_EQ(file.field, "/params/action/solution/source_file");

  protocol::Reply both =
      client.call("step", {{"env_id", env_id}, {"tool_call", tool_call("verify")}, {"action", {{"type", "verify"}}}});
  EXPECT_EQ(both.code, "bad_request");

  protocol::Reply unknown_env = client.call("step", {{"env_id", 3}, {"tool_call", tool_call("verify")}});
  EXPECT_EQ(unknown_env.code, "unknown_env");
  EXPECT_EQ(unknown_env.field, "/params/env_id");

  protocol::Reply wrong_type = client.call("reset", {{"env_id", "zero"}, {"task", test_task()}});
  EXPECT_EQ(wrong_type.code, "bad_request");
  EXPECT_EQ(wrong_type.field, "/params/env_id");

  // MessagePack tells 1.0 from 1: a float env id is refused, naming the field.
  protocol::Reply float_env = client.call("reset", {{"env_id", static_cast<double>(env_id)}, {"task", test_task()}});
  EXPECT_EQ(float_env.code, "bad_request");
  EXPECT_EQ(float_env.field, "/params/env_id");
  EXPECT_NE(float_env.message.find("an integer"), std::string::npos) << float_env.message;
  EXPECT_NE(float_env.message.find("float"), std::string::npos) << float_env.message;
  protocol::Reply float_step = client.call("step", {{"env_id", 1.0}, {"tool_call", tool_call("verify")}});
  EXPECT_EQ(float_step.field, "/params/env_id");
  EXPECT_EQ(client.call("tasks", {{"limit", 2.0}}).field, "/params/limit");

  // Seeds: any uint64; the error states that range.
  EXPECT_EQ(client.ok("reset", {{"env_id", env_id}, {"task", test_task()}, {"seed", UINT64_MAX}})["info"]["seed"],
            UINT64_MAX);
  for (const json& bad : {json(-1), json(7.0), json("7")}) {
    protocol::Reply seed = client.call("reset", {{"env_id", env_id}, {"task", test_task()}, {"seed", bad}});
    EXPECT_EQ(seed.code, "bad_request") << bad;
    EXPECT_EQ(seed.field, "/params/seed") << bad;
    if (bad.is_number_integer()) {
      EXPECT_NE(seed.message.find("[0, 2^64-1]"), std::string::npos) << seed.message;
    }
  }

  protocol::Reply extra = client.call("reset", {{"env_id", env_id}, {"task", test_task()}, {"sed", 1}});
  EXPECT_EQ(extra.code, "bad_request");
  EXPECT_EQ(extra.field, "/params/sed");
  EXPECT_NE(extra.message.find("did you mean \"seed\""), std::string::npos) << extra.message;

  protocol::Reply method = client.call("stpe", {{"env_id", env_id}});
  EXPECT_EQ(method.code, "unknown_method");
  EXPECT_NE(method.message.find("did you mean \"step\""), std::string::npos);

  protocol::Reply not_reset =
      client.call("step", {{"env_id", client.ok("make")["env_id"]}, {"tool_call", tool_call("verify")}});
  EXPECT_EQ(not_reset.code, "no_episode");

  protocol::Reply task_id = client.call("reset", {{"env_id", env_id}, {"task_id", "nope"}});
  EXPECT_EQ(task_id.code, "unknown_task");
  EXPECT_EQ(task_id.field, "/params/task_id");
}

TEST_F(ServerTest, InvalidTaskNamesTheField) {
  start();
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];

  json bad_shape = test_task();
  bad_shape["inputs"][0]["shape"] = {64, -1};
  protocol::Reply shape = client.call("reset", {{"env_id", env_id}, {"task", bad_shape}});
  EXPECT_EQ(shape.code, "invalid_task");
  EXPECT_EQ(shape.field, "/params/task/inputs/0/shape/1") << shape.message;

  json typo = test_task();
  typo["nodes"][0]["inn"] = typo["nodes"][0]["in"];
  protocol::Reply unknown = client.call("reset", {{"env_id", env_id}, {"task", typo}});
  EXPECT_EQ(unknown.code, "invalid_task");
  EXPECT_EQ(unknown.field, "/params/task/nodes/0/inn") << unknown.message;

  // Parses, but does not type-check: w of shape [5] cannot scale x [64, 32].
  json mismatch = test_task();
  mismatch["params"][0]["shape"] = {5};
  protocol::Reply types = client.call("reset", {{"env_id", env_id}, {"task", mismatch}});
  EXPECT_EQ(types.code, "invalid_task");
  EXPECT_EQ(types.field.rfind("/params/task", 0), 0u) << types.field;

  protocol::Reply neither = client.call("reset", {{"env_id", env_id}});
  EXPECT_EQ(neither.code, "bad_request");

  // The env is still usable after all that.
  EXPECT_EQ(client.ok("reset", {{"env_id", env_id}, {"task", test_task()}})["info"]["env_id"], env_id);
}

TEST_F(ServerTest, GarbageNeverTakesTheServerDown) {
  start();
  WireClient client(server_->endpoint());
  std::string bomb(200000, '\x91');
  bomb += '\x01';
  const std::vector<std::string> garbage = {"",
                                            "not msgpack at all",
                                            std::string("\xc1\xc1\xc1", 3),
                                            std::string("\x93\x01", 2),
                                            bomb,
                                            std::string("\xdd\xff\xff\xff\xff", 5)};
  for (const auto& g : garbage) {
    client.send_raw(g);
    protocol::Reply r = client.next();
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.code, "bad_request");
    EXPECT_TRUE(r.id.is_null());
  }
  client.send_frames({"two", "frames"});
  EXPECT_EQ(client.next().code, "bad_request");

  std::string not_map;
  json::to_msgpack(json::array({1, 2, 3}), not_map);
  client.send_raw(not_map);
  EXPECT_EQ(client.next().code, "bad_request");

  std::string v2;
  json::to_msgpack(json{{"v", 2}, {"id", 99}, {"method", "hello"}}, v2);
  client.send_raw(v2);
  protocol::Reply version = client.next();
  EXPECT_EQ(version.code, "unsupported_version");
  EXPECT_EQ(version.id, json(99));

  EXPECT_EQ(client.ok("hello")["protocol_version"], 1);
  // A second client is served as well.
  WireClient other(server_->endpoint());
  EXPECT_EQ(other.ok("hello")["backend"], "cpu");
}

TEST_F(ServerTest, FuzzedRequestsAreEachAnsweredAndTheServerLives) {
  start();
  WireClient client(server_->endpoint());
  std::mt19937 rng(99);
  const std::vector<std::string> valid = {
      protocol::encode_request(1, "hello", {{"client", "fuzz"}}),
      protocol::encode_request(2, "reset", {{"env_id", 0}, {"task", test_task()}, {"seed", 1}}),
      protocol::encode_request(3, "step", {{"env_id", 0}, {"tool_call", tool_call("verify")}}),
      protocol::encode_request(4, "tasks", {{"offset", 0}}),
      protocol::encode_request(5, "close", {{"env_id", 0}}),
  };
  constexpr int kMessages = 400;
  for (int i = 0; i < kMessages; ++i) {
    std::string bytes = valid[static_cast<size_t>(i) % valid.size()];
    for (int e = 0; e < 3; ++e) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    client.send_raw(bytes);
  }
  // One reply per message: nothing the fuzz sends can start a step, as it
  // never gets a reset env of its own.
  for (int i = 0; i < kMessages; ++i) client.next();
  EXPECT_EQ(client.ok("hello")["protocol_version"], 1);
}

TEST_F(ServerTest, OversizedMessagesCostOnlyTheirSenderItsConnection) {
  ServerConfig config = test_server_config();
  config.max_message_bytes = 4096;
  start(std::move(config));
  WireClient big(server_->endpoint());
  big.send("hello", {{"client", std::string(10000, 'x')}});  // ZeroMQ drops this connection
  WireClient other(server_->endpoint());
  EXPECT_EQ(other.ok("hello")["limits"]["max_message_bytes"], 4096);
  EXPECT_EQ(other.ok("make")["env_id"], 0);
}

TEST_F(ServerTest, RepliesComeOutOfOrderAcrossEnvs) {
  start();
  WireClient client(server_->endpoint());
  const int slow = client.ok("make")["env_id"];
  const int fast = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", slow}, {"task", test_task()}});
  client.ok("reset", {{"env_id", fast}, {"task", test_task()}});

  // The slow step runs a candidate that never returns until the judge's call
  // timeout kills it; the fast one is a malformed call, answered without any
  // compile or evaluation.
  const uint64_t slow_id =
      client.send("step", {{"env_id", slow}, {"tool_call", call_with_source("verify", server_data() / "hang.cpp")}});
  const uint64_t busy_id = client.send("step", {{"env_id", slow}, {"tool_call", tool_call("verify")}});
  const uint64_t fast_id = client.send("step", {{"env_id", fast}, {"tool_call", {{"name", "nope"}}}});

  protocol::Reply first = client.next();
  EXPECT_EQ(first.id, json(busy_id));
  EXPECT_EQ(first.code, "env_busy");
  protocol::Reply second = client.next();
  EXPECT_EQ(second.id, json(fast_id));
  EXPECT_TRUE(second.ok);
  EXPECT_EQ(second.result["info"]["env_id"], fast);
  protocol::Reply third = client.next();
  EXPECT_EQ(third.id, json(slow_id));
  ASSERT_TRUE(third.ok) << third.message;
  EXPECT_EQ(third.result["info"]["env_id"], slow);
  EXPECT_EQ(third.result["info"]["measurement"]["outcome"], "timeout") << third.result["observation"]["text"];
}

TEST_F(ServerTest, StepsInFlightPerClientAreBounded) {
  ServerConfig config = test_server_config();
  config.max_inflight_per_client = 1;
  start(std::move(config));
  WireClient client(server_->endpoint());
  const int a = client.ok("make")["env_id"];
  const int b = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", a}, {"task", test_task()}});
  client.ok("reset", {{"env_id", b}, {"task", test_task()}});
  const uint64_t slow =
      client.send("step", {{"env_id", a}, {"tool_call", call_with_source("verify", server_data() / "hang.cpp")}});
  protocol::Reply refused = client.call("step", {{"env_id", b}, {"tool_call", tool_call("verify")}});
  EXPECT_EQ(refused.code, "too_many_requests");
  EXPECT_TRUE(client.wait(slow).ok);
  // With the first step answered, the client may step again.
  EXPECT_TRUE(client.call("step", {{"env_id", b}, {"tool_call", {{"name", "nope"}}}}).ok);
}

TEST_F(ServerTest, EnvsBelongToTheirClientAndThePoolIsBounded) {
  start(test_server_config(2));
  WireClient a(server_->endpoint());
  WireClient b(server_->endpoint());
  const int a0 = a.ok("make")["env_id"];
  const int b0 = b.ok("make")["env_id"];
  EXPECT_NE(a0, b0);
  protocol::Reply full = a.call("make");
  EXPECT_EQ(full.code, "pool_full");
  EXPECT_NE(full.message.find("--envs"), std::string::npos);

  protocol::Reply stolen = b.call("reset", {{"env_id", a0}, {"task", test_task()}});
  EXPECT_EQ(stolen.code, "unknown_env");
  EXPECT_EQ(b.call("close", {{"env_id", a0}}).code, "unknown_env");

  EXPECT_TRUE(a.ok("close", {{"env_id", a0}})["closed"].get<bool>());
  EXPECT_EQ(a.call("close", {{"env_id", a0}}).code, "unknown_env");
  EXPECT_EQ(b.ok("make")["env_id"], a0);
  EXPECT_EQ(a.ok("ping")["envs"], json::array());
  EXPECT_EQ(b.ok("ping")["envs"].size(), 2u);
}

TEST_F(ServerTest, EnvsOfAVanishedClientAreReclaimed) {
  ServerConfig config = test_server_config(2);
  config.idle_timeout_s = 1;
  start(std::move(config));
  WireClient observer(server_->endpoint());
  {
    // One client goes silent holding an env; another vanishes mid-step (its
    // reply bounces).
    WireClient silent(server_->endpoint());
    silent.ok("make");
    auto vanishing = std::make_unique<WireClient>(server_->endpoint());
    const int env_id = vanishing->ok("make")["env_id"];
    vanishing->ok("reset", {{"env_id", env_id}, {"task", test_task()}});
    vanishing->send("step",
                    {{"env_id", env_id}, {"tool_call", call_with_source("verify", server_data() / "hang.cpp")}});
    EXPECT_EQ(observer.ok("hello")["envs"]["held"], 2);
    vanishing.reset();
  }
  // Eventually both envs are free (no assertion on when).
  for (int i = 0; observer.ok("hello")["envs"]["held"] != 0; ++i) {
    ASSERT_LT(i, 1200) << "the envs were never reclaimed";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(observer.ok("make")["env_id"].is_number(), true);
}

TEST_F(ServerTest, StopCancelsStepsInFlightAndAnswersThem) {
  start();
  WireClient client(server_->endpoint());
  const int env_id = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", env_id}, {"task", test_task()}});
  const uint64_t id =
      client.send("step", {{"env_id", env_id}, {"tool_call", call_with_source("verify", server_data() / "hang.cpp")}});
  EXPECT_TRUE(client.ok("ping").contains("uptime_s"));  // the step is queued before the stop
  server_->stop();
  protocol::Reply r = client.wait(id);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.code, "shutting_down");
}

TEST_F(ServerTest, TaskSetServesResetsByIdAndIsListed) {
  ServerConfig config = test_server_config();
  config.tasks = load_task_set(std::filesystem::path(KFORGE_SOURCE_DIR) / "examples");
  config.tasks_source = "examples";
  start(std::move(config));
  WireClient client(server_->endpoint());
  const json tasks = client.ok("tasks");
  EXPECT_GE(tasks["count"].get<int>(), 5);
  EXPECT_EQ(tasks["task_ids"].size(), tasks["count"].get<size_t>());
  EXPECT_EQ(tasks["task_ids"][0], "example/affine_relu6");
  EXPECT_EQ(client.ok("tasks", {{"offset", 1}, {"limit", 2}})["task_ids"].size(), 2u);
  const int env_id = client.ok("make")["env_id"];
  const json reset = client.ok("reset", {{"env_id", env_id}, {"task_id", "example/affine_relu6"}});
  EXPECT_EQ(reset["info"]["task_id"], "example/affine_relu6");
  protocol::Reply typo = client.call("reset", {{"env_id", env_id}, {"task_id", "example/affine_relu7"}});
  EXPECT_EQ(typo.code, "unknown_task");
  EXPECT_NE(typo.message.find("did you mean \"example/affine_relu6\""), std::string::npos) << typo.message;
}

TEST(ServerEndpointTest, LocalEndpointsAreRecognized) {
  EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.1:5555"));
  EXPECT_TRUE(is_local_endpoint("tcp://localhost:0"));
  EXPECT_TRUE(is_local_endpoint("tcp://[::1]:5555"));
  EXPECT_TRUE(is_local_endpoint("ipc:///tmp/kforge.sock"));
  EXPECT_FALSE(is_local_endpoint("tcp://*:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://0.0.0.0:5555"));
  EXPECT_FALSE(is_local_endpoint("tcp://10.1.2.3:5555"));
}

}  // namespace
}  // namespace kforge::env
