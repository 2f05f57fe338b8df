// Replay on the GPU machine (label gpu): techniques read from real SASS
// (nvcc/NVRTC + cuobjdump/nvdisasm), and re-evaluation of episodes recorded on
// the CUDA backend with the examples' CUDA solutions.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "kforge/core/jsonl.h"
#include "kforge/env/analysis.h"
#include "kforge/rollout/replay/replay.h"
#include "recorded_episodes.h"

namespace kforge::rollout::replay {
namespace {

namespace fs = std::filesystem;
using testing::source_dir;

bool has_evidence(const TechniqueReport& r, const std::string& technique, const std::string& prefix) {
  for (const auto& f : r.found) {
    if (f.name != technique) continue;
    for (const auto& e : f.evidence) {
      if (e.rfind(prefix, 0) == 0) return true;
    }
  }
  return false;
}

std::string describe(const TechniqueReport& r) { return to_json(r).dump(); }

env::EnvConfig cuda_config() {
  env::EnvConfig c = testing::fast_config();
  c.backend = env::BackendKind::kCuda;
  c.default_mode = SolutionMode::kCuda;
  c.prompt.skills.clear();
  return c;
}

TEST(ReplayGpuTest, SassConfirmsTheExamplesTechniques) {
  ASSERT_TRUE(env::find_cuda_binary_tool("cuobjdump")) << "the GPU machine has cuobjdump";
  const TaskSpec task = load_task(source_dir() / "examples/sum_of_squares/task.json");
  const Solution s = load_solution(source_dir() / "examples/sum_of_squares/cuda/fast.cu", SolutionMode::kCuda);
  const TechniqueReport r = find_techniques(s, &task, TechniqueOptions{});
  ASSERT_TRUE(r.sass_read) << r.sass_note;
  EXPECT_TRUE(has_evidence(r, "warp_shuffle", "sass: SHFL")) << describe(r);
  EXPECT_TRUE(has_evidence(r, "shared_memory", "sass: LDS/STS")) << describe(r);
  EXPECT_TRUE(has_evidence(r, "vectorized_access", "sass: LDG 128-bit")) << describe(r);

  const TaskSpec mm = load_task(source_dir() / "examples/matmul_bias_relu/task.json");
  const Solution tiled = load_solution(source_dir() / "examples/matmul_bias_relu/cuda/fast.cu", SolutionMode::kCuda);
  const TechniqueReport t = find_techniques(tiled, &mm, TechniqueOptions{});
  ASSERT_TRUE(t.sass_read) << t.sass_note;
  EXPECT_TRUE(has_evidence(t, "shared_memory", "sass: LDS/STS")) << describe(t);
  EXPECT_FALSE(t.has("tensor_cores")) << "an FP32 tiled GEMM: " << describe(t);
}

TEST(ReplayGpuTest, NvrtcSolutionsAreReadWithNvdisasm) {
  const TaskSpec task = load_task(source_dir() / "examples/affine_relu6/task.json");
  const Solution s = load_solution(source_dir() / "examples/affine_relu6/cuda/nvrtc_fast.yaml", SolutionMode::kNvrtc);
  const TechniqueReport r = find_techniques(s, &task, TechniqueOptions{});
  ASSERT_TRUE(r.sass_read) << r.sass_note;
  EXPECT_TRUE(r.has("vectorized_access") || r.has("read_only_cache")) << describe(r);
}

TEST(ReplayGpuTest, CudaEpisodesReevaluateOnTheCudaBackend) {
  env::Env env(cuda_config());
  const fs::path ex = source_dir() / "examples";
  std::vector<std::string> lines;
  struct Case {
    std::string task, solution, id;
  };
  const std::vector<Case> cases = {{"affine_relu6", "fast", "gpu-a"},
                                   {"sum_of_squares", "fast", "gpu-b"},
                                   {"sum_of_squares", "wrong", "gpu-c"},
                                   {"layernorm_residual", "naive", "gpu-d"}};
  fs::path file = fs::path(KFORGE_BINARY_DIR) / "tests/rollout/replay/replay-gpu-episodes.jsonl";
  {
    JsonlWriter w(file, JsonlWriter::Mode::kTruncate);
    uint64_t seed = 21;
    for (const auto& c : cases) {
      const TaskSpec task = load_task(ex / c.task / "task.json");
      w.write(testing::record_episode(
          env, task, seed++,
          {testing::tool_call("submit", testing::source_args(ex / c.task / "cuda" / (c.solution + ".cu")))},
          {c.id, "g-" + c.task, "gpu", true, true}));
    }
  }
  ReplayOptions options;
  options.reevaluate = true;
  options.reeval.repeats = 3;
  options.env = cuda_config();
  const ReplayAnalysis a = analyze_replay({file}, options);
  ASSERT_EQ(a.recorded.episodes.size(), 4u);
  ASSERT_TRUE(a.reevaluation);
  std::map<std::string, const ReevalRow*> rows;
  for (const auto& r : a.reevaluation->rows) rows[r.trajectory_id] = &r;
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows.at("gpu-c")->verdict, ReevalVerdict::kExact) << rows.at("gpu-c")->note;
  for (const char* id : {"gpu-a", "gpu-b", "gpu-d"}) {
    const ReevalRow& r = *rows.at(id);
    EXPECT_EQ(r.outcomes, (std::vector<std::string>{"correct", "correct", "correct"})) << id << ": " << r.note;
    EXPECT_NE(r.verdict, ReevalVerdict::kNotReevaluated) << id << ": " << r.note;
  }
  // The figures for the closing note: how well rewards and speedups reproduce.
  std::cout << format_reevaluation(*a.reevaluation);
  size_t sass = 0;
  for (const auto& t : a.techniques) sass += t.report.sass_read ? 1 : 0;
  EXPECT_EQ(sass, a.techniques.size()) << "every CUDA final solution's SASS was read";
}

}  // namespace
}  // namespace kforge::rollout::replay
