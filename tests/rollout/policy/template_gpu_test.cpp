// The template policy's CUDA templates judged on a GPU (ctest -L gpu): every
// generated variant of every test task correct under the production checks,
// the variants' speeds differ, and a rollout with the template policy completes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "kforge/env/env_pool.h"
#include "kforge/rollout/jsonl_sink.h"
#include "kforge/rollout/policy/template_policy.h"
#include "kforge/rollout/trajectory_info.h"
#include "kforge/rollout/worker/rollout_runner.h"
#include "rollout_test_util.h"

namespace kforge::rollout {
namespace {

env::EnvConfig gpu_config() {
  env::EnvConfig c = env::load_env_config("cuda");
  c.eval.seeds = 5;
  c.eval.warmup_ms = 5;
  c.eval.max_time_ms = 200;
  c.eval.hardware_metrics = false;
  c.compile.cache_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/gym/compile-cache";
  return c;
}

TEST(TemplateGpuTest, AllVariantsAreCorrectOnTheGpuAndTheirSpeedsDiffer) {
  const std::vector<std::string> names = {
      "affine_relu6",       "bias_gelu_residual",    "layernorm_residual",     "matmul_bias_relu", "sum_of_squares",
      "softmax_scale",      "rmsnorm_silu",          "column_stats",           "linear_gelu",      "bmm_scale",
      "instance_norm_relu", "logsumexp_mid",         "bmm_many_batches",       "conv2d_bias_relu", "conv1d_groups_tanh",
      "conv3d_scale",       "conv_transpose2d_bias", "conv_transpose1d_groups"};
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& n : names) {
    for (const auto& v : template_variants("cuda", 4, std::hash<std::string>{}(n))) items.emplace_back(n, v);
    items.emplace_back(n, "fuse=0 block=128 vec=1 unroll=1 acc=4 tile=16 naive_matmul=1");
  }
  env::EnvPool pool(gpu_config(), static_cast<int>(items.size()));
  std::vector<Action> actions;
  std::vector<int> ids;
  for (size_t i = 0; i < items.size(); ++i) {
    const TaskSpec t = testing::task(items[i].first);
    pool.reset(static_cast<int>(i), t, i);
    Action a;
    a.type = ActionType::kSubmit;
    Solution s;
    s.mode = SolutionMode::kCuda;
    s.source = template_source(t, "cuda", items[i].second);
    a.solution = s;
    actions.push_back(a);
    ids.push_back(static_cast<int>(i));
  }
  pool.send(actions, ids);
  std::map<std::string, std::pair<double, double>> range;
  for (size_t got = 0; got < items.size();) {
    for (auto& r : pool.recv(1)) {
      ++got;
      const auto& [task, variant] = items[static_cast<size_t>(r.env_id)];
      const env::StepInfo& info = r.result.info;
      const double s = info.measurement.speedup_eager.value_or(0.0);
      const std::string outcome = outcome_name(info.measurement.outcome);
      std::printf("[template-gpu] %-20s %-62s %-8s %6.2fx\n", task.c_str(), variant.c_str(), outcome.c_str(), s);
      EXPECT_EQ(outcome, "correct") << task << " / " << variant << ": "
                                    << (info.eval_report ? info.eval_report->summary : "") << "\n"
                                    << r.result.observation.text;
      if (s > 0) {
        auto [it, fresh] = range.emplace(task, std::make_pair(s, s));
        if (!fresh) it->second = {std::min(it->second.first, s), std::max(it->second.second, s)};
      }
    }
  }
  int differ = 0;
  for (const auto& [task, r] : range) differ += r.second / r.first > 1.2;
  EXPECT_GE(differ, 3) << "variants of at least three tasks differ by more than 20% in speed";
}

TEST(TemplateGpuTest, ARolloutWithTheTemplatePolicyOnTheGpuCompletes) {
  RolloutConfig c;
  c.env = "cuda";
  c.tasks = testing::tasks_dir();
  c.groups = 4;
  c.group_size = 2;
  c.concurrency = 8;
  c.max_turns = 4;
  c.policy.template_policy.mode = "auto";
  c.output = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/rollout/gpu_rollout.jsonl";
  JsonlTrajectorySink sink(c.output);
  RolloutRunner runner(c, make_policy(c.policy), {&sink});
  const RolloutStats stats = runner.run();
  std::printf("[template-gpu] rollout: %s\n", stats.to_json().dump().c_str());
  EXPECT_EQ(stats.episodes_written, 8);
  EXPECT_EQ(stats.policy_errors, 0);
  int correct = 0;
  for (const Trajectory& t : read_trajectories(c.output)) {
    const TurnInfo last = turn_info_from_json(t.turns.back().info, "trajectory " + t.id + ": last turn info");
    ASSERT_TRUE(last.env.has_value());
    correct += last.env->measurement.correct();
    // auto picked the CUDA templates: the tools offer a mode choice there.
    EXPECT_NE(t.turns[0].action["function"]["arguments"].get<std::string>().find("__global__"), std::string::npos);
  }
  EXPECT_EQ(correct, 8);
}

}  // namespace
}  // namespace kforge::rollout
