#include <gtest/gtest.h>

#include "kforge/data_synth/contamination.h"
#include "kforge/data_synth/graph_hash.h"

namespace kforge::synth {
namespace {

TensorSpec tensor(const std::string& name, std::vector<int64_t> shape, const std::string& init = "normal") {
  TensorSpec t;
  t.name = name;
  t.shape = std::move(shape);
  t.init.kind = init;
  return t;
}

// y = gelu(x @ w + b) + x2 * 2
TaskSpec base() {
  TaskSpec t;
  t.id = "a";
  t.inputs = {tensor("x", {64, 32}), tensor("x2", {64, 16})};
  t.params = {tensor("w", {32, 16}, "kaiming_uniform"), tensor("b", {16})};
  t.nodes = {{"matmul", {"x", "w"}, "t0", json::object()},
             {"add", {"t0", "b"}, "t1", json::object()},
             {"gelu", {"t1"}, "t2", json::object()},
             {"mul", {"x2"}, "t3", {{"other", 2.0}}},
             {"add", {"t2", "t3"}, "y", json::object()}};
  t.outputs = {"y"};
  return t;
}

TEST(GraphHashTest, RenamingReorderingAndCommutingDoNotMakeANewTask) {
  const std::string h = canonical_graph_hash(base());

  TaskSpec renamed = base();
  renamed.id = "b";
  auto rename = [&](const std::string& from, const std::string& to) {
    for (auto& i : renamed.inputs)
      if (i.name == from) i.name = to;
    for (auto& p : renamed.params)
      if (p.name == from) p.name = to;
    for (auto& n : renamed.nodes) {
      for (auto& v : n.in)
        if (v == from) v = to;
      if (n.out == from) n.out = to;
    }
    for (auto& o : renamed.outputs)
      if (o == from) o = to;
  };
  rename("x", "input");
  rename("w", "weight");
  rename("t1", "biased");
  rename("y", "out");
  EXPECT_EQ(canonical_graph_hash(renamed), h);

  TaskSpec reordered = base();
  // mul(x2) first: another valid topological order.
  reordered.nodes = {base().nodes[3], base().nodes[0], base().nodes[1], base().nodes[2], base().nodes[4]};
  EXPECT_EQ(canonical_graph_hash(reordered), h);

  TaskSpec commuted = base();
  std::swap(commuted.nodes[1].in[0], commuted.nodes[1].in[1]);  // b + t0
  std::swap(commuted.nodes[4].in[0], commuted.nodes[4].in[1]);  // t3 + t2
  EXPECT_EQ(canonical_graph_hash(commuted), h);

  TaskSpec resized = base();  // the same graph at another batch is the same task
  resized.inputs[0].shape[0] = 128;
  resized.inputs[1].shape[0] = 128;
  EXPECT_EQ(canonical_graph_hash(resized), h);
}

TEST(GraphHashTest, RealDifferencesMakeANewTask) {
  const std::string h = canonical_graph_hash(base());
  TaskSpec other_op = base();
  other_op.nodes[2].op = "silu";
  EXPECT_NE(canonical_graph_hash(other_op), h);

  TaskSpec other_attr = base();
  other_attr.nodes[3].attrs["other"] = 3.0;
  EXPECT_NE(canonical_graph_hash(other_attr), h);

  TaskSpec not_commutative = base();
  not_commutative.nodes[1].op = "sub";
  TaskSpec swapped = not_commutative;
  std::swap(swapped.nodes[1].in[0], swapped.nodes[1].in[1]);
  EXPECT_NE(canonical_graph_hash(not_commutative), canonical_graph_hash(swapped));

  // add(x, x) is not add(x, y), even though x and y have identical specs.
  TaskSpec same;
  same.id = "s";
  same.inputs = {tensor("x", {8, 8}), tensor("y", {8, 8})};
  same.nodes = {{"add", {"x", "x"}, "z", json::object()}};
  same.outputs = {"z"};
  TaskSpec two = same;
  two.nodes[0].in = {"x", "y"};
  EXPECT_NE(canonical_graph_hash(same), canonical_graph_hash(two));
}

TEST(GraphHashTest, OpSequenceIsCanonical) {
  TaskSpec reordered = base();
  reordered.nodes = {base().nodes[3], base().nodes[0], base().nodes[1], base().nodes[2], base().nodes[4]};
  EXPECT_EQ(canonical_op_sequence(reordered), canonical_op_sequence(base()));
  EXPECT_EQ(canonical_op_sequence(base()).size(), 5u);
}

using Tokens = std::vector<std::string>;

TEST(ContaminationTest, DistanceContainsAndEdits) {
  std::string rel;
  EXPECT_EQ(sequence_distance({"gemm", "mul", "leaky_relu"}, {"gemm", "mul", "leaky_relu"}, &rel), 0.0);
  EXPECT_EQ(rel, "equal");
  EXPECT_EQ(sequence_distance({"gemm", "mul", "leaky_relu", "tanh"}, {"gemm", "mul", "leaky_relu"}, &rel), 0.0);
  EXPECT_EQ(rel, "contains");
  EXPECT_NEAR(sequence_distance({"gemm", "mul", "relu"}, {"gemm", "mul", "leaky_relu"}), 1.0 / 3, 1e-12);
  EXPECT_NEAR(sequence_distance({"gemm", "relu"}, {"gemm"}), 0.5, 1e-12) << "one-op problems are never contained";
  EXPECT_EQ(sequence_distance({"erf"}, {"gemm"}, &rel), 1.0);
  EXPECT_EQ(rel, "disjoint");
}

// Cores by meaning: composites fused, the clamp family one token, layout ops
// and scalar/bias epilogues gone.
TEST(ContaminationTest, CoresAreComparedByMeaning) {
  EXPECT_EQ(contamination_core({"abs", "add@scalar", "div"}), Tokens{"softsign"});
  EXPECT_EQ(contamination_core({"pow@scalar", "mean", "add@scalar", "sqrt", "div"}), Tokens{"rms_norm"});
  EXPECT_EQ(contamination_core({"pow@scalar", "mean", "add@scalar", "rsqrt", "mul"}), Tokens{"rms_norm"});
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch.fx records it.
  EXPECT_EQ(
      contamination_core({"mul@scalar", "pow@scalar", "mul@scalar", "add", "mul@scalar", "tanh", "add@scalar", "mul"}),
      Tokens{"gelu"});
  EXPECT_EQ(contamination_core({"linear", "sigmoid", "mul", "mul@scalar"}), (Tokens{"gemm", "silu"}));
  EXPECT_EQ(contamination_core({"conv2d", "softplus", "tanh", "mul", "batch_norm"}),
            (Tokens{"conv2d", "mish", "batch_norm"}));
  EXPECT_EQ(contamination_core({"add@scalar", "relu6", "mul", "div@scalar"}), Tokens{"hardswish"});
  // min/max with a scalar are clamps, and a clamp of a clamp is one.
  EXPECT_EQ(contamination_core({"conv_transpose3d", "clamp", "minimum@scalar", "div@scalar"}),
            (Tokens{"conv_transpose3d", "clamp"}));
  EXPECT_EQ(contamination_core({"linear", "reshape", "div@scalar", "hardtanh", "add@bias"}), (Tokens{"gemm", "clamp"}));
  // Tensor-tensor arithmetic and reductions keep their tokens.
  EXPECT_EQ(contamination_core({"matmul", "add", "amin", "sub"}), (Tokens{"gemm", "add", "min", "add"}));
}

TEST(ContaminationTest, TaskOpsAreMarkedAsKernelBenchsAre) {
  // base(): matmul, add of the bias param, gelu, x2 * 2, the add of two values.
  EXPECT_EQ(contamination_ops(base()), (Tokens{"matmul", "add@bias", "gelu", "mul@scalar", "add"}));
  EXPECT_EQ(contamination_core(contamination_ops(base())), (Tokens{"gemm", "gelu", "add"}));
}

TEST(ContaminationTest, CommittedSignaturesRejectKernelBenchCopies) {
  const KernelBenchSignatures sigs = KernelBenchSignatures::load(default_signature_path());
  EXPECT_GE(sigs.problems().size(), 240u);
  // level2/12: Gemm, Multiply, LeakyReLU, as a synthesized graph would spell it.
  NearestProblem n = sigs.nearest({"matmul", "mul@scalar", "leaky_relu"});
  EXPECT_EQ(n.distance, 0.0);
  EXPECT_NE(n.problem.find("level2/12_Gemm_Multiply_LeakyReLU"), std::string::npos) << n.problem;
  // Containing a problem is contamination too.
  n = sigs.nearest({"linear", "mul@scalar", "leaky_relu", "sigmoid", "sum"});
  EXPECT_EQ(n.distance, 0.0);
  EXPECT_EQ(n.relation, "contains");
  // A single op is a level-1 problem, and so is a single op with only a
  // scalar or bias epilogue.
  EXPECT_EQ(sigs.nearest({"softmax"}).distance, 0.0);
  n = sigs.nearest({"gelu", "add@bias", "mul@scalar"});
  EXPECT_EQ(n.distance, 0.0) << n.why;
  EXPECT_EQ(n.relation, "equal") << n.why;
  // What an audit of an H200 set found accepted (docs/data-synthesis.md#contamination-against-kernelbench):
  // by meaning, copies.
  n = sigs.nearest({"softsign"});
  EXPECT_EQ(n.problem, "level1/30_Softsign") << n.why;
  EXPECT_EQ(n.distance, 0.0);
  n = sigs.nearest({"rms_norm"});
  EXPECT_EQ(n.problem, "level1/36_RMSNorm_") << n.why;
  EXPECT_EQ(n.distance, 0.0);
  n = sigs.nearest({"linear", "minimum@scalar"});
  EXPECT_EQ(n.distance, 0.0) << n.why;
  EXPECT_EQ(n.problem_core, (Tokens{"gemm", "clamp"})) << n.why;
  n = sigs.nearest({"conv_transpose3d", "maximum@scalar"});
  EXPECT_EQ(n.distance, 0.0) << n.why;
  EXPECT_NE(n.why.find("contaminated: core [conv_transpose3d, clamp]"), std::string::npos) << n.why;
  // Once untraceable (shape unpacking in forward()), now compared.
  n = sigs.nearest({"conv_transpose2d", "add@scalar", "minimum@scalar", "gelu", "mul@scalar"});
  EXPECT_EQ(n.distance, 0.0) << n.why;
  // Two GEMMs in a row are not attention: level3/43 and 50 are compared by
  // what forward() does, not by their two Linear modules.
  n = sigs.nearest({"linear", "linear"});
  EXPECT_GT(n.distance, kContaminationThreshold) << n.why;
  // Something KernelBench does not have; its nearest problem shares a token
  // (ties go to common tokens, then level, never to the file's first entry).
  n = sigs.nearest({"erf", "cumsum", "rsqrt", "amin"});
  EXPECT_GT(n.distance, kContaminationThreshold) << n.problem;
  EXPECT_NE(n.problem, "level1/1_Square_matrix_multiplication_") << n.why;
  EXPECT_NE(n.why.find("passed: core [erf, cumsum, rsqrt, min]"), std::string::npos) << n.why;
}

TEST(ContaminationTest, MalformedSignatureFilesAreNamed) {
  try {
    KernelBenchSignatures::from_json(json{{"problems", {{{"name", "x"}, {"ops", "relu"}}}}}, "sigs.json");
    FAIL() << "accepted ops that are not a list";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/problems/0/ops"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::synth
