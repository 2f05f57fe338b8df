// Difficulty labels (roofline.h), the split by families (splits.h), the reach
// estimate's pass share (reach.h) and the output-magnitude filter.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "kforge/data_synth/filters.h"
#include "kforge/data_synth/reach.h"
#include "kforge/data_synth/roofline.h"
#include "kforge/data_synth/splits.h"

namespace kforge::synth {
namespace {

TensorSpec tensor(const std::string& name, std::vector<int64_t> shape, const std::string& init = "normal") {
  TensorSpec t;
  t.name = name;
  t.shape = std::move(shape);
  t.init.kind = init;
  return t;
}

TaskSpec task_of(std::vector<TensorSpec> inputs, std::vector<TensorSpec> params, std::vector<GraphNode> nodes,
                 const std::string& id = "test/difficulty") {
  TaskSpec t;
  t.id = id;
  t.source = "synth";
  t.inputs = std::move(inputs);
  t.params = std::move(params);
  t.nodes = std::move(nodes);
  t.outputs = {t.nodes.back().out};
  t.tolerance = Tolerance{1e-2, 1e-2};
  return t;
}

// y = relu(x @ w): 2 M K N FLOPs on the tensor cores; x, w read and y written once.
TaskSpec gemm_relu(int64_t m, int64_t k, int64_t n) {
  return task_of({tensor("x", {m, k})}, {tensor("w", {k, n}, "kaiming_uniform")},
                 {{"matmul", {"x", "w"}, "t0", json::object()}, {"relu", {"t0"}, "y", json::object()}});
}

TEST(DifficultyTest, TheRooflineBoundCountsBytesAndFlopsOnce) {
  const TaskSpec t = gemm_relu(4096, 4096, 4096);
  const DeviceRoofline h200 = roofline_for("NVIDIA H200", "cuda");
  EXPECT_FALSE(h200.assumed);
  const RooflineBound b = roofline_bound(t, h200);
  EXPECT_DOUBLE_EQ(b.bytes, 3.0 * 4096 * 4096 * 4);
  EXPECT_DOUBLE_EQ(b.main_loop_flops, 2.0 * 4096 * 4096 * 4096);
  EXPECT_GE(b.flops, b.main_loop_flops);
  // 137 GFLOP at TF32's 494.7 TFLOP/s is ~0.28 ms; 201 MB at 4.8 TB/s ~0.04 ms.
  EXPECT_NEAR(b.bound_ms, b.compute_ms, 1e-12);
  EXPECT_NEAR(b.compute_ms, 0.278, 0.01);
  // The H100 has less bandwidth, the same tensor-core rate.
  const RooflineBound h100 = roofline_bound(t, roofline_for("NVIDIA H100 80GB HBM3", "cuda"));
  EXPECT_GT(h100.memory_ms, b.memory_ms);
  EXPECT_NEAR(h100.compute_ms, b.compute_ms, 1e-12);
  EXPECT_TRUE(roofline_for("Some Future GPU", "cuda").assumed);
}

TEST(DifficultyTest, TheLabelCarriesTheMeasuredHeadroom) {
  TaskSpec t = gemm_relu(256, 256, 256);
  t.baselines = Baselines{"NVIDIA H200", 0.5, std::nullopt};
  const json label = difficulty_label(t, "cuda", 12.0);
  const double bound = label["bound_ms"].get<double>();
  ASSERT_GT(bound, 0.0);
  EXPECT_DOUBLE_EQ(label["headroom"].get<double>(), 0.5 / bound);
  EXPECT_EQ(label["roofline"]["name"], "NVIDIA H200");
  EXPECT_EQ(label["predicted_headroom"], 12.0);
  t.baselines.reset();
  EXPECT_TRUE(difficulty_label(t, "cuda", 12.0)["headroom"].is_null()) << "no measurement, no headroom";
  // A bigger GEMM has more headroom in eager PyTorch's cost model: the
  // curriculum's order.
  EXPECT_GT(predicted_headroom(gemm_relu(256, 4096, 4096), cuda_profile(), "cuda"),
            predicted_headroom(task_of({tensor("x", {4096, 4096})}, {},
                                       {{"gelu", {"x"}, "t0", json::object()}, {"mul", {"t0"}, "y", {{"other", 2.0}}}}),
                               cuda_profile(), "cuda"));
}

TEST(SplitTest, ParseSplitNamesTheFieldOnBadInput) {
  const SplitFractions f = parse_split("80,10,10");
  EXPECT_NEAR(f.train, 0.8, 1e-12);
  EXPECT_NEAR(f.test, 0.1, 1e-12);
  for (const char* bad : {"0.8,0.2", "a,b,c", "0,0,0", "-1,1,1", "0.8,,0.1"}) {
    try {
      parse_split(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--split"), std::string::npos) << e.what();
    }
  }
}

TaskSpec family_task(const std::vector<std::string>& heavy, int variant) {
  // x (64, 256) through the heavy ops (each keeps the shape), then a
  // pointwise op that differs by `variant`: the same family, other tasks.
  std::vector<GraphNode> nodes;
  std::string cur = "x";
  for (size_t i = 0; i < heavy.size(); ++i) {
    const std::string out = "h" + std::to_string(i);
    const bool norm = heavy[i] == "layer_norm" || heavy[i] == "rms_norm";
    const json attrs = norm ? json{{"normalized_ndim", 1}} : json{{"dim", -1}};
    nodes.push_back({heavy[i], {cur}, out, attrs});
    cur = out;
  }
  const std::vector<std::string> pointwise = {"gelu", "tanh", "sin", "cos", "erf"};
  nodes.push_back({pointwise[static_cast<size_t>(variant) % pointwise.size()], {cur}, "y", json::object()});
  return task_of({tensor("x", {64, 256})}, {}, nodes, "t" + std::to_string(variant));
}

TEST(SplitTest, FamiliesNeverStraddleAndNoTestCoreIsInTrain) {
  std::vector<TaskSpec> tasks;
  const std::vector<std::vector<std::string>> families = {{"layer_norm", "softmax"},
                                                          {"layer_norm", "softmax", "log_softmax"},
                                                          {"softmax", "layer_norm"},
                                                          {"log_softmax", "rms_norm"},
                                                          {"rms_norm"},
                                                          {"layer_norm", "log_softmax"},
                                                          {}};
  int k = 0;
  for (const auto& f : families) {
    for (int i = 0; i < 5; ++i) tasks.push_back(family_task(f, k++));
  }
  const SplitAssignment a = split_tasks(tasks, parse_split("0.6,0.2,0.2"));
  ASSERT_EQ(a.split.size(), tasks.size());
  std::map<std::string, std::set<std::string>> splits_of_family;
  for (size_t i = 0; i < tasks.size(); ++i) splits_of_family[family_name(family_core(tasks[i]))].insert(a.split[i]);
  for (const auto& [family, splits] : splits_of_family) EXPECT_EQ(splits.size(), 1u) << family;
  // [layer_norm, softmax] sits inside [layer_norm, softmax, log_softmax]: one group.
  EXPECT_EQ(splits_of_family["layer_norm>softmax"], splits_of_family["layer_norm>softmax>log_softmax"]);
  EXPECT_EQ(a.report["test_cores_in_train"], 0);
  EXPECT_EQ(a.report["validation_cores_in_train"], 0);
  EXPECT_GT(a.report["tasks"]["test"].get<int>(), 0) << a.report.dump();
  EXPECT_GT(a.report["tasks"]["train"].get<int>(), a.report["tasks"]["test"].get<int>()) << a.report.dump();
  // The same set in another order gives the same split per task.
  std::vector<TaskSpec> reversed(tasks.rbegin(), tasks.rend());
  const SplitAssignment b = split_tasks(reversed, parse_split("0.6,0.2,0.2"));
  for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(a.split[i], b.split[tasks.size() - 1 - i]) << i;
}

TEST(ReachTest, ThePassShareCountsOnlyWhatTheFiltersAndJudgeRejected) {
  const json rejections = {{"shape_search", 500}, {"contaminated", 300}, {"duplicate", 2},
                           {"op_is_noop", 60},    {"nan_inf", 20},       {"judge_check", 20}};
  EXPECT_DOUBLE_EQ(filter_pass_share(100, rejections), 100.0 / 200.0);
  EXPECT_EQ(filter_pass_share(0, json::object()), 0.0);
}

TEST(FiltersTest, OutputsThatNeedAtolAbove1024AreRejected) {
  // exp(exp(x)) of x ~ N(3, 0.1): outputs near e^20 ~ 5e8.
  TaskSpec t = task_of({tensor("x", {64, 256})}, {},
                       {{"exp", {"x"}, "t0", json::object()}, {"exp", {"t0"}, "y", json::object()}});
  t.inputs[0].init.mean = 3.0;
  t.inputs[0].init.std = 0.1;
  FilterOptions o;
  o.window = {0.0001, 1000.0};
  const FilterVerdict v = run_filters(t, o);
  EXPECT_EQ(v.reason, "output_magnitude") << v.reason << ": " << v.detail;
  EXPECT_GT(v.atol_scale, 1024.0);
}

}  // namespace
}  // namespace kforge::synth
