// Contamination by what the kernel must do (contamination.h), against the
// committed KernelBench signature file: the tasks an independent audit found
// to be a KernelBench problem plus a trivial epilogue or prologue are
// rejected, on both device profiles; genuinely new fusions are kept.
#include <gtest/gtest.h>

#include "kforge/data_synth/contamination.h"
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

TaskSpec task_of(std::vector<TensorSpec> inputs, std::vector<TensorSpec> params, std::vector<GraphNode> nodes) {
  TaskSpec t;
  t.id = "test/work";
  t.source = "synth";
  t.inputs = std::move(inputs);
  t.params = std::move(params);
  t.nodes = std::move(nodes);
  t.outputs = {t.nodes.back().out};
  return t;
}

const KernelBenchSignatures& signatures() {
  static const KernelBenchSignatures kSignatures = KernelBenchSignatures::load(default_signature_path());
  return kSignatures;
}

struct Verdict {
  bool contaminated;
  NearestProblem nearest;
};

Verdict judge(const TaskSpec& t, const DeviceProfile& profile) {
  const NearestProblem n = signatures().judge(t, profile);
  return {!n.problem.empty() && n.distance <= kContaminationThreshold, n};
}

// Rejected on the CPU and the CUDA profile alike, by `relation` against a
// problem whose name starts with `problem`.
void expect_rejected(const TaskSpec& t, const std::string& relation, const std::string& problem) {
  for (const DeviceProfile* p : {&cpu_profile(), &cuda_profile()}) {
    const Verdict v = judge(t, *p);
    EXPECT_TRUE(v.contaminated) << p->name << ": " << v.nearest.why;
    EXPECT_EQ(v.nearest.relation, relation) << p->name << ": " << v.nearest.why;
    EXPECT_EQ(v.nearest.problem.rfind(problem, 0), 0u) << p->name << ": " << v.nearest.problem << " " << v.nearest.why;
  }
}

void expect_kept(const TaskSpec& t) {
  for (const DeviceProfile* p : {&cpu_profile(), &cuda_profile()}) {
    const Verdict v = judge(t, *p);
    EXPECT_FALSE(v.contaminated) << p->name << ": " << v.nearest.why;
  }
}

TEST(ContaminationByWorkTest, AGemmWithASignIsLevel1Matmul) {
  expect_rejected(task_of({tensor("x", {256, 512})}, {tensor("w", {512, 512}, "kaiming_uniform")},
                          {{"matmul", {"x", "w"}, "t0", json::object()}, {"neg", {"t0"}, "y", json::object()}}),
                  "dominant", "level1/");
  expect_rejected(task_of({tensor("x", {256, 512})},
                          {tensor("w", {256, 512}, "kaiming_uniform"), tensor("b", {256}), tensor("c", {256})},
                          {{"linear", {"x", "w", "b"}, "t0", json::object()},
                           {"neg", {"t0"}, "t1", json::object()},
                           {"add", {"t1", "c"}, "y", json::object()}}),
                  "dominant", "level1/");
}

// A 1,000-task H100 set had seven tasks such as `selu, adaptive_avg_pool1d`:
// an adaptive pool is KernelBench's pooling problem with the window its
// output size implies, and the activation before it is free in the kernel.
TEST(ContaminationByWorkTest, AnAdaptivePoolWithAPrologueIsLevel1Pooling) {
  expect_rejected(
      task_of({tensor("x", {64, 128, 4096})}, {},
              {{"selu", {"x"}, "t0", json::object()}, {"adaptive_avg_pool1d", {"t0"}, "y", {{"output_size", 2}}}}),
      "dominant", "level1/44_");
  expect_rejected(task_of({tensor("x", {16, 32, 256, 256})}, {},
                          {{"exp", {"x"}, "t0", json::object()},
                           {"adaptive_max_pool2d", {"t0"}, "y", {{"output_size", json::array({4, 4})}}}}),
                  "dominant", "level1/42_");
}

TEST(ContaminationByWorkTest, AConvolutionWithASignIsLevel1Conv) {
  expect_rejected(task_of({tensor("x", {16, 32, 64, 64})}, {tensor("w", {64, 32, 3, 3}, "kaiming_uniform")},
                          {{"conv2d", {"x", "w"}, "t0", json::object()}, {"neg", {"t0"}, "y", json::object()}}),
                  "dominant", "level1/50_");
  expect_rejected(
      task_of({tensor("x", {8, 32, 32, 32})}, {tensor("w", {32, 16, 4, 4}, "kaiming_uniform")},
              {{"conv_transpose2d", {"x", "w"}, "t0", {{"stride", 2}}}, {"neg", {"t0"}, "y", json::object()}}),
      "dominant", "level1/57_");
}

TEST(ContaminationByWorkTest, PointwiseChainsWithALevel1ActivationAreThatProblem) {
  expect_rejected(task_of({tensor("x", {64, 4096}), tensor("x2", {64, 4096})}, {},
                          {{"minimum", {"x", "x2"}, "t0", json::object()}, {"tanh", {"t0"}, "y", json::object()}}),
                  "pointwise", "level1/22_Tanh");
  expect_rejected(task_of({tensor("x", {64, 4096})}, {},
                          {{"hardtanh", {"x"}, "t0", json::object()}, {"relu", {"t0"}, "y", json::object()}}),
                  "pointwise", "level1/19_ReLU");
}

TEST(ContaminationByWorkTest, ANormAfterCheapWorkIsThatNorm) {
  expect_rejected(task_of({tensor("x", {64, 1024})}, {},
                          {{"div", {"x"}, "t0", {{"other", 2.0}}},
                           {"hardtanh", {"t0"}, "t1", json::object()},
                           {"layer_norm", {"t1"}, "y", {{"normalized_ndim", 1}}}}),
                  "dominant", "level1/40_LayerNorm");
}

// The softmax takes ~7 % of the cost model's time after the convolution:
// the kernel to write is the convolution.
TEST(ContaminationByWorkTest, ACheapSoftmaxAfterAConvolutionIsTheConvolution) {
  const TaskSpec t = task_of({tensor("x", {16, 32, 64, 64}), tensor("r", {16, 64, 62, 62})},
                             {tensor("w", {64, 32, 3, 3}, "kaiming_uniform")},
                             {{"conv2d", {"x", "w"}, "t0", json::object()},
                              {"add", {"t0", "r"}, "t1", json::object()},
                              {"softmax", {"t1"}, "y", {{"dim", 1}}}});
  expect_rejected(t, "dominant", "level1/50_");
  const DominantPart d = dominant_part(t, cuda_profile());
  EXPECT_EQ(d.skeleton, (std::vector<std::string>{"conv2d", "softmax"}));
  EXPECT_EQ(d.dominant, (std::vector<std::string>{"conv2d"}));
  EXPECT_GT(d.dominant_share, 0.75);
  ASSERT_EQ(d.rest.size(), 2u);
  EXPECT_EQ(d.rest[0], "add");
}

// level2/99 is [gemm, gelu, softmax] (and level2/66 [gemm, softmax]): with a sign between its ops and a
// LayerNorm after them (a real share of the work: the dominant part is
// [gemm, softmax, layer_norm], no problem's), the task still computes it whole.
TEST(ContaminationByWorkTest, ALevel2ProblemInsideATaskIsASubgraph) {
  expect_rejected(task_of({tensor("x", {512, 64})}, {tensor("w", {64, 64}, "kaiming_uniform")},
                          {{"matmul", {"x", "w"}, "t0", json::object()},
                           {"neg", {"t0"}, "t1", json::object()},
                           {"gelu", {"t1"}, "t2", json::object()},
                           {"softmax", {"t2"}, "t3", {{"dim", -1}}},
                           {"layer_norm", {"t3"}, "y", {{"normalized_ndim", 1}}}}),
                  "subgraph", "level2/");
  EXPECT_TRUE(contains_with_cheap_gaps({"gemm", "gelu", "neg", "softmax"}, {"gemm", "gelu", "softmax"}));
  EXPECT_FALSE(contains_with_cheap_gaps({"gemm", "gelu", "sum", "softmax"}, {"gemm", "gelu", "softmax"}))
      << "a heavy op between the problem's ops is not a cheap gap";
}

TEST(ContaminationByWorkTest, NewFusionsAreKept) {
  // A GEMM chain with a LayerNorm that is a real share of the work.
  expect_kept(task_of({tensor("x", {1024, 64})},
                      {tensor("w1", {64, 64}, "kaiming_uniform"), tensor("w2", {64, 64}, "kaiming_uniform")},
                      {{"matmul", {"x", "w1"}, "t0", json::object()},
                       {"layer_norm", {"t0"}, "t1", {{"normalized_ndim", 1}}},
                       {"matmul", {"t1", "w2"}, "y", json::object()}}));
  // Two row-wise passes that no KernelBench problem chains.
  expect_kept(task_of({tensor("x", {64, 4096})}, {},
                      {{"layer_norm", {"x"}, "t0", {{"normalized_ndim", 1}}},
                       {"sin", {"t0"}, "t1", json::object()},
                       {"log_softmax", {"t1"}, "y", {{"dim", -1}}}}));
  // A GEMM and the variance of its rows.
  expect_kept(task_of({tensor("x", {1024, 64})}, {tensor("w", {64, 64}, "kaiming_uniform")},
                      {{"matmul", {"x", "w"}, "t0", json::object()},
                       {"tanh", {"t0"}, "t1", json::object()},
                       {"var", {"t1"}, "y", {{"dim", std::vector<int64_t>{1}}}}}));
}

// Attention scores, softmax and the weighted sum: the scores and softmax are
// level2/66's core, contained as a contiguous run.
TEST(ContaminationByWorkTest, AttentionContainsMatmulSoftmax) {
  const Verdict v =
      judge(task_of({tensor("q", {64, 128, 32}), tensor("k", {64, 32, 128}), tensor("v", {64, 128, 32})}, {},
                    {{"bmm", {"q", "k"}, "t0", json::object()},
                     {"softmax", {"t0"}, "t1", {{"dim", -1}}},
                     {"bmm", {"t1", "v"}, "y", json::object()}}),
            cuda_profile());
  EXPECT_TRUE(v.contaminated) << v.nearest.why;
  EXPECT_EQ(v.nearest.relation, "contains") << v.nearest.why;
}

TEST(ContaminationByWorkTest, WorkKindsAndSkeletons) {
  EXPECT_EQ(work_kind("gemm"), WorkKind::kMainLoop);
  EXPECT_EQ(work_kind("conv_transpose3d"), WorkKind::kMainLoop);
  EXPECT_EQ(work_kind("clamp"), WorkKind::kCheap);
  EXPECT_EQ(work_kind("silu"), WorkKind::kCheap);
  EXPECT_EQ(work_kind("tril"), WorkKind::kCheap);
  EXPECT_EQ(work_kind("rms_norm"), WorkKind::kHeavy);
  EXPECT_EQ(work_kind("argmax"), WorkKind::kHeavy);
  EXPECT_EQ(work_kind("torch:einsum"), WorkKind::kHeavy) << "outside the vocabulary is not assumed cheap";
  EXPECT_EQ(core_skeleton({"gemm", "mul", "gelu", "softmax", "cat"}), (std::vector<std::string>{"gemm", "softmax"}));
}

TEST(ContaminationByWorkTest, TheFamilyIsTheSkeleton) {
  const TaskSpec t = task_of({tensor("x", {64, 4096})}, {},
                             {{"layer_norm", {"x"}, "t0", {{"normalized_ndim", 1}}},
                              {"gelu", {"t0"}, "t1", json::object()},
                              {"softmax", {"t1"}, "y", {{"dim", -1}}}});
  EXPECT_EQ(family_name(family_core(t)), "layer_norm>softmax");
  const TaskSpec pointwise = task_of({tensor("x", {64, 4096})}, {},
                                     {{"sin", {"x"}, "t0", json::object()}, {"cos", {"t0"}, "y", json::object()}});
  EXPECT_EQ(family_name(family_core(pointwise)), "pointwise");
}

}  // namespace
}  // namespace kforge::synth
