// Rollout workers end to end on the CPU backend (real compiles, judge and
// runner processes): groups and their rewards, contrastive prompts,
// staleness, budgets, policy errors, forking, and the JSONL output.
#include "kforge/rollout/worker/rollout_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "kforge/core/remove_tree.h"
#include "kforge/reward/reward.h"
#include "kforge/rollout/jsonl_sink.h"
#include "kforge/rollout/policy/template_policy.h"
#include "kforge/rollout/trajectory_info.h"
#include "rollout_test_util.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

// A policy written as a function of one request (the tests' scripted agents).
class ScriptedPolicy : public Policy {
 public:
  using Fn = std::function<PolicyReply(const PolicyRequest&)>;
  explicit ScriptedPolicy(
      Fn fn, std::function<std::string()> version = [] { return std::string("7"); })
      : fn_(std::move(fn)), version_(std::move(version)) {}
  std::vector<PolicyReply> act(const std::vector<PolicyRequest>& requests) override {
    ++calls;
    const std::string v = version_();
    std::vector<PolicyReply> out;
    for (const auto& r : requests) {
      PolicyReply p = fn_(r);
      if (p.policy_version.empty()) p.policy_version = v;
      out.push_back(std::move(p));
    }
    return out;
  }
  std::string describe() const override { return "scripted"; }
  std::atomic<int> calls{0};

 private:
  Fn fn_;
  std::function<std::string()> version_;
};

std::string read_file(const fs::path& p) { return read_text_file(p); }

std::string correct_source() { return read_file(fs::path(KFORGE_SOURCE_DIR) / "tests/gym/data/correct.cpp"); }

PolicyReply call(const std::string& tool, const json& args, int turn = 0) {
  PolicyReply r;
  r.content = "calling " + tool;
  r.tool_calls = json::array({{{"id", "c" + std::to_string(turn)},
                               {"type", "function"},
                               {"function", {{"name", tool}, {"arguments", args.dump()}}}}});
  r.token_ids = std::vector<int64_t>{101, 102, 103};
  r.logprobs = std::vector<double>{-0.5, -0.25, -0.125};
  r.usage = {{"prompt_tokens", 100 + turn}, {"completion_tokens", 3}, {"total_tokens", 103 + turn}};
  r.finish_reason = "tool_calls";
  return r;
}

class RolloutRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(KFORGE_BINARY_DIR) / "tests/rollout/tmp" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    kforge::remove_tree(dir_);
    fs::create_directories(dir_);
  }

  // The scale_bias_relu test task with the rollout tests' environment.
  RolloutConfig config(int groups, int group_size) {
    RolloutConfig c;
    c.env = (testing::data_dir() / "env.yaml").string();
    c.tasks = fs::path(KFORGE_SOURCE_DIR) / "tests/gym/data/scale_bias_relu.json";
    c.groups = groups;
    c.group_size = group_size;
    c.concurrency = group_size;
    c.output = dir_ / "trajectories.jsonl";
    return c;
  }

  std::vector<Trajectory> run(const RolloutConfig& c, std::shared_ptr<Policy> policy, RolloutStats* stats = nullptr,
                              RolloutRunner* runner_out = nullptr) {
    JsonlTrajectorySink sink(c.output);
    RolloutRunner runner(c, std::move(policy), {&sink}, services());
    const RolloutStats s = runner.run();
    if (stats) *stats = s;
    return read_trajectories(c.output);
  }

  // One compile cache for every test (compiles of the same source are hits).
  env::EnvServices services() { return {}; }

  fs::path dir_;
};

TEST_F(RolloutRunnerTest, GroupsCompleteAndCarryTheirRewardsAndThePolicysTokens) {
  auto policy = std::make_shared<ScriptedPolicy>([](const PolicyRequest& r) {
    // Two members submit the correct kernel, one a wrong one: rewards differ.
    const bool wrong = r.episode_id.back() == '2';
    std::string source = correct_source();
    if (wrong) source.replace(source.find("v > 0.0f ? v : 0.0f"), 19, "v");
    return call("submit", {{"source", source}});
  });
  RolloutConfig c = config(2, 3);
  c.group_normalization = GroupNormalization::kMeanStd;
  RolloutStats stats;
  const std::vector<Trajectory> trajectories = run(c, policy, &stats);
  ASSERT_EQ(trajectories.size(), 6u);
  EXPECT_EQ(stats.groups_completed, 2);
  EXPECT_EQ(stats.terminated, 6);
  std::map<std::string, std::vector<const Trajectory*>> groups;
  for (const auto& t : trajectories) {
    groups[t.group_id].push_back(&t);
    ASSERT_EQ(t.turns.size(), 1u);
    EXPECT_TRUE(t.terminated);
    EXPECT_EQ(t.policy_version_start, "7");
    EXPECT_EQ(t.turns[0].info["policy"]["token_ids"], json({101, 102, 103}));
    EXPECT_EQ(t.turns[0].info["policy"]["logprobs"], json({-0.5, -0.25, -0.125}));
    EXPECT_EQ(t.turns[0].info["policy"]["usage"]["total_tokens"], 103);
    EXPECT_EQ(t.info["usage"], json({{"prompt_tokens", 100}, {"completion_tokens", 3}, {"total_tokens", 103}}));
    // The chat: assistant tool call, then the tool's answer to that call id.
    ASSERT_EQ(t.turns[0].messages.size(), 2u);
    EXPECT_EQ(t.turns[0].messages[1]["role"], "tool");
    EXPECT_EQ(t.turns[0].messages[1]["tool_call_id"], "c0");
    EXPECT_EQ(t.info["prompt"]["messages"][0]["role"], "system");
    EXPECT_TRUE(t.info.contains("task") && t.info.contains("seed"));
    EXPECT_TRUE(t.turns[0].timings.contains("policy_ms"));
    const bool wrong = t.id.back() == '2';
    EXPECT_EQ(t.turns[0].info["env"]["measurement"]["outcome"], wrong ? "wrong" : "correct") << t.id;
    // The typed readers (trajectory_info.h) read back exactly what the worker wrote.
    EXPECT_EQ(to_json(trajectory_info_from_json(t.info, t.id)), t.info);
    const TurnInfo turn = turn_info_from_json(t.turns[0].info, t.id);
    EXPECT_EQ(to_json(turn), t.turns[0].info);
    ASSERT_TRUE(turn.policy && turn.state && turn.env);
    EXPECT_EQ(turn.policy->token_ids, (std::vector<int64_t>{101, 102, 103}));
    EXPECT_EQ(turn.state->solution_turn, 0);
    EXPECT_TRUE(turn.env->tool_call.is_null()) << "the turn's action holds the call";
  }
  for (const auto& [id, members] : groups) {
    ASSERT_EQ(members.size(), 3u) << id;
    double sum = 0;
    std::set<uint64_t> seeds;
    for (const Trajectory* t : members) {
      const json& g = t->info["group"];
      EXPECT_EQ(g["size"], 3);
      EXPECT_EQ(g["normalization"], "mean_std");
      ASSERT_TRUE(g["advantage"].is_number()) << g.dump();
      sum += g["advantage"].get<double>();
      seeds.insert(t->info["seed"].get<uint64_t>());
      // The wrong member is below the group's mean.
      if (t->id.back() == '2') {
        EXPECT_LT(g["advantage"].get<double>(), 0.0);
      }
    }
    EXPECT_NEAR(sum, 0.0, 1e-9);
    EXPECT_EQ(seeds.size(), 3u) << "the episodes of a group differ by seed";
  }
}

TEST_F(RolloutRunnerTest, TheContrastivePresetsGroupNormalizationIsUsedByDefault) {
  auto policy = std::make_shared<TemplatePolicy>(TemplateConfig{"cpp", 0, 3});
  RolloutConfig c = config(1, 3);
  c.env = (testing::data_dir() / "env_contrastive.yaml").string();
  const std::vector<Trajectory> trajectories = run(c, policy);
  ASSERT_EQ(trajectories.size(), 3u);
  std::vector<double> totals, advantages;
  for (const auto& t : trajectories) {
    EXPECT_EQ(t.info["group"]["normalization"], "mean_std");
    EXPECT_TRUE(t.turns.back().reward_components.contains("contrastive")) << t.turns.back().reward_components.dump();
    totals.push_back(t.total_reward);
    advantages.push_back(t.info["group"]["advantage"].get<double>());
  }
  // mean_std over the group's totals, sample std, as RewardFunction computes it.
  const std::vector<double> expected = reward::RewardFunction::load("contrastive").normalize_group(totals);
  for (size_t i = 0; i < totals.size(); ++i) EXPECT_NEAR(advantages[i], expected[i], 1e-6);
}

TEST_F(RolloutRunnerTest, AutoNormalizationUsesTheRewardsStdKindAndEps) {
  // The reward file asks for the population std and eps 0.5; the advantages
  // must be what RewardFunction::normalize_group computes with those, not a
  // sample std with eps 1e-6. One member submits a wrong kernel: its penalty
  // (-1.5) is below any correct member's reward (clipped to [-1, 1]), so the
  // totals differ however the machine's load moves the measured speedups.
  auto policy = std::make_shared<ScriptedPolicy>([](const PolicyRequest& r) {
    std::string source = correct_source();
    if (r.episode_id.back() == '2') source.replace(source.find("v > 0.0f ? v : 0.0f"), 19, "v");
    return call("submit", {{"source", source}});
  });
  RolloutConfig c = config(1, 3);
  c.env = (testing::data_dir() / "env_population_std.yaml").string();
  const std::vector<Trajectory> trajectories = run(c, policy);
  ASSERT_EQ(trajectories.size(), 3u);
  std::vector<double> totals, advantages;
  for (const auto& t : trajectories) {
    EXPECT_EQ(t.info["group"]["normalization"], "mean_std");
    totals.push_back(t.total_reward);
    advantages.push_back(t.info["group"]["advantage"].get<double>());
  }
  // Distinct totals, or every normalization gives zeros.
  ASSERT_EQ(*std::min_element(totals.begin(), totals.end()), -1.5);
  ASSERT_GE(*std::max_element(totals.begin(), totals.end()), -1.0);
  const auto reward = reward::RewardFunction::load((testing::data_dir() / "reward_population_std.yaml").string());
  const std::vector<double> expected = reward.normalize_group(totals);
  for (size_t i = 0; i < totals.size(); ++i) EXPECT_NEAR(advantages[i], expected[i], 1e-9) << i;
}

TEST_F(RolloutRunnerTest, ContrastivePromptsShowEarlierSolutionsWithTheirSpeedups) {
  auto policy = std::make_shared<ScriptedPolicy>([](const PolicyRequest&) {
    return call("submit", {{"source", correct_source()}});
  });
  RolloutConfig c = config(2, 2);
  c.exemplars = 2;
  c.tasks = fs::path(KFORGE_SOURCE_DIR) / "tests/gym/data/scale_bias_relu_timed.json";
  const std::vector<Trajectory> trajectories = run(c, policy);
  ASSERT_EQ(trajectories.size(), 4u);
  // The first group had nothing to show; the second shows the first's kernel.
  const std::string first_group = trajectories.front().group_id;
  int shown = 0;
  for (const auto& t : trajectories) {
    if (t.group_id == first_group) {
      EXPECT_TRUE(t.info["exemplars"].empty());
      continue;
    }
    ASSERT_EQ(t.info["exemplars"].size(), 1u) << "identical solutions are kept once";
    EXPECT_GT(t.info["exemplars"][0]["speedup_eager"].get<double>(), 0.0);
    const std::string prompt = t.info["prompt"]["messages"][1]["content"].get<std::string>();
    EXPECT_NE(prompt.find("fused pass"), std::string::npos) << "the exemplar's source is in the prompt";
    ++shown;
  }
  EXPECT_EQ(shown, 2);
}

TEST_F(RolloutRunnerTest, StaleEpisodesAreDroppedAndRequeued) {
  // Turn 0 verifies, turn 1 submits. The first batch is answered by version
  // 1; every later one by version 11: episodes that started at 1 end 10
  // versions behind the newest and are dropped.
  std::atomic<int> batches{0};
  auto policy = std::make_shared<ScriptedPolicy>(
      [](const PolicyRequest& r) {
        return call(r.turn == 0 ? "verify" : "submit", {{"source", correct_source()}}, r.turn);
      },
      [&batches] { return std::string(batches++ == 0 ? "1" : "11"); });
  RolloutConfig c = config(1, 2);
  c.max_policy_lag = 5;
  RolloutStats stats;
  const std::vector<Trajectory> trajectories = run(c, policy, &stats);
  EXPECT_EQ(stats.stale_dropped, 2);
  EXPECT_EQ(stats.stale_abandoned, 0);
  ASSERT_EQ(trajectories.size(), 2u);
  for (const auto& t : trajectories) {
    EXPECT_EQ(t.policy_version_start, "11");
    EXPECT_EQ(t.policy_version_end, "11");
    EXPECT_NE(t.id.find("r1"), std::string::npos) << t.id << " is the re-queued attempt";
    EXPECT_EQ(t.turns.size(), 2u);
  }
}

TEST_F(RolloutRunnerTest, TurnBudgetTruncatesAndAutoSubmits) {
  auto policy = std::make_shared<ScriptedPolicy>([](const PolicyRequest& r) {
    return call("compile", {{"source", correct_source()}}, r.turn);
  });
  RolloutConfig c = config(1, 1);
  c.max_turns = 2;
  RolloutStats stats;
  const std::vector<Trajectory> trajectories = run(c, policy, &stats);
  ASSERT_EQ(trajectories.size(), 1u);
  const Trajectory& t = trajectories[0];
  EXPECT_TRUE(t.truncated);
  EXPECT_EQ(t.info["truncation_reason"], "max_turns");
  ASSERT_EQ(t.turns.size(), 2u);
  const json& fin = t.turns[1].info["env"]["final_evaluation"];
  EXPECT_TRUE(fin["auto_submitted"].get<bool>()) << fin.dump();
  EXPECT_EQ(fin["measurement"]["outcome"], "correct");
  EXPECT_EQ(stats.truncated, 1);
  // Token counts add up over the turns (turn k reports 100 + k prompt tokens).
  EXPECT_EQ(t.turns[1].info["policy"]["usage"]["prompt_tokens"], 101);
  EXPECT_EQ(t.info["usage"], json({{"prompt_tokens", 201}, {"completion_tokens", 6}, {"total_tokens", 207}}));
}

TEST_F(RolloutRunnerTest, WallTimeTruncatesBetweenTurns) {
  auto policy = std::make_shared<ScriptedPolicy>([](const PolicyRequest& r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return call("compile", {{"source", correct_source()}}, r.turn);
  });
  RolloutConfig c = config(1, 1);
  c.max_turns = 50;
  // The clock starts at the first observation, so however long the reset
  // took on a loaded machine the first turn is played; the policy's first
  // answer alone overruns the limit.
  c.wall_time_s = 2.0;
  const std::vector<Trajectory> trajectories = run(c, policy);
  ASSERT_EQ(trajectories.size(), 1u);
  EXPECT_EQ(trajectories[0].info["truncation_reason"], "wall_time");
  EXPECT_EQ(trajectories[0].turns.size(), 1u);
  EXPECT_GE(trajectories[0].info["timings"]["episode_ms"].get<double>(), 2500.0);
  EXPECT_GE(trajectories[0].info["timings"]["reset_ms"].get<double>(), 0.0);
}

TEST_F(RolloutRunnerTest, APolicyErrorTruncatesWithoutPenalty) {
  // Member 1 cannot be answered at its second turn (a server timeout, say).
  auto policy = std::make_shared<ScriptedPolicy>([](const PolicyRequest& r) {
    if (r.turn == 1 && r.episode_id.back() == '1') {
      PolicyReply e;
      e.error = "the policy server timed out";
      return e;
    }
    return call(r.turn == 0 ? "verify" : "submit", {{"source", correct_source()}}, r.turn);
  });
  RolloutConfig c = config(1, 3);
  c.group_normalization = GroupNormalization::kMean;
  RolloutStats stats;
  const std::vector<Trajectory> trajectories = run(c, policy, &stats);
  ASSERT_EQ(trajectories.size(), 3u);
  EXPECT_EQ(stats.policy_errors, 1);
  for (const auto& t : trajectories) {
    if (t.id.back() != '1') {
      EXPECT_TRUE(t.terminated);
      EXPECT_TRUE(t.info["group"]["advantage"].is_number());
      continue;
    }
    EXPECT_TRUE(t.truncated);
    EXPECT_EQ(t.info["truncation_reason"], "policy_error");
    EXPECT_NE(t.info["policy_error"].get<std::string>().find("timed out"), std::string::npos);
    ASSERT_EQ(t.turns.size(), 1u);
    // No failure reward: the verify turn's 0 (tiered pays on the final step).
    EXPECT_EQ(t.total_reward, 0.0);
    EXPECT_TRUE(t.info["group"]["advantage"].is_null()) << "left out of the group's normalization";
    EXPECT_EQ(t.info["group"]["members_normalized"], 2);
  }
}

TEST_F(RolloutRunnerTest, AForkContinuesARecordedTurnWithTheRestoredState) {
  // The original: verify (turn 0), profile (turn 1), submit (turn 2).
  auto original = std::make_shared<ScriptedPolicy>([](const PolicyRequest& r) {
    static const char* kTools[] = {"verify", "profile", "submit"};
    return call(kTools[std::min(r.turn, 2)], {{"source", correct_source()}}, r.turn);
  });
  RolloutConfig c = config(1, 1);
  const std::vector<Trajectory> parents = run(c, original);
  ASSERT_EQ(parents.size(), 1u);
  const Trajectory& parent = parents[0];
  ASSERT_EQ(parent.turns.size(), 3u);

  // The forks act on "the most recent solution" without sending a source:
  // only a restored environment can run that.
  std::vector<std::string> seen_last_messages;
  auto forked = std::make_shared<ScriptedPolicy>([&](const PolicyRequest& r) {
    seen_last_messages.push_back(r.messages.back().value("content", ""));
    return call(r.turn == 1 ? "verify" : "submit", json::object(), r.turn);
  });
  RolloutConfig fc = c;
  fc.output = dir_ / "forks.jsonl";
  JsonlTrajectorySink sink(fc.output);
  RolloutRunner runner(fc, forked, {&sink});
  runner.add_fork(parent, 0, 2);
  const RolloutStats stats = runner.run();
  EXPECT_EQ(stats.groups_completed, 1);
  const std::vector<Trajectory> forks = read_trajectories(fc.output);
  ASSERT_EQ(forks.size(), 2u);
  for (const auto& f : forks) {
    EXPECT_EQ(f.info["fork"]["parent"], parent.id);
    EXPECT_EQ(f.info["fork"]["turn"], 0);
    EXPECT_EQ(f.info["seed"], parent.info["seed"]) << "same verification inputs";
    ASSERT_EQ(f.turns.size(), 3u) << "the parent's turn 0, then the fork's turns 1 and 2";
    EXPECT_EQ(to_json(f.turns[0]), to_json(parent.turns[0]));
    const json& env1 = f.turns[1].info["env"];
    EXPECT_TRUE(env1["error"].is_null()) << env1["error"].dump();
    // Budgets continue: the fork's first turn is the episode's second.
    EXPECT_EQ(env1["turn"], 1);
    EXPECT_EQ(env1["budget"]["turns_used"], 2);
    EXPECT_EQ(env1["solution_hash"], parent.turns[0].info["env"]["solution_hash"]) << "the restored solution";
    EXPECT_EQ(env1["measurement"]["outcome"], "correct");
    EXPECT_NE(f.turns[1].observation.text.find("turn 2/"), std::string::npos) << f.turns[1].observation.text;
    EXPECT_TRUE(f.terminated);
  }
  // The policy saw the parent's chat up to turn 0: its last message is the
  // tool's answer to turn 0.
  ASSERT_FALSE(seen_last_messages.empty());
  EXPECT_EQ(seen_last_messages[0], parent.turns[0].messages[1]["content"].get<std::string>());

  // Forking the last turn of a finished episode is refused.
  RolloutRunner again(fc, forked, {});
  EXPECT_THROW(again.add_fork(parent, 2, 1), InputError);
  EXPECT_THROW(again.add_fork(parent, 7, 1), InputError);
  // A parent whose recorded infos are not what a worker writes is refused
  // with the field named, before anything runs.
  auto fork_error = [&](const Trajectory& p) -> std::string {
    try {
      again.add_fork(p, 0, 1);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  Trajectory broken = parent;
  broken.turns[0].info["state"]["turns_used"] = "one";
  EXPECT_NE(fork_error(broken).find("turn 0 info: field /state/turns_used"), std::string::npos) << fork_error(broken);
  broken = parent;
  broken.turns[0].info["state"]["solution_turn"] = 5;
  EXPECT_NE(fork_error(broken).find("solution_turn is 5"), std::string::npos) << fork_error(broken);
  broken = parent;
  broken.info.erase("prompt");
  EXPECT_NE(fork_error(broken).find("info.prompt"), std::string::npos) << fork_error(broken);
}

TEST_F(RolloutRunnerTest, TheSeedSelectsTheVerificationInputs) {
  env::EnvPool pool(testing::test_env_config(), 2);
  const TaskSpec task = load_task(fs::path(KFORGE_SOURCE_DIR) / "tests/gym/data/scale_bias_relu.json");
  Solution s;
  s.mode = SolutionMode::kCpp;
  s.source = correct_source();
  Action verify;
  verify.type = ActionType::kVerify;
  verify.solution = s;
  auto input_seeds = [&](uint64_t seed) {
    pool.reset(0, task, seed);
    pool.send({verify}, {0});
    const env::EnvStep step = pool.recv(1)[0];
    std::set<uint64_t> seeds;
    if (!step.result.info.eval_report) return seeds;
    for (const auto& c : step.result.info.eval_report->verification) {
      seeds.insert(c.value("input_seed", c["seed"].get<uint64_t>()));
    }
    return seeds;
  };
  EXPECT_EQ(input_seeds(0), (std::set<uint64_t>{0, 1, 2, 3, 4}));
  const uint64_t base = env::splitmix64(3);
  EXPECT_EQ(input_seeds(3), (std::set<uint64_t>{base, base + 1, base + 2, base + 3, base + 4}));
  EXPECT_EQ(input_seeds(3), input_seeds(3)) << "a replay with the same seed sees the same inputs";
  // seed * 1000 wrapped in 64 bits: 2^61 * 1000 = 0 (mod 2^64) judged seed
  // 2^61 on seed 0's inputs, and 2^61 + 1 on seed 1's.
  const uint64_t two61 = uint64_t{1} << 61;
  std::set<uint64_t> high = input_seeds(two61);
  EXPECT_EQ(high.size(), 5u);
  for (uint64_t in : input_seeds(0)) EXPECT_EQ(high.count(in), 0u) << in;
  const std::set<uint64_t> high1 = input_seeds(two61 + 1);
  for (uint64_t in : input_seeds(1)) EXPECT_EQ(high1.count(in), 0u) << in;
  EXPECT_EQ(input_seeds(UINT64_MAX).size(), 5u) << "the largest seed is a seed like any other";
}

TEST(VerificationInputSeedTest, SeedsThatCollidedUnderAMultiplicationGetDisjointWindows) {
  // Seeds whose products with 1000 wrap onto each other in 64 bits, and the
  // ends of the range.
  std::vector<uint64_t> seeds = {0, 1, 2, 3, UINT64_MAX, UINT64_MAX - 1, uint64_t{1} << 63};
  for (uint64_t k = 0; k < 64; ++k) {
    seeds.push_back((uint64_t{1} << 61) * k);
    seeds.push_back((uint64_t{1} << 61) * k + 1);
  }
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  for (size_t i = 0; i < seeds.size(); ++i) {
    for (size_t j = i + 1; j < seeds.size(); ++j) {
      const uint64_t a = env::verification_input_seed(seeds[i]);
      const uint64_t b = env::verification_input_seed(seeds[j]);
      // Windows [a, a + 1000) and [b, b + 1000) in wrapping arithmetic.
      EXPECT_GE(b - a, env::kMaxVerificationSeeds) << seeds[i] << " and " << seeds[j];
      EXPECT_GE(a - b, env::kMaxVerificationSeeds) << seeds[i] << " and " << seeds[j];
    }
  }
  EXPECT_EQ(env::verification_input_seed(0), 0u) << "seed 0 keeps the inputs 0..seeds-1";
  EXPECT_EQ(env::verification_input_seed(7), env::verification_input_seed(7));
}

TEST(RolloutConfigTest, ErrorsNameTheFieldAndLine) {
  auto error_of = [](const std::string& yaml) {
    try {
      parse_rollout_config(Document::from_yaml_text(yaml, "r.yaml"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("tasks: t.jsonl\ngroup_sise: 3\n").find("group_size"), std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\ngroup_size: 0\n").find("group_size"), std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\npolicy: {kind: zmq}\n").find("endpoint"), std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\npolicy: {kind: llama}\n").find("kind"), std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\ngroup_size: 8\nconcurrency: 4\n").find("concurrency"), std::string::npos);
  EXPECT_NE(error_of("groups: 2\n").find("tasks"), std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\nepisode: {wall_time_s: -1}\n").find("r.yaml:2"), std::string::npos);
  EXPECT_EQ(error_of("tasks: t.jsonl\n"), "");
  // The stream section: endpoint required, worker ids bounded, keys known.
  EXPECT_NE(error_of("tasks: t.jsonl\nstream: {worker_id: w}\n").find("endpoint"), std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\nstream: {endpoint: localhost}\n").find("/stream/endpoint"), std::string::npos);
  EXPECT_NE(
      error_of("tasks: t.jsonl\nstream: {endpoint: tcp://127.0.0.1:1, worker_id: \"a b\"}\n").find("/stream/worker_id"),
      std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\nstream: {endpoint: tcp://127.0.0.1:1, spool: x}\n").find("spool"),
            std::string::npos);
  const RolloutConfig streamed = parse_rollout_config(Document::from_yaml_text(
      "tasks: t.jsonl\nstream: {endpoint: tcp://127.0.0.1:9, worker_id: w7, flush_timeout_s: 5}\n", "r.yaml"));
  EXPECT_EQ(streamed.stream.endpoint, "tcp://127.0.0.1:9");
  EXPECT_EQ(streamed.stream.spool_path(), fs::path("rollout-spool/w7"));
  EXPECT_EQ(streamed.stream.flush_timeout_s, 5.0);
  // kind openai: the HTTP policy's own reader checks its fields; without
  // libcurl the kind itself is refused, saying why.
#ifdef KFORGE_HAVE_CURL
  const RolloutConfig openai = parse_rollout_config(Document::from_yaml_text(
      "tasks: t.jsonl\npolicy: {kind: openai, base_url: \"http://127.0.0.1:8000/v1\", model: m,\n"
      "  max_retries: 2, sampling: {temperature: 0.5}}\n",
      "r.yaml"));
  EXPECT_EQ(openai.policy.kind, PolicyKind::kOpenAi);
  EXPECT_EQ(openai.policy.openai.model, "m");
  EXPECT_EQ(openai.policy.openai.max_retries, 2);
  EXPECT_EQ(openai.policy.sampling.temperature, 0.5);
  EXPECT_EQ(to_json(openai)["policy"]["kind"], "openai");
  EXPECT_NE(error_of("tasks: t.jsonl\npolicy: {kind: openai, model: m, max_retries: 1000}\n").find("max_retries"),
            std::string::npos);
  EXPECT_NE(error_of("tasks: t.jsonl\npolicy: {kind: openai, model: m, endpoint: x}\n").find("endpoint"),
            std::string::npos);
  EXPECT_NE(make_policy(openai.policy)->describe().find("model=m"), std::string::npos);
#else
  EXPECT_NE(error_of("tasks: t.jsonl\npolicy: {kind: openai, model: m}\n").find("libcurl"), std::string::npos);
#endif
  // The shipped config parses.
  EXPECT_NO_THROW(load_rollout_config(fs::path(KFORGE_SOURCE_DIR) / "configs/rollout.yaml"));
}

// "baseline" was the template policy's name before it meant only the eager
// reference time: configs that say it load the same policy and warn.
TEST(RolloutConfigTest, BaselineIsTheDeprecatedSpellingOfTemplate) {
  const auto parse = [](const std::string& policy) {
    return parse_rollout_config(Document::from_yaml_text("tasks: t.jsonl\npolicy: " + policy + "\n", "r.yaml"));
  };
  const RolloutConfig now = parse("{kind: template, template: {mode: cpp, explore_turns: 1, seed: 5}}");
  const RolloutConfig old = parse("{kind: baseline, baseline: {mode: cpp, explore_turns: 1, seed: 5}}");
  EXPECT_TRUE(now.warnings.empty()) << now.warnings[0];
  for (const RolloutConfig* c : {&now, &old}) {
    EXPECT_EQ(c->policy.kind, PolicyKind::kTemplate);
    EXPECT_EQ(c->policy.template_policy.mode, "cpp");
    EXPECT_EQ(c->policy.template_policy.explore_turns, 1);
    EXPECT_EQ(c->policy.template_policy.seed, 5u);
    EXPECT_EQ(to_json(*c)["policy"], to_json(now)["policy"]) << "a dump says the new name";
  }
  const std::shared_ptr<Policy> from_old = make_policy(old.policy);
  EXPECT_NE(dynamic_cast<TemplatePolicy*>(from_old.get()), nullptr);
  EXPECT_EQ(from_old->describe(), make_policy(now.policy)->describe());
  EXPECT_EQ(to_json(now)["policy"]["kind"], "template");

  // One warning per old spelling, each naming where it is and what to write.
  ASSERT_EQ(old.warnings.size(), 2u);
  EXPECT_NE(old.warnings[0].find("r.yaml:2"), std::string::npos) << old.warnings[0];
  EXPECT_NE(old.warnings[0].find("/policy/kind"), std::string::npos) << old.warnings[0];
  EXPECT_NE(old.warnings[0].find("kind: template"), std::string::npos) << old.warnings[0];
  EXPECT_NE(old.warnings[1].find("/policy/baseline"), std::string::npos) << old.warnings[1];
  EXPECT_NE(old.warnings[1].find("template:"), std::string::npos) << old.warnings[1];
  const RolloutConfig mixed = parse("{kind: baseline, template: {seed: 2}}");
  EXPECT_EQ(mixed.warnings.size(), 1u);
  EXPECT_EQ(mixed.policy.template_policy.seed, 2u);

  // Both sections: which one counts would be a guess, so it is an error.
  try {
    parse("{kind: template, template: {seed: 1}, baseline: {seed: 2}}");
    ADD_FAILURE() << "both sections accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/policy/baseline"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only \"template\""), std::string::npos) << e.what();
  }
  // An unknown kind's error offers the names to write, not the old one.
  try {
    parse("{kind: llama}");
    ADD_FAILURE() << "kind llama accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("template"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("baseline"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::rollout
