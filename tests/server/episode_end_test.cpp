// Ending an episode on the trainer's word (step param `end`, EnvPool::end_episodes) and giving
// the envs of quiet clients to a client that needs one (reclaim_after_s): the env server
// in-process, real compiles and judge/runner processes (CPU backend).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server_test_util.h"

namespace kforge::env {
namespace {

namespace protocol = kforge::rpc;
using testing::gym_data;
using testing::RunningServer;
using testing::source_of;
using testing::test_server_config;
using testing::tool_call;
using testing::WireClient;

json test_task() { return testing::read_json(gym_data() / "scale_bias_relu.json"); }

json call_with_source(const std::string& tool, const std::string& file) {
  return tool_call(tool, {{"source", source_of(gym_data() / file)}});
}

// One episode on a fresh env: `steps` tool calls, then (unless a step ended
// it) `end` with `reason`. Returns the episode's return and its last result.
std::pair<double, json> episode(WireClient& client, const std::vector<json>& steps, const std::string& reason) {
  const int env_id = client.ok("make")["env_id"];
  client.ok("reset", {{"env_id", env_id}, {"task", test_task()}, {"seed", 3}});
  double total = 0.0;
  json last;
  for (const json& call : steps) {
    last = client.ok("step", {{"env_id", env_id}, {"tool_call", call}});
    total += last["reward"].get<double>();
  }
  if (last.is_null() || !(last["terminated"].get<bool>() || last["truncated"].get<bool>())) {
    last = client.ok("step", {{"env_id", env_id}, {"end", reason}});
    total += last["reward"].get<double>();
  }
  client.ok("close", {{"env_id", env_id}});
  return {total, last};
}

TEST(EpisodeEndTest, EndingFollowsTheTruncationRuleSoStoppingNeverBeatsTrying) {
  RunningServer server(test_server_config(2));
  WireClient client(server.endpoint());

  // The policy never called a tool: the value of a failed submission.
  const auto [abstained, nothing] = episode(client, {}, "policy_stopped");
  EXPECT_TRUE(nothing["truncated"].get<bool>());
  EXPECT_FALSE(nothing["terminated"].get<bool>());
  EXPECT_EQ(nothing["info"]["action"], "end");
  EXPECT_FALSE(nothing["info"]["counted_turn"].get<bool>());
  EXPECT_EQ(nothing["info"]["truncation_reason"], "policy_stopped");
  EXPECT_FALSE(nothing["info"]["final_evaluation"]["auto_submitted"].get<bool>());
  EXPECT_EQ(nothing["info"]["budget"]["turns_used"], 0);
  EXPECT_NE(nothing["observation"]["text"].get<std::string>().find("the trainer ended it (policy_stopped)"),
            std::string::npos)
      << nothing["observation"]["text"];

  // A wrong submission and a compile error: each pays at least abstaining.
  const auto [wrong, wrong_result] = episode(client, {call_with_source("submit", "wrong.cpp")}, "policy_stopped");
  const auto [broken, broken_result] =
      episode(client, {call_with_source("compile", "compile_error.cpp")}, "context_length");
  EXPECT_EQ(wrong_result["info"]["measurement"]["outcome"], "wrong");
  EXPECT_EQ(broken_result["info"]["final_evaluation"]["measurement"]["outcome"], "compile_error");
  EXPECT_LE(abstained, wrong) << "abstaining " << abstained << " vs a wrong submission " << wrong;
  EXPECT_LE(abstained, broken) << "abstaining " << abstained << " vs a compile error " << broken;

  // A correct solution left unsubmitted is scored as the submission.
  const auto [kept, kept_result] = episode(client, {call_with_source("verify", "correct.cpp")}, "turn_limit");
  const json& fin = kept_result["info"]["final_evaluation"];
  EXPECT_TRUE(fin["auto_submitted"].get<bool>());
  EXPECT_EQ(fin["measurement"]["outcome"], "correct") << kept_result["observation"]["text"];
  EXPECT_EQ(fin["measurement"]["action"], "submit");
  EXPECT_GT(kept, wrong);
}

TEST(EpisodeEndTest, EndIsCheckedLikeAnyStepParam) {
  RunningServer server(test_server_config(1));
  WireClient client(server.endpoint());
  const int env_id = client.ok("make")["env_id"];
  EXPECT_EQ(client.call("step", {{"env_id", env_id}, {"end", "policy_stopped"}}).code, "no_episode");
  client.ok("reset", {{"env_id", env_id}, {"task", test_task()}});
  protocol::Reply bad = client.call("step", {{"env_id", env_id}, {"end", "bored"}});
  EXPECT_EQ(bad.code, "bad_request");
  EXPECT_EQ(bad.field, "/params/end");
  EXPECT_NE(bad.message.find("policy_stopped"), std::string::npos) << bad.message;
  protocol::Reply both =
      client.call("step", {{"env_id", env_id}, {"end", "turn_limit"}, {"tool_call", tool_call("verify")}});
  EXPECT_EQ(both.code, "bad_request");
  EXPECT_EQ(client.call("step", {{"env_id", env_id}, {"end", 7}}).code, "bad_request");
  client.ok("step", {{"env_id", env_id}, {"end", "turn_limit"}});
  EXPECT_EQ(client.call("step", {{"env_id", env_id}, {"end", "turn_limit"}}).code, "episode_finished");
}

TEST(EpisodeEndTest, AQuietClientsEnvsGoToAClientThatNeedsOne) {
  ServerConfig config = test_server_config(1);
  ASSERT_EQ(config.idle_timeout_s, 0.0) << "envs outlive silence by default";
  config.reclaim_after_s = 0.5;
  RunningServer server(std::move(config));
  WireClient quiet(server.endpoint());
  WireClient busy(server.endpoint());
  const int held = quiet.ok("make")["env_id"];
  // Quiet for less than reclaim_after_s: the pool is full.
  EXPECT_EQ(busy.call("make").code, "pool_full");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(busy.ok("make")["env_id"], held);
  protocol::Reply lost = quiet.call("reset", {{"env_id", held}, {"task", test_task()}});
  EXPECT_EQ(lost.code, "unknown_env");
  EXPECT_NE(lost.message.find("--reclaim-after"), std::string::npos) << lost.message;
}

}  // namespace
}  // namespace kforge::env
